"""``analyze``'s report of traces profiled shard by shard (``offline.on_disk``), byte for byte the
report ``analyze`` writes of traces profiled in memory."""

from __future__ import annotations

from collections.abc import Iterator

from ..core.findings import find_all
from ..offline.on_disk import ShardedAnalysis
from ..offline.options import AnalyzeOptions
from ..report.cross_trace import MANY_TRACES, compose_report, render_many_traces, slowest_first, trace_detail
from . import budgets
from .analyze_json import write_json_report
from .arguments import write_output


def write_report(analysis: ShardedAnalysis, options: AnalyzeOptions, output: str | None) -> tuple[bool, int]:
    """Write the report to ``output`` (standard output when None): whether it was written, and how
    many budget overruns there were (each printed on standard error)."""
    if options.format == "text":
        written = write_output(output, _text_report(analysis, options))
    else:
        kept = [analysis.totals[trace_id] for _, trace_id, _, _ in analysis.index]
        files = [file.to_dict() for file in analysis.parted.files]
        written = write_json_report(output, files, kept, (trace.calls for trace in kept), analysis.payloads())
    if not written:
        return False, 0
    over_budget = budgets.print_overruns(analysis.findings) if budgets.has_budgets(options.finding_options) else 0
    return True, over_budget


def _text_report(analysis: ShardedAnalysis, options: AnalyzeOptions) -> str:
    index = analysis.index
    if not index:
        return "No traces to report.\n"
    max_spans, ascii_only = options.max_spans, options.ascii_only
    traces = [analysis.totals[trace_id] for _, trace_id, _, _ in index]
    summary_findings = analysis.findings if options.findings else None
    if len(traces) <= MANY_TRACES or not options.every_trace:
        # Few traces are all shown in detail; else the slowest: profiled again, from their shards.
        wanted = traces if len(traces) <= MANY_TRACES else sorted(traces, key=slowest_first)[: options.top]
        profiles = analysis.profiles_again([trace.trace_id for trace in wanted])
        full = (
            {profile.trace_id: find_all(profile, options.finding_options) for profile in profiles}
            if options.findings
            else None
        )
        if len(traces) <= MANY_TRACES:
            return render_many_traces(profiles, max_spans=max_spans, ascii_only=ascii_only, findings=full)

        def details(budget: int | None) -> Iterator[str]:
            for profile in profiles:
                found = (full or {}).get(profile.trace_id)
                yield trace_detail(profile, found, max_spans=max_spans, ascii_only=ascii_only, max_lines=budget)

        return compose_report(
            traces,
            summary_findings,
            details,
            len(profiles),
            every=False,
            ascii_only=ascii_only,
            max_lines=options.max_lines,
        )
    stored = (payload.decode() for payload in analysis.payloads())
    return compose_report(traces, summary_findings, lambda _: stored, len(traces), every=True, ascii_only=ascii_only)

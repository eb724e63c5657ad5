"""The ``otel-agent-profiler report`` command: trace files in, one self-contained HTML report out."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ..core.units import plural
from ..report.progress import Progress, progress_enabled
from . import arguments, budgets, process_end, sources
from .arguments import (
    EXIT_BAD_INPUT,
    EXIT_FAILURE,
    error,
    exit_code,
    write_output,
    write_streamed,
)

if TYPE_CHECKING:
    from ..core.findings import Finding, FindingOptions
    from ..offline.inputs import OfflineInputs

HELP = "write a self-contained HTML report (flame graph, waterfall, categories, findings, cross-run charts)"
DESCRIPTION = (
    "Profile the traces in the given files (read as analyze reads them) and write one self-contained "
    "HTML file (inline CSS, JavaScript and SVG; opens offline): a table of the traces, and for the chosen "
    "one (default: the slowest; click another in the table) a flame chart and a waterfall with the "
    "critical path highlighted, time by category and the findings with their estimated savings; with "
    "several traces, also duration percentiles per category and operation, the concurrency of LLM and "
    "tool calls and the most frequent call sequences. "
    "Instead of files, the traces can be read from Jaeger, Tempo or Phoenix (--jaeger, --tempo, --phoenix: "
    "see 'reading from a trace store' below). "
    "With --prometheus URL, the LLM calls also get the load of the inference server (vLLM, SGLang) that "
    "Prometheus recorded while they ran. "
    "A file that cannot be read is reported on standard "
    f"error and the others are still used; the exit code is then {EXIT_BAD_INPUT}. {budgets.EXIT_CODES_HELP}"
)


def add_arguments(report: argparse.ArgumentParser) -> None:
    arguments.add_files_argument(report)
    report.add_argument("--html", required=True, metavar="PATH", help="HTML file to write")
    report.add_argument(
        "--trace", metavar="TRACE_ID", help="trace the views open with (hex trace id; default: the slowest)"
    )
    report.add_argument(
        "--summary-json",
        metavar="PATH",
        help=(
            "also write every number the report shows as JSON to PATH: profiles and findings of every trace, "
            "statistics, throughput, concurrency and its spikes, call sequences, forecasts "
            "(format: see otel_agent_profiler.report.summary)"
        ),
    )
    report.add_argument(
        "--spike-threshold",
        type=arguments.non_negative_int,
        metavar="N",
        help=(
            "concurrency spikes in the summary JSON are the periods with more than N LLM and tool calls at once "
            "(default: the level exceeded less than 5%% of the busy time)"
        ),
    )
    report.add_argument(
        "--prefix-cache",
        action="store_true",
        help=(
            "add prompt prefixes that several LLM calls of one model share (caching candidates) to the summary "
            "JSON; reads captured prompt content, so it is off by default"
        ),
    )
    arguments.add_min_saving_option(report)
    budgets.add_budget_option(report)
    arguments.add_prices_option(report)
    arguments.add_context_windows_option(report)
    arguments.add_workers_option(report)
    arguments.add_progress_option(report, while_="while reading and profiling")
    sources.add_store_options(report)
    sources.add_prometheus_options(report)


def run(args: argparse.Namespace) -> int:
    inputs = sources.offline_inputs(args)
    context_windows = arguments.context_windows_of(args) if inputs is not None else None
    if inputs is None or context_windows is None:
        return EXIT_BAD_INPUT
    # Imported here and in _run, not at the top: `--help` and every other command need none of it.
    from ..offline import cyclic_gc_paused

    progress = Progress(progress_enabled(args.progress))
    # The profiles stay alive to the end: the cyclic collector would only traverse them, again
    # and again (a third of the run time over 200k spans).
    with cyclic_gc_paused():
        return _run(args, progress, inputs, budgets.finding_options(args.min_saving, args.budget, context_windows))


def _run(args: argparse.Namespace, progress: Progress, inputs: OfflineInputs, options: FindingOptions) -> int:
    from ..core.findings import find_all
    from ..core.projection import RecordedSchedule
    from ..errors import CannotAnalyse
    from ..offline.spool import EncodedSpool
    from ..offline.store_loading import load_inputs
    from ..offline.workers import map_in_order, workers_for
    from ..report.html import detail_traces, render_html, select_trace
    from ..report.summary import cross_run_statistics, encoded_trace, write_summary

    try:
        try:
            loaded = load_inputs(inputs, progress=progress, on_error_line=error, on_note=sources.print_note)
        except CannotAnalyse as exc:
            progress.close()
            error(str(exc))
            return EXIT_BAD_INPUT
        profiles = loaded.profiles
        process_end.keep(loaded)
        if not profiles:
            progress.close()
            error("no traces to report")
            return EXIT_BAD_INPUT
        try:
            selected = select_trace(profiles, args.trace)
        except KeyError:
            progress.close()
            error(arguments.no_such_trace(args.trace, len(profiles)))
            return EXIT_BAD_INPUT
        # Findings cost projections of the trace: the page shows them for the traces it embeds in
        # detail (the chosen one and the slowest); the summary JSON carries them for every trace.
        details = detail_traces(profiles, selected)
        detail_ids = {p.trace_id for p in details}
        wanted = list({p.trace_id: p for p in (profiles if args.summary_json else details)}.values())
        workers = workers_for(args.workers, sum(profile.span_count for profile in wanted))
        findings: dict[str, list[Finding]] = {}
        # The documents wait in a file beside the summary rather than in memory, where they would
        # add to the peak while the workers run (70 MB over 200,000 spans).
        encoded_traces = EncodedSpool(beside=args.summary_json) if args.summary_json else None
        progress.start("finding", len(wanted))

        # With the summary JSON, each trace's document is encoded where its findings are made: the
        # main process writes the bytes, and gets back only the findings the page and budgets read.
        def work(index: int) -> tuple[list[Finding], bytes | None]:
            profile = wanted[index]
            # One recorded schedule for every projection of the trace: its findings' and their combined one.
            schedule = RecordedSchedule(profile)
            found = find_all(profile, options, schedule=schedule)
            if not args.summary_json:
                return found, None
            encoded = encoded_trace(profile, found, detail_ids, options.context_windows, schedule=schedule)
            return (found if profile.trace_id in detail_ids else _kept_for_the_table(found)), encoded

        # The ids taken before the workers start: reading a profile while they run would copy the
        # memory page it sits on, which the workers share with this process until it is written.
        trace_ids = [profile.trace_id for profile in wanted]
        for trace_id, (profile_findings, encoded) in zip(
            trace_ids, map_in_order(work, len(wanted), workers), strict=True
        ):
            findings[trace_id] = profile_findings
            if encoded is not None and encoded_traces is not None:
                encoded_traces.add(trace_id, encoded)
            progress.advance()
        progress.start("statistics", 1)
        statistics = cross_run_statistics(
            profiles, spike_threshold=args.spike_threshold, charts_only=not args.summary_json
        )
        progress.advance()
        progress.start("writing", 1)
        name = arguments.single_file_name(inputs.files)
        title = f"Agent trace profile: {name}" if name else "Agent trace profile"
        page = render_html(profiles, findings, selected_trace_id=selected.trace_id, statistics=statistics, title=title)
        prefix_cache = None
        if args.summary_json and args.prefix_cache:
            from ..analytics.prefix_cache import prefix_cache_candidates

            prefix_cache = prefix_cache_candidates(profiles)
        progress.advance()
    finally:
        progress.close()
    if not write_output(args.html, page):
        return EXIT_FAILURE
    if encoded_traces is not None:  # with --summary-json
        try:
            written = write_streamed(
                # msgspec writes the same compact JSON as json.dumps, several times faster (it is 100+ MB
                # over 200,000 spans), a trace at a time; NaN never occurs: statistics turn it into None first.
                args.summary_json,
                lambda out: write_summary(
                    out,
                    profiles,
                    findings,
                    selected_trace_id=selected.trace_id,
                    statistics=statistics,
                    files=loaded.file_dicts(),
                    detail_trace_ids=detail_ids,
                    prefix_cache=prefix_cache,
                    context_windows=options.context_windows,
                    encoded_traces=encoded_traces,
                ),
            )
        finally:
            encoded_traces.close()
        if not written:
            return EXIT_FAILURE
    spans = sum(p.span_count for p in profiles)
    print(
        f"wrote {args.html} ({len(page.encode('utf-8')) / 1e6:.2f} MB; {plural(len(profiles), 'trace')}, "
        f"{plural(spans, 'span')}; "
        f"showing trace {selected.trace_id})",
        file=sys.stderr,
    )
    # Every trace is checked, not only those the page shows in detail (without a projection).
    over_budget = budgets.overruns(profiles, options, findings)
    return exit_code(True, loaded.complete and not inputs.folder_problems, over_budget)


def _kept_for_the_table(found: list[Finding]) -> list[Finding]:
    """Of a trace the page does not show in detail, the findings it still reads: the one with the
    largest saving (the traces table) and the budget overruns (standard error), in their order."""
    from ..core.findings import BUDGET_EXCEEDED

    best = max(found, key=lambda finding: finding.saving_ns, default=None)
    return [finding for finding in found if finding is best or finding.kind == BUDGET_EXCEEDED]

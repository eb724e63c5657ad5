"""The ``otel-agent-profiler report`` command: trace files in, one self-contained HTML report out."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from ..adapters import read_trace_file
from ..core.analyze import profile_trace
from ..core.assembly import group_by_trace
from ..core.findings import Finding, find_all
from ..core.profile import TraceProfile
from ..core.records import SpanRecord
from ..offline import cyclic_gc_paused
from ..report.progress import Progress, progress_enabled


def add_report_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser], exit_bad_input: int) -> None:
    report = commands.add_parser(
        "report",
        help="write a self-contained HTML report (flame graph, waterfall, categories, findings, cross-run charts)",
        description=(
            "Profile the traces in the given files (read as analyze reads them) and write one self-contained "
            "HTML file (inline CSS, JavaScript and SVG; opens offline): a table of the traces, and for the chosen "
            "one (default: the slowest; click another in the table) a flame chart and a waterfall with the "
            "critical path highlighted, time by category and the findings with their estimated savings; with "
            "several traces, also duration percentiles per category and operation, the concurrency of LLM and "
            "tool calls and the most frequent call sequences. A file that cannot be read is reported on standard "
            f"error and the others are still used; the exit code is then {exit_bad_input}."
        ),
    )
    report.add_argument("files", nargs="+", metavar="FILE", help="trace file to read; - reads standard input")
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
        type=_non_negative_int,
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
    report.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show a progress bar on standard error while reading and profiling (default: when it is a terminal)",
    )


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {value}")
    return value


def _write(path: str, text: str | bytes, report_error: Callable[[str], None]) -> bool:
    try:
        if isinstance(text, bytes):
            with open(path, "wb") as binary:
                binary.write(text)
        else:
            with open(path, "w", encoding="utf-8") as out:
                out.write(text)
    except OSError as exc:
        report_error(f"cannot write {path}: {exc.strerror or exc}")
        return False
    return True


def load_profiles(
    paths: Sequence[str], progress: Progress, report_error: Callable[[str], None]
) -> tuple[list[TraceProfile], list[dict[str, Any]], bool]:
    """Read and profile ``paths``: the profiles (by start, then trace id), the files read, and
    whether every file was read whole."""
    records: list[SpanRecord] = []
    files: list[dict[str, Any]] = []
    ok = True
    with cyclic_gc_paused():
        progress.start("reading", len(paths))
        for path in paths:
            trace_file = read_trace_file(path)
            records.extend(trace_file.records)
            files.append(
                {
                    "path": trace_file.path,
                    "format": trace_file.format,
                    "spans": len(trace_file.records),
                    "problems": trace_file.problems,
                }
            )
            line = trace_file.error_line()
            if line is not None:
                progress.close()
                report_error(line)
                ok = False
            progress.advance(detail=os.path.basename(path))
        groups = group_by_trace(records)
        progress.start("profiling", len(groups))
        profiles = []
        for spans in groups.values():
            profiles.append(profile_trace(spans))
            progress.advance()
        profiles.sort(key=lambda p: (p.start_ns, p.trace_id))
    return profiles, files, ok


def run_report(args: argparse.Namespace, report_error: Callable[[str], None], exit_bad_input: int) -> int:
    progress = Progress(progress_enabled(args.progress))
    # The profiles stay alive to the end: the cyclic collector would only traverse them, again
    # and again (a third of the run time over 200k spans).
    with cyclic_gc_paused():
        return _run(args, progress, report_error, exit_bad_input)


def _run(args: argparse.Namespace, progress: Progress, report_error: Callable[[str], None], exit_bad_input: int) -> int:
    from ..report.html import detail_traces, render_html, select_trace
    from ..report.summary import build_summary, cross_run_statistics

    try:
        profiles, files, ok = load_profiles(args.files, progress, report_error)
        if not profiles:
            progress.close()
            report_error("no traces to report")
            return exit_bad_input
        try:
            selected = select_trace(profiles, args.trace)
        except KeyError:
            progress.close()
            read = f"{len(profiles)} trace{'' if len(profiles) == 1 else 's'} read"
            report_error(f"no trace {args.trace} in the input ({read})")
            return exit_bad_input
        # Findings cost projections of the trace: the page shows them for the traces it embeds in
        # detail (the chosen one and the slowest); the summary JSON carries them for every trace.
        wanted = profiles if args.summary_json else detail_traces(profiles, selected)
        findings: dict[str, list[Finding]] = {}
        progress.start("finding", len(wanted))
        for profile in wanted:
            if profile.trace_id not in findings:
                findings[profile.trace_id] = find_all(profile)
            progress.advance()
        progress.start("statistics", 1)
        statistics = cross_run_statistics(
            profiles, spike_threshold=args.spike_threshold, charts_only=not args.summary_json
        )
        progress.advance()
        progress.start("writing", 1)
        name = os.path.basename(args.files[0]) if len(args.files) == 1 and args.files[0] != "-" else None
        title = f"Agent trace profile: {name}" if name else "Agent trace profile"
        page = render_html(profiles, findings, selected_trace_id=selected.trace_id, statistics=statistics, title=title)
        summary = None
        if args.summary_json:
            prefix_cache = None
            if args.prefix_cache:
                from ..analytics.prefix_cache import prefix_cache_candidates

                prefix_cache = prefix_cache_candidates(profiles)
            summary = build_summary(
                profiles,
                findings,
                selected_trace_id=selected.trace_id,
                statistics=statistics,
                files=files,
                detail_trace_ids={p.trace_id for p in detail_traces(profiles, selected)},
                prefix_cache=prefix_cache,
            )
        progress.advance()
    finally:
        progress.close()
    if not _write(args.html, page, report_error):
        return 1
    if summary is not None and not _write(
        # msgspec writes the same compact JSON as json.dumps, several times faster (it is 100+ MB
        # over 200,000 spans); NaN never occurs: statistics turn it into None first.
        args.summary_json,
        msgspec.json.encode(summary) + b"\n",
        report_error,
    ):
        return 1
    spans = sum(p.span_count for p in profiles)
    print(
        f"wrote {args.html} ({len(page.encode('utf-8')) / 1e6:.2f} MB; {len(profiles)} traces, {spans} spans; "
        f"showing trace {selected.trace_id})",
        file=sys.stderr,
    )
    return 0 if ok else exit_bad_input

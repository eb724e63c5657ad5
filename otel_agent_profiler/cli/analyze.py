"""``otel-agent-profiler analyze FILE...``: profile the traces in exported trace files, as text or JSON."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..offline.limits import ON_DISK_BYTES
from ..report.defaults import DEFAULT_TOP, MANY_TRACES, REPORT_MAX_LINES
from ..report.progress import Progress, progress_enabled
from . import arguments, budgets, sources
from .arguments import (
    EXIT_BAD_INPUT,
    error,
    exit_code,
    write_output,
)

# The analysis and the reports are imported where they are used: `--help` and the other commands
# need none of them.
if TYPE_CHECKING:
    from ..core import TraceProfile
    from ..core.findings import Finding, WhatIfProjection
    from ..offline.analysis import InMemoryAnalysis
    from ..offline.halves import HalvedAnalysis
    from ..offline.options import AnalyzeOptions

HELP = "profile the traces in exported trace files or a trace store"
DESCRIPTION = (
    "Profile every trace in the given files: self time, critical path and time per category "
    "and operation. Reads OTLP JSON (one document, or JSON Lines as the Collector's file "
    "exporter writes them), Jaeger JSON exports and ATIF trajectories; the format is detected. With more than "
    f"{MANY_TRACES} traces the text report opens with a summary across them (durations, categories, top "
    "operations, findings with the number of traces they occur in), then shows the slowest traces in detail. "
    "Instead of files, the traces can be read from Jaeger, Tempo or Phoenix (--jaeger, --tempo, --phoenix: "
    "see 'reading from a trace store' below). "
    "With --prometheus URL, the LLM calls also get the load of the inference server (vLLM, SGLang) that "
    "Prometheus recorded while they ran. "
    "A file that "
    "cannot be read is reported on standard error and the others are still analysed; the "
    f"exit code is then {EXIT_BAD_INPUT}. {budgets.EXIT_CODES_HELP}"
)


#: Spans shown per trace in the span tree unless ``--max-spans`` says otherwise.
DEFAULT_MAX_SPANS = 60


def add_arguments(analyze: argparse.ArgumentParser) -> None:
    arguments.add_files_argument(analyze)
    analyze.add_argument(
        "--format", choices=("text", "json"), default="text", help="report format (default: %(default)s)"
    )
    analyze.add_argument("--output", "-o", metavar="PATH", help="write the report to PATH instead of standard output")
    analyze.add_argument(
        "--max-spans",
        type=arguments.positive_int,
        default=None,
        metavar="N",
        help=(
            f"text format: spans shown per trace in the span tree (default: {DEFAULT_MAX_SPANS}, fewer where "
            f"the report of more than {MANY_TRACES} traces would otherwise run past {REPORT_MAX_LINES} lines)"
        ),
    )
    shown = analyze.add_mutually_exclusive_group()
    shown.add_argument(
        "--top",
        type=arguments.non_negative_int,
        default=DEFAULT_TOP,
        metavar="N",
        help=(
            f"text format, more than {MANY_TRACES} traces: after the cross-trace summary, show the N slowest "
            "traces in detail (default: %(default)s)"
        ),
    )
    shown.add_argument(
        "--all",
        action="store_true",
        help="text format: after the cross-trace summary, show every trace in detail, in input order",
    )
    analyze.add_argument("--ascii", action="store_true", help="text format: draw with ASCII characters only")
    analyze.add_argument(
        "--trace",
        action="append",
        metavar="TRACE_ID",
        type=arguments.trace_id,
        help=(
            "report only this trace of the files (hex trace id; repeat for several); default: every trace. "
            "A trace store reads traces by id with --trace-id instead"
        ),
    )
    arguments.add_prices_option(analyze)
    arguments.add_context_windows_option(analyze)
    arguments.add_progress_option(analyze)
    arguments.add_workers_option(analyze)
    sources.add_store_options(analyze)
    sources.add_prometheus_options(analyze)
    analyze.add_argument(
        "--on-disk",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=(
            "profile through temporary files, trace by trace, for inputs bigger than memory: spans are "
            "partitioned by trace id into shards on disk (in $TMPDIR), removed afterwards, Ctrl-C included. "
            f"Default: on when the JSON Lines inputs exceed {ON_DISK_BYTES // 2**20} MiB in all. The report is "
            "the same; --prefix-cache, and --what-if with the text report, need the traces in memory"
        ),
    )
    analyze.add_argument(
        "--prefix-cache",
        action="store_true",
        help=(
            "also list prompt prefixes that several LLM calls of one model share (caching candidates); "
            "reads the prompt content the instrumentation captured, so it is off unless asked for"
        ),
    )
    analyze.add_argument(
        "--findings",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=(
            "list findings (bottlenecks, parallelization opportunities, ...) with their estimated savings; "
            "on by default for text, off for json, where they cost a projection per trace"
        ),
    )
    arguments.add_min_saving_option(analyze)
    budgets.add_budget_option(analyze)
    budgets.add_what_if_option(analyze)


def _prefix_candidates(profiles: list[TraceProfile]) -> list[Any]:
    # Imported on demand: the analytics package loads pandas, which `analyze` otherwise never needs.
    from ..analytics.prefix_cache import prefix_cache_candidates

    return prefix_cache_candidates(profiles)


def _prefix_cache_text(candidates: list[Any]) -> str:
    lines = ["", "Prompt-prefix caching candidates (shared prompt beginnings per model)"]
    if not candidates:
        lines.append("  none: no model had calls sharing 1,024+ tokens of captured prompt")
    for candidate in candidates[:10]:
        lines.append(
            f"  {candidate.model}: {candidate.calls} calls share {candidate.prefix_tokens:,} tokens; "
            f"{candidate.uncached_repeated_tokens:,} repeated tokens were not cached"
        )
    return "\n".join(lines) + "\n"


def _trace_documents(
    profiles: list[TraceProfile],
    findings: dict[str, list[Finding]] | None,
    projected: Mapping[str, WhatIfProjection],
    context_windows: Mapping[str, int],
) -> Iterator[dict[str, Any]]:
    # One at a time, as they are written: the whole document would take more memory than the profiles.
    # Here, not in the workers: sending the text back costs about what encoding it does.
    from ..offline.on_disk import trace_json

    for profile in profiles:
        found = findings[profile.trace_id] if findings is not None else None
        yield trace_json(profile, found, projected.get(profile.trace_id), context_windows)


def analyze_options(args: argparse.Namespace, context_windows: Mapping[str, int]) -> AnalyzeOptions:
    """The options of ``analyze``, each decided here once from its arguments (and the windows
    ``arguments.resolve_context_windows`` chose)."""
    from ..offline.options import AnalyzeOptions
    from ..report.text import can_draw

    stream = sys.stdout if args.output is None else None
    return AnalyzeOptions(
        format=args.format,
        # Findings cost a projection of the trace each; JSON output for many traces skips them
        # unless asked for, or a budget is given (its overruns are findings).
        findings=args.findings if args.findings is not None else args.format == "text" or bool(args.budget),
        finding_options=budgets.finding_options(args.min_saving, args.budget, context_windows),
        # The user asked for that many spans: the report of many traces is not fitted to a length then.
        max_spans=DEFAULT_MAX_SPANS if args.max_spans is None else args.max_spans,
        max_lines=REPORT_MAX_LINES if args.max_spans is None else None,
        top=args.top,
        every_trace=args.all,
        ascii_only=args.ascii or (stream is not None and not can_draw(stream)),
        what_if=tuple(args.what_if or ()),
        prefix_cache=args.prefix_cache,
        on_disk=args.on_disk,
        workers=args.workers,
        trace_ids=tuple(dict.fromkeys(args.trace or ())),
        output=args.output,
    )


def run(args: argparse.Namespace) -> int:
    from ..errors import CannotAnalyse
    from ..offline.analysis import analyze_inputs
    from ..offline.halves import HalvedAnalysis
    from ..offline.on_disk import ShardedAnalysis
    from . import analyze_sharded, process_end

    inputs = sources.offline_inputs(args)
    context_windows = arguments.context_windows_of(args) if inputs is not None else None
    if inputs is None or context_windows is None:
        return EXIT_BAD_INPUT
    options = analyze_options(args, context_windows)
    progress = Progress(progress_enabled(args.progress))
    try:
        with analyze_inputs(
            inputs, options, progress=progress, on_error_line=error, on_note=sources.print_note
        ) as done:
            process_end.keep(done)
            if isinstance(done, ShardedAnalysis):
                written, over_budget = analyze_sharded.write_report(done, options, args.output)
                complete = not done.error_lines
            elif isinstance(done, HalvedAnalysis):
                written, over_budget = _write_halves(done, options, args.output), 0
                complete = not done.error_lines
            else:
                written, over_budget = _write_report(done, options, args.output)
                complete = done.loaded.complete
    except CannotAnalyse as exc:
        progress.close()
        error(str(exc))
        return EXIT_BAD_INPUT
    return exit_code(written, complete and not inputs.folder_problems, over_budget)


def _write_halves(done: HalvedAnalysis, options: AnalyzeOptions, output: str | None) -> bool:
    """Write the JSON report of traces profiled in halves (``offline.halves``): whether it was
    written. No findings on this road, so no budget is checked."""
    from .analyze_json import write_json_report

    documents = done.documents(options.finding_options.context_windows)
    files = [file.to_dict() for file in done.files]
    return write_json_report(output, files, done.traces, done.calls(), documents, second_process=True)


def _write_report(done: InMemoryAnalysis, options: AnalyzeOptions, output: str | None) -> tuple[bool, int]:
    """Write the report of traces profiled in memory: whether it was written, and the budget overruns."""
    from ..offline.workers import workers_for
    from ..report.cross_trace import render_many_traces
    from .analyze_json import write_json_report

    loaded, findings, projected = done.loaded, done.findings, done.projected
    profiles = loaded.profiles
    if options.format == "json":
        more = (
            {"prefix_cache_candidates": [c.to_dict() for c in _prefix_candidates(profiles)]}
            if options.prefix_cache
            else None
        )
        documents = _trace_documents(profiles, findings, projected, options.finding_options.context_windows)
        # Written a trace at a time; with a core to spare, indented and written by a second process.
        second_process = workers_for(options.workers, sum(profile.span_count for profile in profiles)) > 1
        written = write_json_report(
            output, loaded.file_dicts(), profiles, profiles, documents, second_process=second_process, more=more
        )
        if not written:
            return False, 0
    else:
        report = render_many_traces(
            profiles,
            top=None if options.every_trace else options.top,
            max_spans=options.max_spans,
            ascii_only=options.ascii_only,
            findings=findings,
            max_lines=options.max_lines,
        )
        if options.prefix_cache:
            report += _prefix_cache_text(_prefix_candidates(profiles))
        report += budgets.what_if_text(profiles, options.what_if, projected)
        if not profiles:
            report = "No traces to report.\n"
        if not write_output(output, report):
            return False, 0
    return True, budgets.overruns(profiles, options.finding_options, findings)

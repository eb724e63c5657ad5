"""``otel-agent-profiler analyze FILE...``: profile the traces in exported trace files, as text or JSON."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from ..core import TraceProfile, trace_to_dict
from ..core.findings import Finding, WhatIfProjection, combined_projection, find_all
from ..core.split_traces import cross_trace_totals, find_split_llm_calls
from ..offline import LoadedProfiles, cyclic_gc_paused, profile_read_files, read_trace_files
from ..offline.shards import ON_DISK_BYTES, on_disk_wanted
from ..offline.workers import map_in_order, workers_for
from ..report.cross_trace import DEFAULT_TOP, MANY_TRACES, REPORT_MAX_LINES, render_many_traces
from ..report.json_stream import Encoded, pretty, write_document
from ..report.progress import Progress, progress_enabled
from ..report.text import can_draw
from . import arguments, budgets, sources
from .arguments import (
    EXIT_BAD_INPUT,
    EXIT_BUDGET_EXCEEDED,
    EXIT_FAILURE,
    EXIT_OK,
    error,
    write_output,
    write_streamed,
)

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


def span_tree_limits(args: argparse.Namespace) -> tuple[int, int | None]:
    """The spans shown per trace, and the length a report of many traces is fitted to: none when
    ``--max-spans`` was given (the user asked for that many), ``REPORT_MAX_LINES`` otherwise."""
    if args.max_spans is None:
        return DEFAULT_MAX_SPANS, REPORT_MAX_LINES
    return args.max_spans, None


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
    arguments.add_prices_option(analyze)
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


def encode_trace(profile: TraceProfile, findings: list[Finding] | None, what_if: WhatIfProjection | None) -> Encoded:
    """One trace of the JSON document, encoded: the profile, its findings and its what-if."""
    trace = trace_to_dict(profile)
    if findings is not None:
        trace["findings"] = [finding.to_dict() for finding in findings]
        trace["combined_projection"] = combined_projection(profile, findings).to_dict()
    if what_if is not None:
        trace["what_if"] = what_if.to_dict()
    return Encoded(pretty(trace, 2))


def _encoded_traces(
    profiles: list[TraceProfile],
    findings: dict[str, list[Finding]] | None,
    projected: Mapping[str, WhatIfProjection],
) -> Iterator[Encoded]:
    # One at a time, as they are written: the whole document would take more memory than the profiles.
    # Here, not in the workers: sending the text back costs about what encoding it does.
    for profile in profiles:
        found = findings[profile.trace_id] if findings is not None else None
        yield encode_trace(profile, found, projected.get(profile.trace_id))


def run(args: argparse.Namespace) -> int:
    inputs = sources.offline_inputs(args)
    if inputs is None:
        return EXIT_BAD_INPUT
    files, prices, folder_problems = inputs
    progress = Progress(progress_enabled(args.progress))
    from_store = getattr(args, "store_query", None) is not None
    if from_store and args.on_disk:
        error("--on-disk reads trace files; traces fetched from a store are profiled in memory")
        return EXIT_BAD_INPUT
    # Imported here: the on-disk path uses this module's encoding of a trace.
    from .analyze_on_disk import refused_option, run_held, run_on_disk

    if not from_store and on_disk_wanted(files, args.on_disk):
        with cyclic_gc_paused():
            return run_on_disk(args, files, prices, folder_problems, progress)

    # The collector stays paused to the end: the profiles live until then, and it would only
    # traverse them again and again; what dies on the way (trace dicts, lines) dies young.
    with cyclic_gc_paused():
        if from_store or args.format != "text" or refused_option(args) is not None:
            loaded = sources.load(args, files, prices=prices, progress=progress, on_error_line=error)
        else:
            trace_files, error_lines = read_trace_files(files, progress=progress, on_error_line=error)
            if len({record.trace_id for file in trace_files for record in file.records}) > MANY_TRACES:
                # The text report of many traces keeps only their totals and findings: the workers
                # profile them too, a shard at a time, as on disk.
                return run_held(args, trace_files, error_lines, prices, folder_problems, progress)
            loaded = profile_read_files(trace_files, error_lines, prices=prices, progress=progress, on_error_line=error)
        if loaded is None:
            return EXIT_BAD_INPUT
        return _run(args, loaded, folder_problems, progress)


def _run(args: argparse.Namespace, loaded: LoadedProfiles, folder_problems: list[str], progress: Progress) -> int:
    profiles = loaded.profiles
    workers = workers_for(args.workers, sum(profile.span_count for profile in profiles))
    # Findings cost a projection of the trace each; JSON output for many traces skips them
    # unless asked for, or a budget is given (its overruns are findings).
    with_findings = args.findings if args.findings is not None else args.format == "text" or bool(args.budget)
    findings: dict[str, list[Finding]] | None = None
    options = budgets.finding_options(args.min_saving, args.budget)
    if with_findings:
        findings = {}
        progress.start("finding", len(profiles))
        found = map_in_order(lambda index: find_all(profiles[index], options), len(profiles), workers)
        for profile, profile_findings in zip(profiles, found, strict=True):
            findings[profile.trace_id] = profile_findings
            progress.advance()
    projected = budgets.projections(profiles, args.what_if)
    progress.close()

    if args.format == "json":
        splits = find_split_llm_calls(profiles)
        rest: dict[str, Any] = {
            "files": loaded.file_dicts(),
            "totals": cross_trace_totals(profiles, splits).to_dict(),
            "split_llm_calls": [split.to_dict() for split in splits],
        }
        if args.prefix_cache:
            rest["prefix_cache_candidates"] = [c.to_dict() for c in _prefix_candidates(profiles)]
        # Written a trace at a time.
        written = write_streamed(
            args.output,
            lambda out: write_document(out, "traces", _encoded_traces(profiles, findings, projected), rest),
        )
        if not written:
            return EXIT_FAILURE
    else:
        stream = sys.stdout if args.output is None else None
        ascii_only = args.ascii or (stream is not None and not can_draw(stream))
        max_spans, max_lines = span_tree_limits(args)
        report = render_many_traces(
            profiles,
            top=None if args.all else args.top,
            max_spans=max_spans,
            ascii_only=ascii_only,
            findings=findings,
            max_lines=max_lines,
        )
        if args.prefix_cache:
            report += _prefix_cache_text(_prefix_candidates(profiles))
        report += budgets.what_if_text(profiles, args.what_if, projected)
        if not profiles:
            report = "No traces to report.\n"
        if not write_output(args.output, report):
            return EXIT_FAILURE
    over_budget = budgets.overruns(profiles, options, findings)
    if not loaded.complete or folder_problems:
        return EXIT_BAD_INPUT
    return EXIT_BUDGET_EXCEEDED if over_budget else EXIT_OK

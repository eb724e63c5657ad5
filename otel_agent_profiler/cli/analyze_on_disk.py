"""``analyze`` for inputs bigger than memory: profiled shard by shard from temporary files.

The report is the one ``analyze`` writes in memory, byte for byte. What is kept of every trace
until the end is small: its totals and its findings for the cross-trace summary; the JSON of a
trace, or its detail in the text report, goes to a temporary file as soon as it is made and is
copied out in trace order at the end. The temporary files are removed whatever happens, Ctrl-C
included.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..adapters.files import TraceFile
from ..core.fast_pickle import pickled_by_fields
from ..core.findings import BUDGET_EXCEEDED, Finding, find_all, what_ifs_together
from ..core.pricing import PriceTable
from ..core.profile import TraceProfile
from ..core.split_traces import cross_trace_totals, find_split_llm_calls
from ..offline import PROFILING
from ..offline.shards import Partitioned, hold, partition, profiles_of_shard, shard_of
from ..offline.workers import map_in_order, workers_for
from ..report.cross_trace import (
    MANY_TRACES,
    TraceTotals,
    compose_report,
    render_many_traces,
    slowest_first,
    trace_detail,
)
from ..report.json_stream import Encoded, write_document
from ..report.progress import Progress
from ..report.text import can_draw
from . import budgets
from .analyze import encode_trace, span_tree_limits
from .arguments import EXIT_BAD_INPUT, EXIT_BUDGET_EXCEEDED, EXIT_FAILURE, EXIT_OK, error, write_output, write_streamed

#: Shards of traces held in memory: enough per worker that the workers finish together.
_HELD_SHARDS_PER_WORKER = 16
_MIN_HELD_SHARDS = 4
#: Why some options are refused on disk.
NOT_ON_DISK = "is not available when the input is profiled on disk (use --no-on-disk for inputs that fit in memory)"


@pickled_by_fields
@dataclass(slots=True)
class _Trace:
    """What one shard's worker sends back about one trace."""

    start_ns: int
    trace_id: str
    #: The trace's JSON, or its detail in the text report (``--all``); None when not written.
    payload: bytes | None
    totals: TraceTotals
    #: For the cross-trace summary: only what grouping reads; budget overruns whole.
    findings: list[Finding] | None


def refused_option(args: argparse.Namespace) -> str | None:
    """The option ``analyze`` cannot honour on disk, if one was given."""
    if args.prefix_cache:
        return "--prefix-cache"
    if getattr(args, "prometheus", None):
        return "--prometheus"
    if args.what_if and args.format == "text":
        return "--what-if with the text report"
    return None


def run_on_disk(
    args: argparse.Namespace, files: list[str], prices: PriceTable, folder_problems: list[str], progress: Progress
) -> int:
    refused = refused_option(args)
    if refused is not None:
        error(f"{refused} {NOT_ON_DISK}")
        return EXIT_BAD_INPUT
    with tempfile.TemporaryDirectory(prefix="otel-agent-profiler-") as directory:
        parted = partition(files, Path(directory), progress=progress, on_error_line=error)
        with open(Path(directory) / "results", "w+b") as results:
            return _analyze(args, parted, prices, folder_problems, progress, results)


def run_held(
    args: argparse.Namespace,
    trace_files: list[TraceFile],
    error_lines: list[str],
    prices: PriceTable,
    folder_problems: list[str],
    progress: Progress,
) -> int:
    """``analyze`` of files already read, as on disk but with the shards held in memory.

    For the text report of many traces: profiled by the workers a shard at a time, only each
    trace's totals and findings come back, so the profiles of every trace are never held at once.
    """
    refused = refused_option(args)
    assert refused is None, f"{refused} cannot be analysed shard by shard"
    spans = sum(len(file.records) for file in trace_files)
    shards = max(_MIN_HELD_SHARDS, workers_for(args.workers, spans) * _HELD_SHARDS_PER_WORKER)
    parted = hold(trace_files, error_lines, shards)
    for file in trace_files:
        file.records = []  # held by the shards now
    return _analyze(args, parted, prices, folder_problems, progress, io.BytesIO())


def _summary_findings(found: list[Finding]) -> list[Finding]:
    # The summary groups findings by kind and by what they are about: operation, category, the
    # names of the spans, a budget's name. Titles and evidence would be most of the memory.
    return [
        finding
        if finding.kind == BUDGET_EXCEEDED
        else Finding(
            kind=finding.kind,
            title="",
            saving_ns=finding.saving_ns,
            operation=finding.operation,
            category=finding.category,
            where=[{"name": place.get("name")} for place in finding.where],
        )
        for finding in found
    ]


def _analyze(
    args: argparse.Namespace,
    parted: Partitioned,
    prices: PriceTable,
    folder_problems: list[str],
    progress: Progress,
    results: BinaryIO,
) -> int:
    workers = workers_for(args.workers, parted.spans)
    text = args.format == "text"
    with_findings = args.findings if args.findings is not None else text or bool(args.budget)
    options = budgets.finding_options(args.min_saving, args.budget)
    stream = sys.stdout if args.output is None else None
    ascii_only = args.ascii or (stream is not None and not can_draw(stream))
    max_spans, _ = span_tree_limits(args)

    def shard(index: int) -> tuple[list[_Trace], list[str]]:
        profiles, lines = profiles_of_shard(parted, index, prices=prices)
        traces = []
        for profile in profiles:
            found = find_all(profile, options) if with_findings else None
            what_if = what_ifs_together(profile, args.what_if) if args.what_if else None
            payload: bytes | None = None
            if not text:
                payload = encode_trace(profile, found, what_if)
            elif args.all:
                payload = trace_detail(profile, found, max_spans=max_spans, ascii_only=ascii_only).encode()
            kept = None
            if found is not None:
                kept = _summary_findings(found) if text else [f for f in found if f.kind == BUDGET_EXCEEDED]
            totals = TraceTotals.of(profile)
            traces.append(_Trace(profile.start_ns, profile.trace_id, payload, totals, kept))
            # Freed now: the collector is paused, and the span tree's links are cycles.
            profile.release()
        return traces, lines

    progress.start(PROFILING, parted.shards)
    index: list[tuple[int, str, int, int]] = []
    totals: dict[str, TraceTotals] = {}
    findings: dict[str, list[Finding]] = {}
    error_lines = list(parted.error_lines)
    with closing(map_in_order(shard, parted.shards, workers)) as shards:
        for traces, lines in shards:
            for line in lines:
                progress.close()
                error(line)
            error_lines += lines
            for trace in traces:
                offset = results.tell()
                if trace.payload is not None:
                    results.write(trace.payload)
                index.append((trace.start_ns, trace.trace_id, offset, results.tell() - offset))
                totals[trace.trace_id] = trace.totals
                if trace.findings is not None:
                    findings[trace.trace_id] = trace.findings
            progress.advance()
    progress.close()
    # In trace order, as the traces are profiled in memory.
    index.sort()
    findings = {trace_id: findings[trace_id] for _, trace_id, _, _ in index if trace_id in findings}
    if text:
        report = _text_report(args, parted, prices, index, totals, findings, results, ascii_only, with_findings)
        written = write_output(args.output, report)
    else:
        documents = _payloads(results, index)
        kept = [totals[trace_id] for _, trace_id, _, _ in index]
        splits = find_split_llm_calls(trace.calls for trace in kept)
        rest = {
            "files": [file.to_dict() for file in parted.files],
            "totals": cross_trace_totals(kept, splits).to_dict(),
            "split_llm_calls": [split.to_dict() for split in splits],
        }
        written = write_streamed(args.output, lambda out: write_document(out, "traces", documents, rest))
    if not written:
        return EXIT_FAILURE
    over_budget = budgets.print_overruns(findings) if budgets.has_budgets(options) else 0
    if error_lines or folder_problems:
        return EXIT_BAD_INPUT
    return EXIT_BUDGET_EXCEEDED if over_budget else EXIT_OK


def _payloads(results: BinaryIO, index: list[tuple[int, str, int, int]]) -> Iterator[Encoded]:
    for _, _, offset, length in index:
        results.seek(offset)
        yield Encoded(results.read(length))


def _text_report(
    args: argparse.Namespace,
    parted: Partitioned,
    prices: PriceTable,
    index: list[tuple[int, str, int, int]],
    totals: dict[str, TraceTotals],
    findings: dict[str, list[Finding]],
    results: BinaryIO,
    ascii_only: bool,
    with_findings: bool,
) -> str:
    if not index:
        return "No traces to report.\n"
    max_spans, max_lines = span_tree_limits(args)
    traces = [totals[trace_id] for _, trace_id, _, _ in index]
    summary_findings = findings if with_findings else None
    if len(traces) <= MANY_TRACES or not args.all:
        # Few traces are all shown in detail; else the slowest: profiled again, from their shards.
        wanted = traces if len(traces) <= MANY_TRACES else sorted(traces, key=slowest_first)[: args.top]
        profiles = _profiles_again(parted, prices, [trace.trace_id for trace in wanted])
        options = budgets.finding_options(args.min_saving, args.budget)
        full = {profile.trace_id: find_all(profile, options) for profile in profiles} if with_findings else None
        if len(traces) <= MANY_TRACES:
            return render_many_traces(profiles, max_spans=max_spans, ascii_only=ascii_only, findings=full)

        def details(budget: int | None) -> Iterator[str]:
            for profile in profiles:
                found = (full or {}).get(profile.trace_id)
                yield trace_detail(profile, found, max_spans=max_spans, ascii_only=ascii_only, max_lines=budget)

        return compose_report(
            traces, summary_findings, details, len(profiles), every=False, ascii_only=ascii_only, max_lines=max_lines
        )
    stored = (payload.decode() for payload in _payloads(results, index))
    return compose_report(traces, summary_findings, lambda _: stored, len(traces), every=True, ascii_only=ascii_only)


def _profiles_again(parted: Partitioned, prices: PriceTable, trace_ids: list[str]) -> list[TraceProfile]:
    """The profiles of ``trace_ids``, in that order, read again from their shards."""
    by_shard: dict[int, set[str]] = {}
    for trace_id in trace_ids:
        by_shard.setdefault(shard_of(trace_id, parted.shards), set()).add(trace_id)
    found: dict[str, TraceProfile] = {}
    for number, wanted in by_shard.items():
        profiles, _ = profiles_of_shard(parted, number, prices=prices, only=wanted)
        found.update((profile.trace_id, profile) for profile in profiles)
    return [found[trace_id] for trace_id in trace_ids if trace_id in found]

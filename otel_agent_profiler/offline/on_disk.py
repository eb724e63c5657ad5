"""``analyze`` shard by shard: inputs bigger than memory, and the text report of many traces.

What is kept of every trace until the end is small: its totals and its findings for the
cross-trace summary. The JSON of a trace, or its detail in the text report, goes to a results
file as soon as it is made; the report copies them out in trace order at the end
(``cli.analyze_sharded``). The temporary files are removed whatever happens, Ctrl-C included.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from ..adapters.files import TraceFile
from ..core.fast_pickle import pickled_by_fields
from ..core.findings import (
    BUDGET_EXCEEDED,
    BY_KIND,
    Finding,
    Grouping,
    WhatIfProjection,
    combined_projection,
    find_all,
    what_ifs_together,
)
from ..core.pricing import PriceTable
from ..core.profile import TraceProfile
from ..core.projection import RecordedSchedule
from ..report.cross_trace import TraceTotals, trace_detail
from ..report.json_stream import Encoded, pretty
from ..report.span_json import trace_document
from .loading import PROFILING, LoadProgress
from .options import AnalyzeOptions
from .shards import Partitioned, hold, partition, profiles_of_shard
from .workers import map_in_order, workers_for

#: Shards of traces held in memory: enough per worker that the workers finish together.
_HELD_SHARDS_PER_WORKER = 16
_MIN_HELD_SHARDS = 4
#: Why some options are refused on disk.
NOT_ON_DISK = "is not available when the input is profiled on disk (use --no-on-disk for inputs that fit in memory)"


def encode_trace(
    profile: TraceProfile,
    findings: list[Finding] | None,
    what_if: WhatIfProjection | None,
    context_windows: Mapping[str, int],
    *,
    schedule: RecordedSchedule | None = None,
) -> Encoded:
    """One trace of the JSON document, encoded (``trace_json``, indented as ``write_document`` indents it)."""
    return Encoded(pretty(trace_json(profile, findings, what_if, context_windows, schedule=schedule), 2))


def trace_json(
    profile: TraceProfile,
    findings: list[Finding] | None,
    what_if: WhatIfProjection | None,
    context_windows: Mapping[str, int],
    *,
    schedule: RecordedSchedule | None = None,
) -> dict[str, Any]:
    """One trace of the JSON document: the profile (each LLM call's share of its ``context_windows``),
    its findings and its what-if. ``schedule``: the one the findings were made with, if at hand (see
    ``find_all``)."""
    trace = trace_document(profile, context_windows)
    if findings is not None:
        trace["findings"] = [finding.to_dict() for finding in findings]
        trace["combined_projection"] = combined_projection(profile, findings, schedule=schedule).to_dict()
    if what_if is not None:
        trace["what_if"] = what_if.to_dict()
    return trace


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


@dataclass
class ShardedAnalysis:
    """The traces profiled shard by shard: in trace order, each one's payload, totals and findings."""

    parted: Partitioned
    prices: PriceTable
    #: (start, trace id, offset and length of its payload in ``results``), in trace order.
    index: list[tuple[int, str, int, int]]
    totals: dict[str, TraceTotals]
    #: In trace order; for the text report, only what the summary groups by (budget overruns whole).
    findings: dict[str, list[Finding]]
    #: One per file not read whole and per trace the analysis failed on.
    error_lines: list[str]
    results: BinaryIO = field(repr=False)

    def payloads(self) -> Iterator[Encoded]:
        """Each trace's payload, in trace order."""
        for _, _, offset, length in self.index:
            self.results.seek(offset)
            yield Encoded(self.results.read(length))

    def profiles_again(self, trace_ids: list[str]) -> list[TraceProfile]:
        """The profiles of ``trace_ids``, in that order, read again from their shards."""
        parted = self.parted
        by_shard: dict[int, set[str]] = {}
        for trace_id in trace_ids:
            by_shard.setdefault(parted.shard_holding(trace_id), set()).add(trace_id)
        found: dict[str, TraceProfile] = {}
        for number, wanted in by_shard.items():
            profiles, _ = profiles_of_shard(parted, number, prices=self.prices, only=wanted)
            found.update((profile.trace_id, profile) for profile in profiles)
        return [found[trace_id] for trace_id in trace_ids if trace_id in found]


@contextmanager
def on_disk(
    files: tuple[str, ...],
    prices: PriceTable,
    options: AnalyzeOptions,
    progress: LoadProgress,
    on_error_line: Callable[[str], None],
) -> Iterator[ShardedAnalysis]:
    """The files partitioned into temporary shards and profiled shard by shard; removed on leaving."""
    import tempfile  # here: the module costs the start-up of every run, most of which never shard

    with tempfile.TemporaryDirectory(prefix="otel-agent-profiler-") as directory:
        parted = partition(files, Path(directory), progress=progress, on_error_line=on_error_line)
        with open(Path(directory) / "results", "w+b") as results:
            yield _analyzed(parted, prices, options, progress, on_error_line, results)


def held(
    trace_files: list[TraceFile],
    error_lines: list[str],
    prices: PriceTable,
    options: AnalyzeOptions,
    progress: LoadProgress,
    on_error_line: Callable[[str], None],
) -> ShardedAnalysis:
    """Files already read, analysed as on disk but with the shards held in memory.

    For the text report of many traces: profiled by the workers a shard at a time, only each
    trace's totals and findings come back, so the profiles of every trace are never held at once.
    """
    spans = sum(len(file.records) for file in trace_files)
    shards = max(_MIN_HELD_SHARDS, workers_for(options.workers, spans) * _HELD_SHARDS_PER_WORKER)
    parted = hold(trace_files, error_lines, shards)
    for file in trace_files:
        file.records = []  # held by the shards now
    return _analyzed(parted, prices, options, progress, on_error_line, io.BytesIO())


def _summary_findings(found: list[Finding]) -> list[Finding]:
    # The summary groups findings by kind and by what they are about: operation, category, the
    # names of the spans, a budget's name, and by what they rest on. Titles and evidence would be most
    # of the memory.
    return [
        finding
        if BY_KIND[finding.kind].grouping is Grouping.BUDGET
        else Finding(
            kind=finding.kind,
            title="",
            saving_ns=finding.saving_ns,
            operation=finding.operation,
            category=finding.category,
            where=[{"name": place.get("name")} for place in finding.where],
            rests_on=finding.rests_on,
        )
        for finding in found
    ]


def _analyzed(
    parted: Partitioned,
    prices: PriceTable,
    options: AnalyzeOptions,
    progress: LoadProgress,
    on_error_line: Callable[[str], None],
    results: BinaryIO,
) -> ShardedAnalysis:
    workers = workers_for(options.workers, parted.spans)
    text = options.format == "text"
    # The text report shows a trace in detail only with --all; of the others, it reads its findings
    # in the summary alone (the traces it shows are profiled again, with their findings in full).
    for_summary = text and not options.every_trace

    def shard(index: int) -> tuple[list[_Trace], list[str]]:
        profiles, lines = profiles_of_shard(parted, index, prices=prices)
        traces = []
        for profile in profiles:
            # One recorded schedule for every projection of the trace: its findings' and their combined one.
            schedule = RecordedSchedule(profile) if options.findings else None
            found = (
                find_all(profile, options.finding_options, schedule=schedule, for_summary=for_summary)
                if options.findings
                else None
            )
            what_if = what_ifs_together(profile, options.what_if) if options.what_if else None
            payload: bytes | None = None
            if not text:
                payload = encode_trace(
                    profile, found, what_if, options.finding_options.context_windows, schedule=schedule
                )
            elif options.every_trace:
                payload = trace_detail(
                    profile, found, max_spans=options.max_spans, ascii_only=options.ascii_only
                ).encode()
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
                on_error_line(line)
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
    return ShardedAnalysis(parted, prices, index, totals, findings, error_lines, results)

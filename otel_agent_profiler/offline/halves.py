"""``analyze --format json`` of a large input on two cores: half the traces profiled by a helper.

Reading the input takes one core; profiling and encoding it afterwards took one core too, while
the other waited for the indenting process (``report.json_indenter``), idle until writing began.
Here a helper process, forked once the input is read, takes the traces that come later in the
input (about half the spans): it profiles them, sends back what the document's totals read of
each (``_Counted``), and writes each trace's JSON, indented, into an unnamed temporary file.
Meanwhile this process profiles the first half. The document is then written in trace order: this
process's traces encoded as they come, the helper's read back from the file.

One clean OTLP JSON file is read in halves too (``offline.split_reading``): the helper is forked
before the spans are decoded, and decodes those of its traces itself.

The bytes are those of the traces profiled in one process: the same profiles in the same order
(start time, then trace id), the same error lines in the same order. If the helper fails (it
dies, its file cannot be written), this process profiles the traces it did not deliver.

On the benchmark's lean export of 200,000 spans (2 cores) ``analyze --format json`` took 0.84x
``json.load``'s time against 1.03x in one process, at 0.66x its memory against 0.48x: the helper
copies the pages of the records it reads, and holds the profiles of its half.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO

from ..adapters.files import TraceFile
from ..core.categories import classify
from ..core.genai import TokenUsage
from ..core.pricing import PriceTable
from ..core.profile import TraceProfile
from ..core.records import SpanRecord
from ..core.span_tree import group_by_trace
from ..core.split_traces import TraceCalls, calls_of, is_llm_only
from ..report.json_indenter import widen_pipe
from ..report.json_stream import Encoded
from .loading import PROFILING, FileRead, LoadProgress, files_read, profile_groups
from .workers import worker_context

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

#: The helper reports the lengths of its encoded traces this many at a time.
_BATCH = 64


def _usage(usage: TokenUsage) -> tuple[int, int, int, int]:
    return usage.input, usage.output, usage.cached_input, usage.reasoning


def _counted_values(profile: TraceProfile) -> tuple[Any, ...]:
    """What the totals read of a trace the helper profiled, as plain values: pickle writes and reads
    those in C, several times faster than the objects they are made of."""
    return (
        profile.start_ns,
        profile.trace_id,
        profile.llm_calls,
        _usage(profile.tokens),
        profile.cost_usd,
        is_llm_only(profile),
    )


class _Counted:
    """A trace the helper profiled, as the document's totals read it (``split_traces.Counted``)."""

    __slots__ = ("cost_usd", "llm_calls", "llm_only", "start_ns", "tokens", "trace_id")

    def __init__(self, values: tuple[Any, ...]) -> None:
        self.start_ns, self.trace_id, self.llm_calls, tokens, self.cost_usd, self.llm_only = values
        self.tokens = TokenUsage(*tokens)


@dataclass
class HalvedAnalysis:
    """Every trace profiled, here or by the helper; in trace order, each one's profile (here) or
    what the totals read of it (the helper's)."""

    files: list[FileRead]
    #: One per file not read whole and per trace the analysis failed on.
    error_lines: list[str]
    traces: list[TraceProfile | _Counted]
    _helper: Helper

    def calls(self) -> list[TraceProfile | TraceCalls]:
        """What finding split LLM calls reads of each trace, in trace order.

        Only an LLM-only trace can be a split copy of a call. Without one, nothing is matched, and
        the helper's traces are given without their calls; with one (rare: two instrumentations that
        do not share context), this process profiles the helper's traces again to list them.
        """
        if not any(trace.llm_only if isinstance(trace, _Counted) else is_llm_only(trace) for trace in self.traces):
            return [
                trace if isinstance(trace, TraceProfile) else TraceCalls(trace.trace_id, False, ())
                for trace in self.traces
            ]
        again = {profile.trace_id: calls_of(profile) for profile in self._helper.profiled_here()}
        return [trace if isinstance(trace, TraceProfile) else again[trace.trace_id] for trace in self.traces]

    def documents(self, context_windows: Mapping[str, int]) -> Iterator[dict[str, Any] | Encoded]:
        """Each trace's JSON (``on_disk.trace_json``), in trace order: built here, or as the helper
        encoded it (indented, ``on_disk.encode_trace``)."""
        from .on_disk import trace_json

        delivered = self._helper.delivered()
        for trace in self.traces:
            if isinstance(trace, TraceProfile):
                yield trace_json(trace, None, None, context_windows)
            else:
                yield next(delivered)


@contextmanager
def profiled_in_halves(
    trace_files: list[TraceFile],
    error_lines: list[str],
    prices: PriceTable,
    context_windows: Mapping[str, int],
    beside: str | None,
    progress: LoadProgress,
    on_error_line: Callable[[str], None],
) -> Iterator[HalvedAnalysis | None]:
    """The traces of ``trace_files`` profiled in halves, for as long as the block runs; None when no
    helper could be started (another thread runs, the platform cannot fork, no temporary file):
    the caller profiles them itself. ``beside``: the output, whose folder takes the helper's file."""
    means = helper_means(beside)
    if means is None:
        yield None
        return
    file, context = means
    groups = group_by_trace(record for trace_file in trace_files for record in trace_file.records)
    mine, theirs = _halves(groups)
    try:
        helper = Helper(_helper_main, theirs, lambda: theirs, prices, context_windows, file, context)
    except OSError:
        file.close()
        yield None  # no process to spare (a limit on processes, memory)
        return
    try:
        yield profiled_with(
            helper, mine, len(groups), files_read(trace_files), error_lines, prices, progress, on_error_line
        )
    finally:
        helper.close()


def helper_means(beside: str | None) -> tuple[BinaryIO, Any] | None:
    """The temporary file a helper writes its documents into (beside the output ``beside``, else in
    the temporary folder) and the context that forks it; None when either is missing (another
    thread runs, the platform cannot fork, no temporary file)."""
    from .spool import unnamed_file  # here: tempfile costs the start-up of every run

    file = unnamed_file(beside)
    context = worker_context()
    if file is None or context.get_start_method() != "fork":
        if file is not None:
            file.close()
        return None
    return file, context


def profiled_with(
    helper: Helper,
    mine: dict[str, list[SpanRecord]],
    traces: int,
    files: list[FileRead],
    error_lines: list[str],
    prices: PriceTable,
    progress: LoadProgress,
    on_error_line: Callable[[str], None],
) -> HalvedAnalysis:
    """The ``traces`` of the input profiled: ``mine`` here, the rest by ``helper`` (or here, if it fails)."""
    lines = list(error_lines)

    def report(line: str) -> None:
        lines.append(line)
        progress.close()
        on_error_line(line)

    progress.start(PROFILING, traces)
    profiles: list[TraceProfile | _Counted] = list(profile_groups(mine, classify, prices, report, progress.advance))
    profiles += helper.profiled(report)
    progress.advance(traces - len(mine))
    progress.close()
    profiles.sort(key=lambda trace: (trace.start_ns, trace.trace_id))
    return HalvedAnalysis(files, lines, profiles, helper)


def _halves(groups: dict[str, list[SpanRecord]]) -> tuple[dict[str, list[SpanRecord]], dict[str, list[SpanRecord]]]:
    """The traces up to about half the spans, in input order, and the rest: neighbouring traces, so
    that the helper copies each page of the records it reads about once (see ``shards.hold``)."""
    half = sum(map(len, groups.values())) // 2
    mine: dict[str, list[SpanRecord]] = {}
    theirs: dict[str, list[SpanRecord]] = {}
    spans = 0
    for trace_id, records in groups.items():
        (mine if spans < half else theirs)[trace_id] = records
        spans += len(records)
    return mine, theirs


class Helper:
    """The forked helper, seen from this process: what it profiled, then the traces it encoded.

    ``target`` runs in the helper with ``work`` (what it is to profile), the prices, the context
    windows, the temporary file and the end of the pipe it sends on: ``_helper_main``, or a function
    that gets its traces from ``work`` first and then calls it. ``theirs`` gives the helper's traces
    here, to profile them here when it fails.
    """

    def __init__(
        self,
        target: Callable[..., None],
        work: Any,
        theirs: Callable[[], dict[str, list[SpanRecord]]],
        prices: PriceTable,
        context_windows: Mapping[str, int],
        file: BinaryIO,
        context: Any,
    ) -> None:
        from .workers import _interrupts_blocked_for_children

        self._theirs, self._prices, self._windows, self._file = theirs, prices, context_windows, file
        self._receiving, sending = context.Pipe(duplex=False)
        # What it profiled goes in one message of a few hundred kilobytes: with room for it in the
        # pipe, the helper goes on encoding before this process is ready to read it.
        widen_pipe(sending.fileno())
        self._process = context.Process(target=target, args=(work, prices, context_windows, file, sending), daemon=True)
        try:
            with _interrupts_blocked_for_children():
                self._process.start()
        finally:
            sending.close()  # the helper's end: once it exits, a read here ends instead of waiting
        #: Its traces, once this process profiled them itself: the helper failed, or their calls
        #: were wanted (``HalvedAnalysis.calls``).
        self._here: list[TraceProfile] | None = None
        #: The traces it profiled, and how many of their JSON documents were read back.
        self._count = 0
        self._delivered = 0

    def profiled(self, report: Callable[[str], None]) -> list[_Counted]:
        """What the helper profiled, in its order (its error lines passed to ``report``); profiled
        here instead if it failed."""
        message = self.received()
        counted: list[_Counted]
        if message is not None and message[0] == "profiled":
            counted = [_Counted(values) for values in message[1]]
            lines = message[2]
            for line in lines:
                report(line)
        else:
            counted = [_Counted(_counted_values(profile)) for profile in self.profiled_here(report)]
        self._count = len(counted)
        return counted

    def delivered(self) -> Iterator[dict[str, Any] | Encoded]:
        """The helper's traces' JSON, in its order: read back from its file, and made here for any
        it did not deliver."""
        yield from self._read_back()
        if self._delivered < self._count:
            from .on_disk import trace_json

            # It stopped part-way: the rest is made here.
            for profile in self.profiled_here()[self._delivered :]:
                yield trace_json(profile, None, None, self._windows)

    def _read_back(self) -> Iterator[Encoded]:
        offset = 0
        while self._delivered < self._count:
            message = self.received()
            if message is None or message[0] != "placed":
                return
            for length in message[1]:
                piece = os.pread(self._file.fileno(), length, offset)
                if len(piece) != length:
                    return
                offset += length
                self._delivered += 1
                yield Encoded(piece)

    def close(self) -> None:
        if self._process.is_alive():
            self._process.kill()
        self._process.join()
        with suppress(OSError):
            self._receiving.close()
        with suppress(OSError):
            self._file.close()

    def received(self) -> tuple[Any, ...] | None:
        """The helper's next message; None once it is gone."""
        try:
            return self._receiving.recv()  # type: ignore[no-any-return]
        except (EOFError, OSError):
            return None

    def profiled_here(self, report: Callable[[str], None] = lambda line: None) -> list[TraceProfile]:
        """The helper's traces, profiled in this process once (its error lines to ``report``: by
        default nowhere, the helper's were reported already)."""
        if self._here is None:
            self._here = profile_groups(self._theirs(), classify, self._prices, report)
        return self._here


def _helper_main(
    groups: dict[str, list[SpanRecord]],
    prices: PriceTable,
    context_windows: Mapping[str, int],
    file: BinaryIO,
    sending: Connection,
) -> None:
    """The helper: profile ``groups``, send what the totals read, then encode each trace into ``file``
    and send their lengths. It stops at the first failure; the other process does the rest."""
    from .on_disk import encode_trace
    from .spool import written_at

    try:
        lines: list[str] = []
        profiles = profile_groups(groups, classify, prices, lines.append)
        sending.send(("profiled", [_counted_values(profile) for profile in profiles], lines))
        offset = 0
        lengths: list[int] = []
        for profile in profiles:
            # Indented here: this process has the time, the one writing the document has not.
            piece = encode_trace(profile, None, None, context_windows)
            if not written_at(file, piece, offset):
                break
            offset += len(piece)
            lengths.append(len(piece))
            if len(lengths) == _BATCH:
                sending.send(("placed", lengths))
                lengths = []
        sending.send(("placed", lengths))
    except BaseException:
        pass

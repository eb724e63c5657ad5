"""``analyze --format json`` of one large OTLP JSON file: the helper decodes its traces itself.

``offline.halves`` forks its helper once the input is read. Reading took one core, a third of the
run (decoding the spans, then turning them into records), while the other core waited. For one
clean OTLP JSON file the helper is forked sooner here: once the document is scanned (each span's
JSON found, none decoded) and each span's trace id read. The traces are split as ``halves`` splits
them, those that appear first up to half the spans here and the rest in the helper, and each
process decodes the spans of its own traces only. Then the two go on as in ``offline.halves``; the
document is the same, byte for byte. The command keeps the file's bytes to the end, to decode the
helper's spans itself should it fail after reading them.

Over the benchmark's lean export of 200,000 spans (2 cores, a slow afternoon) the command took
1.19x-1.24x ``json.load``'s time at the median against 1.48x-1.49x with the helper forked once the
file is decoded; reading took 1.05 s in each process where one process took 1.7-1.8 s.

Anything else is read as before, and ``offline.halves`` forks its helper afterwards: several
files, a file that is not clean OTLP JSON (the tolerant reader then says which spans it skipped,
even those in the helper's half), and a helper that cannot be started or fails before it has read
its half.
"""

from __future__ import annotations

import codecs
import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

import msgspec

from ..adapters.files import OTLP_JSON, TraceFile, clean_otlp_file, parse_trace_bytes, trace_file_bytes
from ..adapters.otlp_json_typed import ScopeSlice, records_of, scanned, trace_ids_of
from ..core.pricing import PriceTable
from ..core.records import SpanRecord
from ..core.span_tree import group_by_trace
from ..errors import InternalErrorLog, SpanDataError
from . import halves
from .halves import HalvedAnalysis, Helper, helper_means, profiled_with
from .loading import READING, FileRead, LoadProgress, file_read, read_trace_files
from .workers import workers_for

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from typing import BinaryIO

#: What a span that cannot be decoded cleanly raises (the tolerant reader then reads the file).
_UNCLEAN = (msgspec.DecodeError, msgspec.ValidationError, SpanDataError, UnicodeDecodeError, RecursionError)

# Logged at DEBUG, as the readers' own bugs are (``adapters.files``): a command line never prints
# a traceback for one. Under the test suite it is raised.
_SPLITTING_BUGS = InternalErrorLog(
    logging.getLogger(__name__), "otel-agent-profiler: internal error reading %s in halves", level=logging.DEBUG
)

#: The files read and their error lines, as ``loading.read_trace_files`` returns them.
FilesRead = tuple[list[TraceFile], list[str]]


@contextmanager
def read_in_halves(
    paths: Sequence[str],
    workers: int | None,
    prices: PriceTable,
    context_windows: Mapping[str, int],
    beside: str | None,
    progress: LoadProgress,
    on_error_line: Callable[[str], None],
) -> Iterator[HalvedAnalysis | FilesRead]:
    """The traces of ``paths`` read and profiled in halves, for as long as the block runs; or, when
    they are not read so (see the module), the files read as ``loading.read_trace_files`` reads
    them, for the caller to go on with. ``workers``: ``--workers``; ``beside``: the output, whose
    folder takes the helper's file."""
    if len(paths) != 1:
        yield read_trace_files(paths, progress=progress, on_error_line=on_error_line)
        return
    path = str(paths[0])
    progress.start(READING, 1)
    data = trace_file_bytes(path)
    if isinstance(data, TraceFile):  # it could not be read
        yield file_read(data, progress, on_error_line)
        return
    reading = _SplitReading(path, data, workers)
    del data  # the scanned spans keep what they need of it
    try:
        mine = reading.read(prices, context_windows, beside)
        if mine is None:
            reading.close()
            yield file_read(reading.whole(), progress, on_error_line)
            return
        progress.advance(detail=os.path.basename(path))
        files = [FileRead(path, OTLP_JSON, reading.spans, [])]
        yield profiled_with(reading.started(), mine, reading.traces, files, [], prices, progress, on_error_line)
    finally:
        reading.close()


class _SplitReading:
    """One file's traces read in two processes, and the file read whole when that cannot be."""

    def __init__(self, path: str, data: bytes, workers: int | None) -> None:
        self.path = path
        if data.startswith(codecs.BOM_UTF8):
            data = data[len(codecs.BOM_UTF8) :]
        self._data = data
        self._workers = workers
        #: The file's spans, scope by scope (None: not a clean OTLP JSON outline), and how many.
        self._slices: list[ScopeSlice] | None = None
        self.spans = 0
        #: How many traces the file holds.
        self.traces = 0
        #: Whether a span could not be decoded cleanly: the tolerant reader then reads the file.
        self._unclean = False
        #: The spans of the helper's traces.
        self._theirs: list[ScopeSlice] = []
        self._helper: Helper | None = None

    def read(
        self, prices: PriceTable, context_windows: Mapping[str, int], beside: str | None
    ) -> dict[str, list[SpanRecord]] | None:
        """This process's traces, each with its records; None when the file is to be read whole
        here (``whole``)."""
        try:
            return self._read(prices, context_windows, beside)
        except Exception:
            # A bug of ours costs the time, not the output: the file is read whole, as before.
            _SPLITTING_BUGS.report("read_in_halves", self.path)
            self._unclean = True
            return None

    def _read(
        self, prices: PriceTable, context_windows: Mapping[str, int], beside: str | None
    ) -> dict[str, list[SpanRecord]] | None:
        try:
            self._slices = scanned(self._data)
            self.spans = sum(len(raw) for _, _, raw in self._slices)
            if workers_for(self._workers, self.spans) < 2:
                return None
            trace_ids = trace_ids_of(self._slices)
        except _UNCLEAN:
            self._unclean = True
            return None
        means = helper_means(beside)
        if means is None:
            return None
        file, context = means
        theirs, self.traces = _later_traces(trace_ids)
        mine, self._theirs = _split(self._slices, trace_ids, theirs)
        del trace_ids
        try:
            self._helper = Helper(
                _reading_helper_main, self._theirs, self._their_traces, prices, context_windows, file, context
            )
        except OSError:
            file.close()
            return None  # no process to spare
        try:
            groups = group_by_trace(records_of(mine))
        except _UNCLEAN:
            self._unclean = True
            return None
        message = self._helper.received()
        if message != ("read",):
            self._unclean = message is not None  # ("unreadable",); None: it failed
            return None
        self._slices = None  # only the helper's spans may still be wanted (``_their_traces``)
        return groups

    def started(self) -> Helper:
        """The helper, once ``read`` started it."""
        assert self._helper is not None, "read started no helper"
        return self._helper

    def _their_traces(self) -> dict[str, list[SpanRecord]]:
        """The helper's traces, decoded here: it failed after it had read them."""
        return group_by_trace(records_of(self._theirs))

    def whole(self) -> TraceFile:
        """The file as ``parse_trace_bytes`` reads it, without scanning it again when it is clean.
        What was kept to read it in halves is let go: the caller holds the file to the end."""
        slices, data = self._slices, self._data
        self._slices, self._theirs, self._data = None, [], b""
        if slices is not None and not self._unclean:
            try:
                return clean_otlp_file(self.path, records_of(slices))
            except _UNCLEAN:
                pass
        return parse_trace_bytes(data, self.path)

    def close(self) -> None:
        """Stop the helper, if it runs (again: nothing)."""
        if self._helper is not None:
            self._helper.close()
            self._helper = None


def _later_traces(trace_ids: list[str]) -> tuple[set[str], int]:
    """The traces for the helper, and how many there are in all: as ``halves`` splits them, those
    that appear first in the file up to half its spans stay here, the rest go."""
    counts: dict[str, int] = {}
    for trace_id in trace_ids:
        counts[trace_id] = counts.get(trace_id, 0) + 1
    half = len(trace_ids) // 2
    theirs: set[str] = set()
    spans = 0
    for trace_id, count in counts.items():
        if spans >= half:
            theirs.add(trace_id)
        spans += count
    return theirs, len(counts)


def _split(
    slices: list[ScopeSlice], trace_ids: list[str], theirs: set[str]
) -> tuple[list[ScopeSlice], list[ScopeSlice]]:
    """The spans of ``slices`` whose trace is not in ``theirs``, and those whose trace is, each
    scope keeping its resource and name."""
    mine: list[ScopeSlice] = []
    their: list[ScopeSlice] = []
    position = 0
    for resource, scope, raw in slices:
        kept: list[msgspec.Raw] = []
        given: list[msgspec.Raw] = []
        for span, trace_id in zip(raw, trace_ids[position : position + len(raw)], strict=True):
            (given if trace_id in theirs else kept).append(span)
        position += len(raw)
        if kept:
            mine.append((resource, scope, kept))
        if given:
            their.append((resource, scope, given))
    return mine, their


def _reading_helper_main(
    theirs: list[ScopeSlice],
    prices: PriceTable,
    context_windows: Mapping[str, int],
    file: BinaryIO,
    sending: Connection,
) -> None:
    """The helper: decode the spans of its traces, say whether it could, then go on as
    ``halves._helper_main``."""
    try:
        try:
            groups = group_by_trace(records_of(theirs))
        except _UNCLEAN:
            sending.send(("unreadable",))
            return
        sending.send(("read",))
    except BaseException:
        return
    halves._helper_main(groups, prices, context_windows, file, sending)

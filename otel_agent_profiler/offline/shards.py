"""Inputs bigger than memory: JSON Lines partitioned by trace id into shards on disk, profiled shard by shard.

A Collector's file exporter writes a trace's spans over many lines, with thousands of traces
open at once, so no part of the file holds whole traces. Reading it a line at a time, each
span goes to the shard its trace id hashes to (a temporary file); every trace then lies whole
in one shard, and a shard is small enough to profile in memory. Results do not depend on the
shards: each trace is profiled from the same records, in the same order, as
``offline.load_profiles`` would profile it.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from ..adapters.files import TraceFile, cannot_read, iter_json_lines, looks_like_json_lines, read_trace_file
from ..core.analyze import Classifier
from ..core.categories import classify
from ..core.pricing import PriceTable
from ..core.profile import TraceProfile
from ..core.records import SpanRecord
from ..core.span_tree import group_by_trace
from .limits import ON_DISK_BYTES as ON_DISK_BYTES
from .loading import READING, FileRead, LoadProgress, files_read, profile_groups

#: About this much input goes to each shard; a shard takes several times its size to profile.
_INPUT_BYTES_PER_SHARD = 16 * 2**20
_MIN_SHARDS = 4
_MAX_SHARDS = 1024
# Records held before they are written to their shards: bounds the memory of partitioning.
_BUFFERED_RECORDS = 50_000
_MIB = 2**20


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def on_disk_wanted(paths: Sequence[str], requested: bool | None) -> bool:
    """Whether to profile ``paths`` on disk: ``requested`` (``--on-disk``) when given, else when
    their JSON Lines files are larger than ``ON_DISK_BYTES`` in all."""
    if requested is not None:
        return requested
    lines_bytes = 0
    for path in paths:
        size = _size(path)
        if path != "-" and size > _MIB and looks_like_json_lines(path):
            lines_bytes += size
    return lines_bytes > ON_DISK_BYTES


def shard_of(trace_id: str, shards: int) -> int:
    """The shard a trace's spans go to."""
    return zlib.crc32(trace_id.encode()) % shards


@dataclass
class Partitioned:
    """Trace files partitioned into shards under ``directory``, or held in memory (see ``hold``)."""

    directory: Path
    shards: int
    files: list[FileRead] = field(default_factory=list)
    #: One line per file that could not be read whole, naming it and what is wrong.
    error_lines: list[str] = field(default_factory=list)
    spans: int = 0
    #: Each shard's traces (their records by trace id), when the shards are held in memory.
    held: list[dict[str, list[SpanRecord]]] | None = None

    def shard_holding(self, trace_id: str) -> int:
        """The shard that holds ``trace_id``'s spans (held shards are not by hash: see ``hold``)."""
        if self.held is not None:
            return next(index for index, traces in enumerate(self.held) if trace_id in traces)
        return shard_of(trace_id, self.shards)

    def shard_path(self, index: int) -> Path:
        return self.directory / f"shard-{index:04d}.pickle"


class _ShardWriter:
    """Records appended to their shards' files, in batches."""

    def __init__(self, partitioned: Partitioned) -> None:
        self._partitioned = partitioned
        self._pending: list[list[SpanRecord]] = [[] for _ in range(partitioned.shards)]
        self._buffered = 0
        self._streams: dict[int, BinaryIO] = {}

    def add(self, records: list[SpanRecord]) -> None:
        shards = self._partitioned.shards
        for record in records:
            self._pending[shard_of(record.trace_id, shards)].append(record)
        self._buffered += len(records)
        if self._buffered >= _BUFFERED_RECORDS:
            self.flush()

    def flush(self) -> None:
        for index, records in enumerate(self._pending):
            if not records:
                continue
            stream = self._streams.get(index)
            if stream is None:
                stream = self._streams[index] = open(self._partitioned.shard_path(index), "ab")  # noqa: SIM115
            # Resources are shared between the records of a batch, and pickled once for them.
            import pickle  # here, as below: only inputs profiled on disk pickle, and it costs every start-up

            pickle.dump(records, stream, protocol=pickle.HIGHEST_PROTOCOL)
            self._pending[index] = []
        self._buffered = 0

    def close(self) -> None:
        self.flush()
        for stream in self._streams.values():
            stream.close()
        self._streams.clear()


def partition(
    paths: Sequence[str],
    directory: Path,
    *,
    progress: LoadProgress,
    on_error_line: Callable[[str], None] | None = None,
) -> Partitioned:
    """Read the trace files at ``paths`` into shards under ``directory``.

    JSON Lines files are read a line at a time; other files (one JSON document each) whole, as
    ``offline.load_profiles`` reads them. Error lines are collected and passed to
    ``on_error_line`` as for ``load_profiles``; ``progress`` counts MiB read.
    """
    sizes = [_size(path) for path in paths]
    shards = max(_MIN_SHARDS, min(_MAX_SHARDS, sum(sizes) // _INPUT_BYTES_PER_SHARD + 1))
    partitioned = Partitioned(directory, shards)
    writer = _ShardWriter(partitioned)
    progress.start(READING, max(1, sum(sizes) // _MIB))
    try:
        for path in paths:
            trace_file, spans = _read_into(path, writer, progress)
            partitioned.spans += spans
            partitioned.files.append(FileRead(trace_file.path, trace_file.format, spans, trace_file.problems))
            line = trace_file.error_line(spans)
            if line is not None:
                partitioned.error_lines.append(line)
                if on_error_line is not None:
                    progress.close()
                    on_error_line(line)
            progress.advance(0, os.path.basename(path))
    finally:
        writer.close()
    return partitioned


def hold(trace_files: Sequence[TraceFile], error_lines: list[str], shards: int) -> Partitioned:
    """Trace files already read, in ``shards`` shards held in memory: each trace whole in one shard,
    so the shards can be profiled as on disk (by forked workers, with only each trace's totals and
    findings kept of its profile).

    Each shard holds traces read one after another, about as many spans in each, not the traces
    whose ids hash to it: records lie in memory in the order they were read, and a forked worker
    copies every page of them it touches. Shards of traces by hash would have each worker touch,
    and copy, nearly every page; shards of neighbouring traces have each page copied about once.
    """
    groups = group_by_trace(r for file in trace_files for r in file.records)
    spans = sum(len(file.records) for file in trace_files)
    held: list[dict[str, list[SpanRecord]]] = [{} for _ in range(shards)]
    before = 0  # spans of the traces placed so far
    for trace_id, records in groups.items():
        held[before * shards // spans][trace_id] = records
        before += len(records)
    return Partitioned(Path(), shards, files_read(trace_files), error_lines, spans, held)


def _read_into(path: str, writer: _ShardWriter, progress: LoadProgress) -> tuple[TraceFile, int]:
    if path == "-" or not looks_like_json_lines(path):
        trace_file = read_trace_file(path)
        writer.add(trace_file.records)
        progress.advance(_size(path) // _MIB)
        spans = len(trace_file.records)
        trace_file.records = []
        return trace_file, spans
    trace_file = TraceFile(path=path, format=None)
    spans = 0
    unreported = 0

    def on_read(count: int) -> None:
        nonlocal unreported
        unreported += count
        if unreported >= _MIB:
            progress.advance(unreported // _MIB)
            unreported %= _MIB

    try:
        for records in iter_json_lines(path, trace_file, on_read):
            writer.add(records)
            spans += len(records)
    except OSError as exc:
        trace_file.problems.append(cannot_read(path, exc))
    if not spans and not trace_file.problems:
        trace_file.problems.append("contains no spans")
    return trace_file, spans


def shard_records(partitioned: Partitioned, index: int) -> list[SpanRecord]:
    """Every record of one shard, in the order they were read."""
    records: list[SpanRecord] = []
    path = partitioned.shard_path(index)
    if not path.exists():
        return records
    import pickle

    with open(path, "rb") as stream:
        while True:
            try:
                records.extend(pickle.load(stream))
            except EOFError:
                return records


def profiles_of_shard(
    partitioned: Partitioned,
    index: int,
    *,
    classifier: Classifier = classify,
    prices: PriceTable | None = None,
    only: set[str] | None = None,
) -> tuple[list[TraceProfile], list[str]]:
    """The profiles of the traces in one shard (``only`` those trace ids, when given), ordered by
    start time then trace id, and an error line per trace the analysis failed on."""
    if partitioned.held is not None:
        groups = partitioned.held[index]
    else:
        groups = group_by_trace(shard_records(partitioned, index))
    if only is not None:
        groups = {trace_id: spans for trace_id, spans in groups.items() if trace_id in only}
    error_lines: list[str] = []
    return profile_groups(groups, classifier, prices, error_lines.append), error_lines

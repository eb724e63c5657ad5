"""Loading exported trace files for offline analysis: paths in, trace profiles out.

Every offline road (the ``analyze``, ``export``, ``report`` and ``diff`` commands, and
``analytics.to_dataframe``) reads its files through :func:`load_profiles`, so they all read,
report unreadable files and profile the same way. Nothing inside a user's process uses this.
"""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

if TYPE_CHECKING:
    # In annotations only: importing typing_extensions took a few milliseconds of every run.
    from typing_extensions import Unpack

from ..adapters.files import TraceFile, read_trace_file
from ..adapters.recorded_attributes import RECORDED_ATTRIBUTES
from ..core.analyze import Classifier, profile_trace
from ..core.categories import classify
from ..core.pricing import PriceTable
from ..core.profile import TraceProfile
from ..core.records import SpanRecord
from ..core.span_tree import group_by_trace
from ..errors import InternalErrorLog

# The analysis's own bug on one trace must not cost the other traces their report: the trace gets
# an error line instead. Logged at DEBUG so that a command line never prints a traceback for it.
PROFILING_BUGS = InternalErrorLog(
    logging.getLogger(__name__), "otel-agent-profiler: internal error profiling trace %s", level=logging.DEBUG
)

#: The phases :func:`load_profiles` reports to its progress, in order.
READING = "reading"
PROFILING = "profiling"


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the block (a no-op when it is already paused).

    Reading a large trace file allocates millions of dicts and lists, none of them garbage;
    the collector would still traverse them again and again (several times the parse itself).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class LoadOptions(TypedDict, total=False):
    """How :func:`load_profiles` and its kin classify, price and report."""

    #: Span name and attributes to category (default ``core.categories.classify``).
    classifier: Classifier
    prices: PriceTable | None
    #: Where the steps are reported (default: nowhere).
    progress: LoadProgress | None
    #: Gets each error line as soon as it is known (after ``progress.close()``).
    on_error_line: Callable[[str], None] | None


class LoadProgress(Protocol):
    """Where :func:`load_profiles` reports its steps (``report.progress.Progress`` is one)."""

    def start(self, label: str, total: int) -> None:
        """Begin the phase ``label`` of ``total`` steps."""

    def advance(self, steps: int = 1, detail: str = "") -> None:
        """Count ``steps`` done; ``detail`` names what was just done."""

    def close(self) -> None:
        """Erase whatever is drawn, so an error line can be printed on a clean line."""


class _NoProgress:
    def start(self, label: str, total: int) -> None:
        pass

    def advance(self, steps: int = 1, detail: str = "") -> None:
        pass

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class FileRead:
    """What was read from one trace file."""

    path: str
    #: The detected format (``adapters.files.OTLP_JSON``, ...), ``None`` when none was recognised.
    format: str | None
    spans: int
    #: What could not be read, each a short description; empty when the file was read whole.
    problems: list[str]

    def to_dict(self) -> dict[str, Any]:
        """The file as the JSON outputs list it: path, format, spans and problems."""
        return {"path": self.path, "format": self.format, "spans": self.spans, "problems": self.problems}


@dataclass
class LoadedProfiles:
    """The result of :func:`load_profiles`."""

    #: One profile per trace, ordered by start time, then trace id.
    profiles: list[TraceProfile]
    #: The files in the order they were given.
    files: list[FileRead] = field(default_factory=list)
    #: One line per file that could not be read whole, naming it and what is wrong.
    error_lines: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Whether every file was read whole."""
        return not self.error_lines

    def file_dicts(self) -> list[dict[str, Any]]:
        """The files as the JSON outputs list them."""
        return [file.to_dict() for file in self.files]


def load_profiles(
    paths: Sequence[str],
    **options: Unpack[LoadOptions],
) -> LoadedProfiles:
    """Read the trace files at ``paths`` and profile every trace they hold, together.

    A trace spread over several files is put back together. A file that cannot be read, or
    only partly, does not stop the others: its error line is collected and, as soon as it is
    known, passed to ``on_error_line`` (after ``progress.close()``, so it lands on a clean line).
    ``progress`` sees a :data:`READING` phase of one step per file and a :data:`PROFILING` phase
    of one step per trace. A trace the analysis fails on (a bug of ours) gets an error line too,
    and the others are still profiled. The cyclic garbage collector is paused throughout.
    """
    report = _ErrorLines(options.get("progress"), options.get("on_error_line"))
    with cyclic_gc_paused():
        return _profiled(_read(paths, report), options, report)


def read_trace_files(
    paths: Sequence[str],
    *,
    progress: LoadProgress | None = None,
    on_error_line: Callable[[str], None] | None = None,
) -> tuple[list[TraceFile], list[str]]:
    """Read the trace files at ``paths`` as :func:`load_profiles` reads them, without profiling
    them: the files, and their error lines (each also passed to ``on_error_line`` when known)."""
    report = _ErrorLines(progress, on_error_line)
    with cyclic_gc_paused():
        return _read(paths, report), report.lines


def file_read(
    trace_file: TraceFile, progress: LoadProgress, on_error_line: Callable[[str], None] | None
) -> tuple[list[TraceFile], list[str]]:
    """One file read by other means (its :data:`READING` phase started), reported as
    :func:`read_trace_files` reports each file it reads, and returned as it returns them."""
    report = _ErrorLines(progress, on_error_line)
    _reported(trace_file, report)
    return [trace_file], report.lines


def _read(paths: Sequence[str], report: _ErrorLines) -> list[TraceFile]:
    report.progress.start(READING, len(paths))
    return [_reported(read_trace_file(path), report) for path in paths]


def _reported(trace_file: TraceFile, report: _ErrorLines) -> TraceFile:
    line = trace_file.error_line()
    if line is not None:
        report(line)  # as soon as it is known
    report.progress.advance(detail=os.path.basename(trace_file.path))
    return trace_file


def profile_trace_files(
    trace_files: Sequence[TraceFile],
    **options: Unpack[LoadOptions],
) -> LoadedProfiles:
    """Profile the traces of trace files already read (such as ``stores.fetch_traces`` fetched).

    What :func:`load_profiles` does after reading its files, with the same error lines (a
    trace file's own, then one per trace the analysis fails on) and the same order of profiles.
    """
    report = _ErrorLines(options.get("progress"), options.get("on_error_line"))
    with cyclic_gc_paused():
        for trace_file in trace_files:
            line = trace_file.error_line()
            if line is not None:
                report(line)
        return _profiled(trace_files, options, report)


def profile_read_files(
    trace_files: Sequence[TraceFile],
    error_lines: Sequence[str],
    **options: Unpack[LoadOptions],
) -> LoadedProfiles:
    """Profile the traces of files read by :func:`read_trace_files`, whose ``error_lines`` were
    passed on then: what :func:`load_profiles` returns for them."""
    report = _ErrorLines(options.get("progress"), options.get("on_error_line"))
    report.lines.extend(error_lines)
    with cyclic_gc_paused():
        return _profiled(trace_files, options, report)


class _ErrorLines:
    """Error lines, collected and each passed on at once (after the progress bar is erased); and
    the progress they interrupt, shown nowhere when none is given."""

    def __init__(self, progress: LoadProgress | None, on_error_line: Callable[[str], None] | None) -> None:
        self.lines: list[str] = []
        self.progress: LoadProgress = progress if progress is not None else _NoProgress()
        self._on_error_line = on_error_line

    def __call__(self, line: str) -> None:
        self.lines.append(line)
        if self._on_error_line is not None:
            self.progress.close()
            self._on_error_line(line)


def _profiled(trace_files: Sequence[TraceFile], options: LoadOptions, report: _ErrorLines) -> LoadedProfiles:
    progress = report.progress
    files = files_read(trace_files)
    groups = group_by_trace(record for file in trace_files for record in file.records)
    progress.start(PROFILING, len(groups))
    classifier = options.get("classifier", classify)
    profiles = profile_groups(groups, classifier, options.get("prices"), report, progress.advance)
    return LoadedProfiles(profiles, files, report.lines)


def files_read(trace_files: Sequence[TraceFile]) -> list[FileRead]:
    """What the outputs say about each file read."""
    return [FileRead(file.path, file.format, len(file.records), file.problems) for file in trace_files]


def profile_groups(
    groups: Mapping[str, list[SpanRecord]],
    classifier: Classifier,
    prices: PriceTable | None,
    on_error_line: Callable[[str], None],
    after_each: Callable[[], None] | None = None,
) -> list[TraceProfile]:
    """The profiles of each trace's records, ordered as ``core.analyze.profile_records`` orders them.

    A trace the analysis fails on (a bug of ours) is left out with an error line; the others are
    still profiled. ``after_each`` is called after each trace (a progress step).
    """
    profiles = []
    for trace_id, spans in groups.items():
        try:
            profiles.append(profile_trace(spans, classifier, prices, recorded=RECORDED_ATTRIBUTES))
        except Exception as exc:
            # Not the guard: the error line the user reads names the exception.
            PROFILING_BUGS.report("profile_trace", trace_id)
            on_error_line(f"trace {trace_id}: could not be profiled: internal error ({type(exc).__name__}: {exc})")
        if after_each is not None:
            after_each()
    profiles.sort(key=lambda p: (p.start_ns, p.trace_id))
    return profiles

"""Encoded documents kept in a temporary file, not in memory, until they are written out.

``report --summary-json`` gets each trace's document encoded from the worker processes as they
finish it, in the order of the input, and writes them slowest first once every trace is done:
about 70 MB over 200,000 spans that the main process would otherwise hold while its workers run,
at its peak of memory. They wait in an unnamed file beside the output instead (the disk they are
bound for), and are read back one at a time as they are written. ``analyze --format json``'s
helper process (``offline.halves``) writes its traces' JSON to such a file too.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Mapping
from typing import BinaryIO


class EncodedSpool(Mapping[str, bytes]):
    """Bytes by key, written to an unnamed temporary file as they are added and read back on demand.

    A file that cannot be made, or a write to it that fails (a full disk, a size limit), costs
    only the memory: what cannot go to the file is kept here. ``close()`` removes the file (it
    has no name: the operating system removes it with the process in any case).

    Args:
        beside: a path whose folder takes the file (else the system's temporary folder).
    """

    def __init__(self, beside: str | None = None) -> None:
        self._file = unnamed_file(beside)
        # Cleared by a failed write: later bytes stay here, the earlier ones are still read back.
        self._writing = self._file is not None
        self._end = 0
        self._placed: dict[str, tuple[int, int]] = {}
        self._held: dict[str, bytes] = {}

    def add(self, key: str, data: bytes) -> None:
        """Keep ``data`` under ``key`` (replacing what was there)."""
        self._placed.pop(key, None)
        self._held.pop(key, None)
        if self._writing and self._written(data):
            self._placed[key] = (self._end, len(data))
            self._end += len(data)
        else:
            self._held[key] = data

    def __getitem__(self, key: str) -> bytes:
        place = self._placed.get(key)
        if place is None:
            return self._held[key]
        assert self._file is not None  # an entry is placed only while the file is open
        offset, length = place
        return os.pread(self._file.fileno(), length, offset)

    def __iter__(self) -> Iterator[str]:
        yield from self._placed
        yield from self._held

    def __len__(self) -> int:
        return len(self._placed) + len(self._held)

    def close(self) -> None:
        """Remove the file and forget every entry: none can be read any more."""
        self._placed.clear()
        self._held.clear()
        self._writing = False
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None

    def _written(self, data: bytes) -> bool:
        """Whether ``data`` was written whole at the end of the file."""
        assert self._file is not None
        if written_at(self._file, data, self._end):
            return True
        self._writing = False
        return False


def written_at(file: BinaryIO, data: bytes, offset: int) -> bool:
    """Whether ``data`` was written whole to ``file`` at ``offset`` (the file's own position unmoved)."""
    view = memoryview(data)
    done = 0
    try:
        while done < len(view):
            # Unbuffered: a write may take less than it was given, and a failed one leaves
            # nothing behind in a buffer to fail again later.
            wrote = os.pwrite(file.fileno(), view[done:], offset + done)
            if wrote <= 0:
                return False
            done += wrote
    except OSError:
        return False
    return True


def unnamed_file(beside: str | None) -> BinaryIO | None:
    """An unbuffered temporary file with no name, in the folder of the path ``beside`` (the disk the
    bytes are bound for) or else the system's temporary folder; None when neither takes one."""
    folder = os.path.dirname(os.path.abspath(beside)) if beside else None
    for where in (folder, None) if folder else (None,):
        try:
            return tempfile.TemporaryFile(dir=where, prefix=".otel-agent-profiler-spool-", buffering=0)
        except OSError:
            continue
    return None

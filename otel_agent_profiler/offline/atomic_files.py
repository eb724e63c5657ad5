"""Files the offline commands write, written whole or not at all.

A report, an export or a saved store answer is written to a temporary file in the folder of
its path and renamed over the path once complete: a command that fails half-way (a full disk,
an error, Ctrl-C) leaves the path as it was, never a truncated file that looks like a result.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from typing import BinaryIO


@contextlib.contextmanager
def replaced_atomically(path: str, buffering: int = -1) -> Iterator[BinaryIO]:
    """A binary stream whose content becomes the file ``path`` when the ``with`` block ends normally.

    When the block raises, the temporary file is removed and ``path`` is left as it was. Raises
    ``OSError`` as ``open(path, "wb")`` would (a missing folder, a folder in the way, no permission).
    A path that is not a regular file (``/dev/null``, a named pipe) is written directly: it cannot
    be replaced, and has no content to protect.
    """
    target = os.path.realpath(path)  # a symbolic link keeps pointing where it did, at the new content
    try:
        # The path as given, its links followed by the system: /dev/stdout resolves to a name
        # ("pipe:[...]") that realpath cannot follow, though the pipe behind it can be written.
        existing: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        existing = None
    if existing is not None and stat.S_ISDIR(existing.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        with open(path, "wb", buffering=buffering) as direct:
            yield direct
        return
    try:
        temporary = _create_beside(target)
    except PermissionError:
        if existing is None or not os.access(target, os.W_OK):
            raise
        # A writable file in a folder we may not add files to: overwritten in place, as before.
        with open(path, "wb", buffering=buffering) as in_place:
            yield in_place
        return
    try:
        with open(temporary, "wb", buffering=buffering) as stream:
            yield stream
        if existing is not None:
            # open() keeps an existing file's permissions: so does the replacement.
            os.chmod(temporary, stat.S_IMODE(existing.st_mode))
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _create_beside(target: str) -> str:
    """Create an empty, hidden file next to ``target`` (same folder, so a rename replaces it) and return its path.

    Created with mode 0o666 as ``open()`` creates a file, so the umask decides its permissions
    the same way (``tempfile.mkstemp`` would make every report readable by its owner only).
    """
    folder, name = os.path.split(target)
    while True:
        temporary = os.path.join(folder, f".{name}.{secrets.token_hex(4)}.partial")
        try:
            os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue
        return temporary

"""JSON indented a piece at a time, here or by a second process while this one builds the document.

``msgspec`` encodes a piece of the document (a trace) to compact JSON, then indents it: about as
much work again, which holds the interpreter lock, and so does writing the bytes out. With a core
to spare, :func:`indenting_process` has a second process do both: the first one sends each piece's
compact JSON through a pipe (cheaper than indenting it) and goes on with the next. The bytes written
are those ``json_stream.write_document`` writes in one process.

The second process is a new interpreter running :func:`main` (a fork would copy every page of the
profiles the first one then touches). It writes to the output the first one opened, and exits with
``WRITE_ERROR + errno`` when it cannot: the first one raises that error as its own write would have.
"""

from __future__ import annotations

import errno
import os
import signal
import struct
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any, BinaryIO

import msgspec

if TYPE_CHECKING:
    import subprocess

_encode = msgspec.json.Encoder().encode


def nested(value: Any, depth: int) -> Any:
    """``value`` inside ``depth`` lists: formatted so, it comes out indented ``depth`` levels deep."""
    for _ in range(depth):
        value = [value]
    return value


def _framing(depth: int) -> tuple[int, int]:
    """How many bytes the lists of ``nested(value, depth)`` add before and after the value, formatted."""
    before, after = msgspec.json.format(_encode(nested(0, depth)), indent=2).split(b"0")
    return len(before), len(after)


#: By depth: the bytes to cut from the front and the back of a formatted ``nested(value, depth)``.
_FRAMING = {depth: _framing(depth) for depth in range(4)}


def indented(compact: bytes, depth: int) -> bytes:
    """``json_stream.pretty(value, depth)`` from ``compact``, the compact JSON of ``nested(value, depth)``."""
    # Formatted inside ``depth`` lists, the value comes out indented as deep as it will be written:
    # cutting the lists' brackets off is cheaper than indenting every line of it again.
    front, back = _FRAMING.get(depth) or _framing(depth)
    text = msgspec.json.format(compact, indent=2)
    return text[front : len(text) - back]


#: Writes a piece of a document: as it is (depth None), or indented (``indented(piece, depth)``).
PieceWriter = Callable[[bytes, "int | None"], None]

#: Each piece is sent after its depth (``AS_IT_IS``: written as it is) and length.
_HEADER = struct.Struct("<iI")
AS_IT_IS = -1
#: The exit status of the second process that could not write: this plus the error's number.
WRITE_ERROR = 100
#: Bytes buffered before they go through the pipe: tens of pieces of a few hundred bytes at once.
_PIPE_BUFFER = 1 << 16
_PIPE_SIZE = 1 << 20

# The second process's program: this module's ``main``, imported from where the first one imported it.
_PROGRAM = "import sys; sys.path[0] = sys.argv[1]; from otel_agent_profiler.report.json_indenter import main; main()"
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@contextmanager
def indenting_process(out: BinaryIO) -> Iterator[PieceWriter | None]:
    """A ``PieceWriter`` whose pieces a second process indents and writes to ``out``, for as long as
    the block runs; the second process has written all of them when it ends. None when no second
    process can write there (``out`` has no file descriptor, or no process could be started): the
    caller then indents the pieces itself. Raises ``OSError`` when the pieces could not be written."""
    process = _started(out)
    if process is None:
        yield None
        return
    pipe = process.stdin
    assert pipe is not None
    widen_pipe(pipe.fileno())
    header = _HEADER.pack

    def write(piece: bytes, depth: int | None) -> None:
        pipe.write(header(AS_IT_IS if depth is None else depth, len(piece)))
        pipe.write(piece)

    try:
        yield write
        pipe.close()
    except BrokenPipeError:
        # It stopped reading: it could not write, and its error is the one to report.
        with suppress(OSError):
            pipe.close()
        raise _failure(process.wait()) from None
    except BaseException:
        process.kill()
        with suppress(OSError):
            pipe.close()
        process.wait()
        raise
    status = process.wait()
    if status != 0:
        raise _failure(status)


def _started(out: BinaryIO) -> subprocess.Popen[bytes] | None:
    try:
        descriptor = out.fileno()
    except (AttributeError, OSError):
        return None
    if not sys.executable:
        return None
    out.flush()  # what is already buffered comes first
    import subprocess  # here: most runs start no second process, and the module costs every start-up

    try:
        return subprocess.Popen(
            [sys.executable, "-c", _PROGRAM, _PACKAGE_ROOT],
            stdin=subprocess.PIPE,
            stdout=descriptor,
            bufsize=_PIPE_BUFFER,
        )
    except OSError:
        return None  # no process to spare (a limit on processes, memory): indented here


def widen_pipe(pipe: int) -> None:
    """Let the pipe hold more than a piece or two (Linux: 64 KiB by default): the process writing
    to it then waits for the one reading it less often."""
    try:
        import fcntl

        fcntl.fcntl(pipe, fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
    except (ImportError, AttributeError, OSError):
        pass  # not Linux, or a pipe as large is not allowed: it works all the same


def _failure(status: int) -> OSError:
    if status > WRITE_ERROR:
        number = status - WRITE_ERROR
        return OSError(number, os.strerror(number))
    return OSError(errno.EIO, f"the process writing the JSON failed (exit status {status})")


def main() -> None:
    """The second process: read each piece from standard input, write it to standard output."""
    # Ctrl-C reaches the whole process group: the first process handles it, and ends this one.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    source, out = sys.stdin.buffer, sys.stdout.buffer
    size, unpack = _HEADER.size, _HEADER.unpack
    try:
        while len(header := source.read(size)) == size:
            depth, length = unpack(header)
            piece = source.read(length)
            if len(piece) < length:
                break  # the first process stopped half-way
            out.write(piece if depth == AS_IT_IS else indented(piece, depth))
        out.flush()
    except OSError as exc:
        number = exc.errno if exc.errno and WRITE_ERROR + exc.errno < 256 else errno.EIO
        os._exit(WRITE_ERROR + number)
    os._exit(0)

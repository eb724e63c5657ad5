"""What every command shares: exit codes, the error line, argument types and options, writing the output."""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Sequence
from typing import BinaryIO, TypeVar

PROG = "otel-agent-profiler"
EXIT_OK = 0
EXIT_FAILURE = 1
#: Some input could not be read (the rest was still analysed), or the command line was wrong.
EXIT_BAD_INPUT = 2

_Number = TypeVar("_Number", int, float)


def error(message: str) -> None:
    """Print ``otel-agent-profiler: error: MESSAGE`` on standard error, as argparse does."""
    print(f"{PROG}: error: {message}", file=sys.stderr)


# Argument types: each turns the text of an option into its value or raises ArgumentTypeError,
# which argparse prints as "argument --option: MESSAGE" with the usage and exit code 2.


def _number(text: str, convert: Callable[[str], _Number], not_a_number: str) -> _Number:
    try:
        return convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(not_a_number) from None


def port(text: str) -> int:
    """A TCP port, 0 (pick a free one) to 65535."""
    value = _number(text, int, f"{text!r} is not a port number")
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be 0 to 65535, got {value}")
    return value


def positive_int(text: str) -> int:
    """A whole number of at least 1."""
    value = _number(text, int, f"{text!r} is not a whole number")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    """A whole number of at least 0."""
    value = _number(text, int, f"expected a whole number, got {text!r}")
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {value}")
    return value


def non_negative_float(text: str) -> float:
    """A finite number of at least 0."""
    value = _number(text, float, f"{text!r} is not a number")
    if not value >= 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"must be a finite number of at least 0, got {text}")
    return value


# Options several commands have.


def add_files_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="trace file to read; - reads standard input")


def add_progress_option(parser: argparse.ArgumentParser, *, while_: str = "") -> None:
    """``--progress/--no-progress``; ``while_`` says when the bar shows, e.g. ``"while reading"``."""
    when = f" {while_}" if while_ else ""
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=f"show a progress bar on standard error{when} (default: when it is a terminal)",
    )


def single_file_name(paths: Sequence[str]) -> str | None:
    """The file name when one file (not standard input) was read: what outputs are named after."""
    return os.path.basename(paths[0]) if len(paths) == 1 and paths[0] != "-" else None


def no_such_trace(wanted: str, traces_read: int) -> str:
    """The error line for a ``--trace`` that none of the traces read has."""
    return f"no trace {wanted} in the input ({traces_read} trace{'' if traces_read == 1 else 's'} read)"


# Writing the output.


def write_output(path: str | None, content: str | bytes) -> bool:
    """Write ``content`` to ``path``, or to standard output when ``path`` is None.

    A file that cannot be written is reported (``cannot write PATH: reason``) and False returned.
    """
    if path is None:
        if isinstance(content, bytes):
            sys.stdout.buffer.write(content)
        else:
            sys.stdout.write(content)
        sys.stdout.flush()
        return True
    try:
        if isinstance(content, bytes):
            with open(path, "wb") as binary:
                binary.write(content)
        else:
            with open(path, "w", encoding="utf-8") as text:
                text.write(content)
    except OSError as exc:
        error(f"cannot write {path}: {exc.strerror or exc}")
        return False
    return True


def write_streamed(path: str | None, write: Callable[[BinaryIO], None]) -> bool:
    """Like :func:`write_output`, for output that ``write(stream)`` writes a piece at a time.

    The output never has to be held in memory whole. An error writing the file is reported as
    :func:`write_output` reports it, and False returned.
    """
    if path is None:
        sys.stdout.flush()
        write(sys.stdout.buffer)
        sys.stdout.buffer.flush()
        return True
    try:
        with open(path, "wb", buffering=1 << 20) as binary:
            write(binary)
    except OSError as exc:
        error(f"cannot write {path}: {exc.strerror or exc}")
        return False
    return True

"""What every command shares: exit codes, the error line, argument types and options, writing the output."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, BinaryIO, TypeVar

from ..core.price_sources import BUILT_IN_PRICES_AS_OF
from ..core.units import plural
from ..offline.limits import MAX_AUTO_WORKERS, MIN_SPANS_FOR_WORKERS
from ..plugin.environment_variables import OTEL_AGENT_PROFILER_CONTEXT_WINDOWS, OTEL_AGENT_PROFILER_PRICES

if TYPE_CHECKING:
    from ..core.pricing import PriceTable

PROG = "otel-agent-profiler"
EXIT_OK = 0
EXIT_FAILURE = 1
#: Some input could not be read (the rest was still analysed), or the command line was wrong.
EXIT_BAD_INPUT = 2
#: A trace exceeded a ``--budget`` (all input was read and the output written). ``diff`` uses 3 for a regression.
EXIT_BUDGET_EXCEEDED = 4

_Number = TypeVar("_Number", int, float)


def exit_code(written: bool, complete: bool, over_budget: int) -> int:
    """The exit code of a command that reads traces and writes a report (``analyze``, ``report``): the
    report not written, then input not read whole, then budgets exceeded."""
    if not written:
        return EXIT_FAILURE
    if not complete:
        return EXIT_BAD_INPUT
    return EXIT_BUDGET_EXCEEDED if over_budget else EXIT_OK


def error(message: str) -> None:
    """Print ``otel-agent-profiler: error: MESSAGE`` on standard error, as argparse does."""
    print(f"{PROG}: error: {message}", file=sys.stderr)


_T = TypeVar("_T")


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


def positive_float(text: str) -> float:
    """A finite number above 0."""
    value = _number(text, float, f"{text!r} is not a number")
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"must be a finite number above 0, got {text}")
    return value


def metrics_url(text: str) -> str:
    """An inference server's Prometheus endpoint: an http(s) URL with a host."""
    from ..live.backend_poller import check_metrics_url

    try:
        return check_metrics_url(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def argument_type(parse: Callable[[str], _T], name: str) -> Callable[[str], _T]:
    """``parse`` as an argparse type: the ``ValueError`` it raises becomes the option's one-line error
    (``name`` is what argparse calls the value when the message is its own)."""

    def convert(text: str) -> _T:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = name
    return convert


def _parse_prices(text: str) -> PriceTable:
    # Imported when used, as the context windows below: `--help` needs neither table.
    from ..core.pricing import parse_prices

    return parse_prices(text)


#: A price table: JSON text or the path of a JSON file (the format of OTEL_AGENT_PROFILER_PRICES).
prices = argument_type(_parse_prices, "prices")


def _parse_context_windows(text: str) -> dict[str, int]:
    # Imported when used: the module reads the findings' defaults, which `--help` does not need.
    from ..core.context_window import parse_context_windows

    return parse_context_windows(text)


#: Context windows: JSON text or the path of a JSON file (the format of OTEL_AGENT_PROFILER_CONTEXT_WINDOWS).
context_windows = argument_type(_parse_context_windows, "context windows")


# Options several commands have.

#: The suffixes of the files read from a folder given on the command line.
TRACE_SUFFIXES = (".json", ".jsonl", ".ndjson")


def add_files_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "files",
        nargs="*",
        metavar="FILE",
        help=(
            "trace file, or folder of them (*.json, *.jsonl, *.ndjson, read recursively); - reads standard input. "
            "Or read a trace store instead (--jaeger, --tempo, --phoenix)"
        ),
    )


def trace_files(path: str) -> list[str]:
    """The trace files ``path`` names: itself, or the trace files in the folder ``path``, sorted.

    Folders are read recursively, through symbolic links to folders, each real folder once (a
    link back up the tree ends there). A trace file's name that is a broken link is kept, so
    that reading it gives the file its one error line, as any file that cannot be read gets.
    """
    if path == "-" or not os.path.isdir(path):
        return [path]
    from pathlib import Path  # here, as in _walk: `--help` reads no folder

    found: list[str] = []
    _walk(str(Path(path)), set(), found)
    return sorted(found)


def _walk(folder: str, seen: set[tuple[int, int]], found: list[str]) -> None:
    from pathlib import Path

    try:
        status = os.stat(folder)
        entries = list(os.scandir(folder))
    except OSError:
        return  # as before: a folder that cannot be listed adds no files
    if (status.st_dev, status.st_ino) in seen:
        return
    seen.add((status.st_dev, status.st_ino))
    for entry in entries:
        try:
            is_folder = entry.is_dir()  # through a link
            is_file = not is_folder and entry.is_file()
        except OSError:
            is_folder = is_file = False
        if is_folder:
            _walk(entry.path, seen, found)
        elif Path(entry.name).suffix.lower() in TRACE_SUFFIXES and (is_file or entry.is_symlink()):
            found.append(entry.path)


def expand_folders(paths: Sequence[str]) -> tuple[list[str], list[str]]:
    """The trace files of ``paths`` (folders replaced by their trace files) and an error line per empty folder."""
    files: list[str] = []
    problems: list[str] = []
    for path in paths:
        found = trace_files(path)
        if not found:
            problems.append(f"{path}: no trace files (*.json, *.jsonl, *.ndjson) in this folder")
        files.extend(found)
    return files, problems


def add_prices_option(parser: argparse.ArgumentParser) -> None:
    """``--prices FILE|JSON``: model prices for the cost of LLM calls."""
    _add_table_option(
        parser,
        "--prices",
        prices,
        what="prices of models, US dollars per million tokens",
        example='{"gpt-4o": {"input": 2.5, "output": 10, "cached_input": 1.25}}',
        variable=OTEL_AGENT_PROFILER_PRICES,
        built_in=(
            f"list prices of common OpenAI and Anthropic models (as of {BUILT_IN_PRICES_AS_OF}); '{{}}' prices "
            "nothing. A cost an ATIF step recorded is used as is"
        ),
    )


def add_context_windows_option(parser: argparse.ArgumentParser) -> None:
    """``--context-windows FILE|JSON``: models' context windows, for how full each LLM call's window was."""
    _add_table_option(
        parser,
        "--context-windows",
        context_windows,
        what=(
            "context windows of models in tokens, for each LLM call's context_window_use (and the large-prompt "
            "finding of the offline commands)"
        ),
        example='{"my-model": 32000}',
        variable=OTEL_AGENT_PROFILER_CONTEXT_WINDOWS,
        built_in="windows of common OpenAI, Anthropic and Gemini models",
    )


def _add_table_option(
    parser: argparse.ArgumentParser,
    flag: str,
    parse: Callable[[str], object],
    *,
    what: str,
    example: str,
    variable: str,
    built_in: str,
) -> None:
    # Prices and context windows are both tables by model, given the same ways and laid over built-in ones.
    parser.add_argument(
        flag,
        type=parse,
        metavar="FILE|JSON",
        help=(
            f"{what}, as a JSON file or JSON text such as '{example}'. Default: ${variable}; either one is "
            f"added to (and beats) the built-in {built_in}"
        ),
    )


def resolve_context_windows(
    given: Mapping[str, int] | None, environ: Mapping[str, str] | None = None
) -> dict[str, int]:
    """The windows a command uses: ``--context-windows``, else $OTEL_AGENT_PROFILER_CONTEXT_WINDOWS, over
    the built-in ones. Raises ``ValueError`` naming the variable when it is set but unusable."""
    from ..core.context_window import with_built_in_context_windows

    given = given_or_variable(given, OTEL_AGENT_PROFILER_CONTEXT_WINDOWS, _parse_context_windows, environ)
    return with_built_in_context_windows(given)


def context_windows_of(args: argparse.Namespace) -> dict[str, int] | None:
    """:func:`resolve_context_windows` of the command's ``--context-windows``; None, with the error
    line printed, when the variable is unusable."""
    try:
        return resolve_context_windows(args.context_windows)
    except ValueError as exc:
        error(str(exc))
        return None


def given_or_variable(
    given: _T | None, variable: str, parse: Callable[[str], _T], environ: Mapping[str, str] | None
) -> _T | None:
    """The option's value when given, else the environment variable's parsed (None when unset or blank).

    Raises ``ValueError`` naming the variable when it is set but ``parse`` refuses it.
    """
    if given is not None:
        return given
    raw = (os.environ if environ is None else environ).get(variable, "")
    if not raw.strip():
        return None
    try:
        return parse(raw)
    except ValueError as exc:
        raise ValueError(f"{variable}: {exc}") from None


def offline_inputs(args: argparse.Namespace) -> tuple[list[str], PriceTable, list[str]] | None:
    """The files to read (folders expanded), the prices and an error line per empty folder, for
    analyze, report and export; None, with the error line printed, when $OTEL_AGENT_PROFILER_PRICES is unusable."""
    try:
        table = resolve_prices(args.prices)
    except ValueError as exc:
        error(str(exc))
        return None
    files, problems = expand_folders(args.files)
    for line in problems:
        error(line)
    return files, table, problems


def resolve_prices(given: PriceTable | None, environ: Mapping[str, str] | None = None) -> PriceTable:
    """The prices a command uses: ``--prices``, else $OTEL_AGENT_PROFILER_PRICES, over the built-in ones.

    Raises ``ValueError`` naming the variable when the variable is set but unusable.
    """
    from ..core.pricing import with_built_in_prices

    return with_built_in_prices(given_or_variable(given, OTEL_AGENT_PROFILER_PRICES, _parse_prices, environ))


def share(text: str) -> float:
    """A share of a whole: ``"1%"`` or ``"0.01"``, from 0 to 1."""
    percent = text.strip().endswith("%")
    value = _number(text.strip().rstrip("%"), float, f"{text!r} is not a share such as 1% or 0.01")
    value = value / 100 if percent else value
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be from 0% to 100%, got {text}")
    return value


def add_min_saving_option(parser: argparse.ArgumentParser) -> None:
    """``--min-saving SHARE``: the findings' noise floor (``FindingOptions.min_saving``)."""
    parser.add_argument(
        "--min-saving",
        type=share,
        default=0.01,
        metavar="SHARE",
        help=(
            "leave out findings that save less than this share of their trace's duration, such as 1%% or 0.01 "
            "(default: 1%%; 0 lists every one)"
        ),
    )


def add_workers_option(parser: argparse.ArgumentParser) -> None:
    """``--workers N``: processes for the per-trace work (``workers.workers_for``)."""
    parser.add_argument(
        "--workers",
        type=positive_int,
        default=None,
        metavar="N",
        help=(
            f"processes that make the findings of the traces in parallel; with 2 or more, analyze's JSON "
            f"output without findings has a helper process read and profile half the traces, and a second process "
            f"indents and writes it (default: one per core for inputs of "
            f"{MIN_SPANS_FOR_WORKERS:,} spans or more, at most {MAX_AUTO_WORKERS}; 1 for smaller ones). "
            "Results do not depend on it"
        ),
    )


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


def trace_id(text: str) -> str:
    """A trace id as the readers store it: 32 lowercase hex digits (a 64-bit Jaeger id padded with zeros)."""
    trace_id = text.strip().lower()
    if not re.fullmatch(r"[0-9a-f]{1,32}", trace_id):
        raise argparse.ArgumentTypeError(f"{text!r} is not a hex trace id")
    return trace_id.rjust(32, "0")


def no_such_trace(wanted: str, traces_read: int) -> str:
    """The error line for a ``--trace`` that none of the traces read has."""
    return f"no trace {wanted} in the input ({plural(traces_read, 'trace')} read)"


# Writing the output.


def write_output(path: str | None, content: str | bytes) -> bool:
    """Write ``content`` to ``path``, or to standard output when ``path`` is None.

    A file is written whole or not at all (``offline.atomic_files``). One that cannot be written
    is reported (``cannot write PATH: reason``) and False returned; so is standard output that
    cannot take it (see :func:`_standard_output_failed`).
    """
    if path is None and isinstance(content, str):
        # Through the text layer: it knows the terminal's encoding, which the report was drawn for.
        return write_streamed(None, lambda _: _write_text(content))
    data = content.encode("utf-8") if isinstance(content, str) else content
    return write_streamed(path, lambda out: _write_bytes(out, data))


def _write_text(content: str) -> None:
    sys.stdout.write(content)
    sys.stdout.flush()


def _write_bytes(out: BinaryIO, data: bytes) -> None:
    out.write(data)


def write_streamed(path: str | None, write: Callable[[BinaryIO], None]) -> bool:
    """Like :func:`write_output`, for output that ``write(stream)`` writes a piece at a time.

    The output never has to be held in memory whole. An error writing the file is reported as
    :func:`write_output` reports it, and False returned.
    """
    if path is None:
        try:
            sys.stdout.flush()
            write(sys.stdout.buffer)
            sys.stdout.buffer.flush()
        except OSError as exc:
            _standard_output_failed(exc)
            return False
        return True
    from ..offline.atomic_files import replaced_atomically

    try:
        with replaced_atomically(path, buffering=1 << 20) as binary:
            write(binary)
    except OSError as exc:
        error(f"cannot write {path}: {exc.strerror or exc}")
        return False
    return True


def _standard_output_failed(exc: OSError) -> None:
    """Report that standard output took no more (a full disk, ``> /dev/full``), and silence it.

    A reader that went away (``| head -1``) is not reported: it stopped reading on purpose, and
    Python's own convention for that (the ``signal`` module's note on SIGPIPE) is a quiet exit
    with code 1. Standard output then points at the null device, so that flushing what is still
    buffered, at exit, fails no second time with a traceback.
    """
    if not isinstance(exc, BrokenPipeError):
        error(f"cannot write to standard output: {exc.strerror or exc}")
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)

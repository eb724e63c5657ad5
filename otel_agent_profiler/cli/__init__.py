"""The ``otel-agent-profiler`` command line: the top-level parser and ``main``; each command is a module here.

Internal: the command line is used through the ``otel-agent-profiler`` command, not imported.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
from collections.abc import Sequence
from typing import NoReturn, Protocol

from .._version import __version__
from . import analyze, diff, export, report, serve
from .arguments import EXIT_BAD_INPUT, EXIT_BUDGET_EXCEEDED, EXIT_FAILURE, EXIT_OK, PROG
from .serve import TOKEN_ENV

__all__ = ["EXIT_BAD_INPUT", "EXIT_BUDGET_EXCEEDED", "EXIT_FAILURE", "EXIT_OK", "PROG", "TOKEN_ENV", "main"]


class _Command(Protocol):
    """What each command module has."""

    HELP: str
    DESCRIPTION: str

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


# In the order `--help` lists them.
_COMMANDS: dict[str, _Command] = {"analyze": analyze, "export": export, "diff": diff, "report": report, "serve": serve}


class _OneLineErrors(argparse.ArgumentParser):
    """Usage errors as one line on standard error (exit 2), not argparse's usage block first."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def _build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of the command line; given the arguments it will parse, only the command they name
    gets its options (the others' are never read, and building all of them cost every start-up)."""
    # No abbreviated options: `analyze --trace ID` was taken for `--trace-id` (a trace store's), and an
    # abbreviation that works today would mean another option once a longer one is added.
    parser = _OneLineErrors(
        prog=PROG,
        allow_abbrev=False,
        description=(
            "Self time, critical path and category breakdowns of LLM agent traces. Reads OpenTelemetry "
            "traces exported as OTLP JSON (one document or JSON Lines), Jaeger JSON or ATIF trajectories, or "
            "from Jaeger, Tempo or Phoenix, and "
            "reports on them (analyze), compares two sets of runs (diff), converts them for flame-graph "
            "viewers (export) or writes an HTML report (report); or receives them over OTLP and forwards them "
            "enriched (serve)."
        ),
        epilog=f"Run '{PROG} COMMAND --help' for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    named = None if argv is None else _command_named(argv)
    for name, command in _COMMANDS.items():
        subparser = commands.add_parser(name, help=command.HELP, description=command.DESCRIPTION, allow_abbrev=False)
        if argv is None or name == named:
            command.add_arguments(subparser)
    return parser


def _command_named(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs: its first argument that is not an option (the top level's options,
    --help and --version, take no value); None when there is none."""
    return next((argument for argument in argv if not argument.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command ``argv`` names (default: the process's arguments); its exit code."""
    argv = sys.argv[1:] if argv is None else argv
    return _run(_build_parser(argv).parse_args(argv))


def _run(args: argparse.Namespace) -> int:
    try:
        return _COMMANDS[args.command].run(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): quietly, exit code 1, as `arguments.write_output` does.
        return EXIT_FAILURE


def console_main() -> NoReturn:
    """The ``otel-agent-profiler`` program: ``main``, then the end of the process.

    An offline command ends holding every profile it made, hundreds of megabytes of small
    objects for a large input. Freeing them one by one, and the cyclic collector's pass over them
    once it is back on, took over a second of a 200,000-span run, for a process about to end:
    so the collector stays off and the process ends without freeing them (as mypy's command line
    does), its output flushed first. ``serve`` runs long and ends as usual.
    """
    args = _build_parser(sys.argv[1:]).parse_args()
    if args.command not in _ENDS_WHEN_DONE:
        sys.exit(_run(args))
    gc.disable()
    from . import process_end

    process_end.hold_until_exit()
    code = _run(args)
    for stream in (sys.stdout, sys.stderr):
        # A reader gone away, or a stream closed: nothing more can reach it.
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


#: The commands that read, analyse and write once, then end.
_ENDS_WHEN_DONE = frozenset({"analyze", "diff", "export", "report"})


if __name__ == "__main__":
    console_main()

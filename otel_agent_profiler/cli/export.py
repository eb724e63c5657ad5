"""``otel-agent-profiler export FILE... --format speedscope|chrome``: traces for flame-graph viewers."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import TYPE_CHECKING

from . import arguments, process_end, sources
from .arguments import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK, PROG, error, write_output, write_streamed

if TYPE_CHECKING:
    from ..core import TraceProfile
    from ..offline.inputs import OfflineInputs

HELP = "convert traces to speedscope or Chrome trace-event JSON, for flame-graph viewers"
DESCRIPTION = (
    "Profile the traces in the given files (read as analyze reads them) and write them for "
    "flame-graph viewers: speedscope JSON (https://www.speedscope.app; one profile per lane of "
    "parallel spans and one of the critical path per trace) or the Chrome trace-event format "
    "(Perfetto, chrome://tracing; one process per trace, one thread per lane). "
    "Instead of files, the traces can be read from Jaeger, Tempo or Phoenix (--jaeger, --tempo, --phoenix: "
    "see 'reading from a trace store' below). "
    "A file that cannot be "
    f"read is reported on standard error and the others are still exported; the exit code is then "
    f"{EXIT_BAD_INPUT}."
)


def add_arguments(export: argparse.ArgumentParser) -> None:
    arguments.add_files_argument(export)
    export.add_argument(
        "--format", choices=("speedscope", "chrome"), required=True, help="output format: speedscope or chrome"
    )
    export.add_argument(
        "--output", "-o", metavar="PATH", required=True, help="file to write; - writes to standard output"
    )
    export.add_argument(
        "--trace",
        action="append",
        metavar="TRACE_ID",
        help="export only this trace (hex trace id; repeat for several); default: every trace",
    )
    arguments.add_prices_option(export)
    sources.add_store_options(export)


def _selected(profiles: list[TraceProfile], wanted_ids: list[str]) -> list[TraceProfile] | None:
    """The profiles named by ``--trace``, in the order asked for; None (reported) if one is missing."""
    by_id = {profile.trace_id: profile for profile in profiles}
    selected: list[TraceProfile] = []
    for wanted in wanted_ids:
        trace_id = wanted.strip().lower()
        if len(trace_id) == 16:  # a 64-bit (Jaeger) id, as the readers store it
            trace_id = trace_id.rjust(32, "0")
        if trace_id not in by_id:
            error(arguments.no_such_trace(wanted, len(profiles)))
            return None
        if by_id[trace_id] not in selected:
            selected.append(by_id[trace_id])
    return selected


def run(args: argparse.Namespace) -> int:
    inputs = sources.offline_inputs(args)
    if inputs is None:
        return EXIT_BAD_INPUT
    # Imported here and in _run, not at the top: `--help` and every other command need none of it.
    from ..offline import cyclic_gc_paused

    # The profiles live to the end: the cyclic collector would only traverse them again and again.
    with cyclic_gc_paused():
        return _run(args, inputs)


def _run(args: argparse.Namespace, inputs: OfflineInputs) -> int:
    import msgspec

    from ..errors import CannotAnalyse
    from ..offline.store_loading import load_inputs
    from ..report.chrome_trace import to_chrome_trace
    from ..report.json_stream import write_compact_document
    from ..report.speedscope import speedscope_document

    try:
        loaded = load_inputs(inputs, on_error_line=error, on_note=sources.print_note)
        process_end.keep(loaded)
    except CannotAnalyse as exc:
        error(str(exc))
        return EXIT_BAD_INPUT
    profiles: list[TraceProfile] | None = loaded.profiles
    if args.trace:
        profiles = _selected(loaded.profiles, args.trace)
        if profiles is None:
            return EXIT_BAD_INPUT
    if not profiles:
        error("no traces to export")
        return EXIT_BAD_INPUT

    output = None if args.output == "-" else args.output
    if args.format == "speedscope":
        # Written a trace at a time, each profile freed once written: the document of 200,000
        # spans, its text and every profile at once took more memory than json.load of the input.
        document = speedscope_document(_one_at_a_time(profiles), name=arguments.single_file_name(inputs.files) or PROG)
        written = write_streamed(output, lambda out: write_compact_document(out, document, "profiles"))
    else:
        # msgspec writes the compact JSON json.dumps(separators=(",", ":")) writes, several times faster
        # (only a few floats are spelled differently, 0.00001 for 1e-05; and non-ASCII stays UTF-8).
        written = write_output(output, msgspec.json.encode(to_chrome_trace(profiles)) + b"\n")
    if not written:
        return EXIT_FAILURE
    return EXIT_OK if loaded.complete and not inputs.folder_problems else EXIT_BAD_INPUT


def _one_at_a_time(profiles: list[TraceProfile]) -> Iterator[TraceProfile]:
    """The profiles in order, each taken out of ``profiles`` and unlinked once the next is asked for."""
    profiles.reverse()
    while profiles:
        profile = profiles.pop()
        yield profile
        profile.release()

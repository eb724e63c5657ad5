"""The ``otel-agent-profiler`` command line."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from .._version import __version__
from ..adapters import read_trace_file
from ..core import TraceProfile, profile_records, profiles_to_dict
from ..core.findings import find_all
from ..core.records import SpanRecord
from ..offline import cyclic_gc_paused
from ..report import render_traces
from ..report.progress import Progress, progress_enabled
from ..report.text import can_draw
from .diff import add_diff_parser, run_diff
from .report import add_report_parser, run_report

PROG = "otel-agent-profiler"
EXIT_OK = 0
EXIT_FAILURE = 1
#: Some input could not be read (the rest was still analysed), or the command line was wrong.
EXIT_BAD_INPUT = 2


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=(
            "Self time, critical path and category breakdowns of LLM agent traces. Reads OpenTelemetry "
            "traces exported as OTLP JSON (one document or JSON Lines), Jaeger JSON or ATIF trajectories and "
            "reports on them (analyze), compares two sets of runs (diff), converts them for flame-graph "
            "viewers (export) or writes an HTML report (report); or receives them over OTLP and forwards them "
            "enriched (serve)."
        ),
        epilog=f"Run '{PROG} COMMAND --help' for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    analyze = commands.add_parser(
        "analyze",
        help="profile the traces in exported trace files",
        description=(
            "Profile every trace in the given files: self time, critical path and time per category "
            "and operation. Reads OTLP JSON (one document, or JSON Lines as the Collector's file "
            "exporter writes them), Jaeger JSON exports and ATIF trajectories; the format is detected. A file that "
            "cannot be read is reported on standard error and the others are still analysed; the "
            f"exit code is then {EXIT_BAD_INPUT}."
        ),
    )
    analyze.add_argument("files", nargs="+", metavar="FILE", help="trace file to read; - reads standard input")
    analyze.add_argument(
        "--format", choices=("text", "json"), default="text", help="report format (default: %(default)s)"
    )
    analyze.add_argument("--output", "-o", metavar="PATH", help="write the report to PATH instead of standard output")
    analyze.add_argument(
        "--max-spans",
        type=_positive_int,
        default=60,
        metavar="N",
        help="text format: spans shown per trace in the span tree (default: %(default)s)",
    )
    analyze.add_argument("--ascii", action="store_true", help="text format: draw with ASCII characters only")
    analyze.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show a progress bar on standard error (default: when it is a terminal)",
    )
    analyze.add_argument(
        "--prefix-cache",
        action="store_true",
        help=(
            "also list prompt prefixes that several LLM calls of one model share (caching candidates); "
            "reads the prompt content the instrumentation captured, so it is off unless asked for"
        ),
    )
    analyze.add_argument(
        "--findings",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=(
            "list findings (bottlenecks, parallelization opportunities, ...) with their estimated savings; "
            "on by default for text, off for json, where they cost a projection per trace"
        ),
    )
    _add_export_parser(commands)
    add_diff_parser(commands, EXIT_BAD_INPUT)
    add_report_parser(commands, EXIT_BAD_INPUT)
    _add_serve_parser(commands)
    return parser


def _add_export_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    export = commands.add_parser(
        "export",
        help="convert traces to speedscope or Chrome trace-event JSON, for flame-graph viewers",
        description=(
            "Profile the traces in the given files (read as analyze reads them) and write them for "
            "flame-graph viewers: speedscope JSON (https://www.speedscope.app; one profile per lane of "
            "parallel spans and one of the critical path per trace) or the Chrome trace-event format "
            "(Perfetto, chrome://tracing; one process per trace, one thread per lane). A file that cannot be "
            f"read is reported on standard error and the others are still exported; the exit code is then "
            f"{EXIT_BAD_INPUT}."
        ),
    )
    export.add_argument("files", nargs="+", metavar="FILE", help="trace file to read; - reads standard input")
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


#: Where ``serve`` takes its bearer token from when --bearer-token-file is not given.
TOKEN_ENV = "OTEL_AGENT_PROFILER_SERVE_TOKEN"


def _add_serve_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = commands.add_parser(
        "serve",
        help="receive OTLP traces, profile them and forward them enriched",
        description=(
            "Receive OTLP traces over gRPC and HTTP (protobuf or JSON on /v1/traces) from any number of "
            "services, group the spans by trace, profile each trace once no new span arrived for the quiet "
            "period, and forward the spans with the agent_profiler.* attributes, and the profile metrics, to "
            "the upstream OTLP endpoint. Spans over a cap or arriving after their trace was profiled are "
            "forwarded unprofiled. Also serves GET /health, /profiles and /profiles/TRACE_ID on the HTTP port. "
            "Stops on Ctrl-C or SIGTERM after profiling and forwarding what it holds. TLS and a bearer token are "
            "optional and off by default."
        ),
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    serve.add_argument(
        "--http-port",
        type=_port,
        default=4318,
        metavar="N",
        help="OTLP/HTTP and status port; 0 picks a free one (default: %(default)s)",
    )
    serve.add_argument(
        "--grpc-port",
        type=_port,
        default=4317,
        metavar="N",
        help="OTLP/gRPC port; 0 picks a free one (default: %(default)s)",
    )
    serve.add_argument(
        "--upstream",
        metavar="URL",
        default=os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or None,
        help=(
            "OTLP endpoint to forward spans and metrics to, e.g. http://collector:4317 (gRPC) or "
            "http://collector:4318 (HTTP; /v1/traces is appended). Default: $OTEL_EXPORTER_OTLP_ENDPOINT; "
            "without either, traces are only profiled"
        ),
    )
    serve.add_argument(
        "--upstream-protocol",
        choices=("grpc", "http"),
        default=_default_protocol(),
        help="protocol of the upstream: grpc or http (HTTP/protobuf). Default: grpc, or http/protobuf when "
        "$OTEL_EXPORTER_OTLP_PROTOCOL says so",
    )
    serve.add_argument(
        "--quiet-period",
        type=_non_negative_float,
        default=5.0,
        metavar="S",
        help="seconds without a new span after which a trace is profiled (default: %(default)s)",
    )
    serve.add_argument(
        "--max-traces", type=_positive_int, default=1000, metavar="N", help="traces held at once (default: %(default)s)"
    )
    serve.add_argument(
        "--max-spans-per-trace",
        type=_positive_int,
        default=10_000,
        metavar="N",
        help="spans held per trace; more are forwarded unprofiled (default: %(default)s)",
    )
    serve.add_argument(
        "--max-request-bytes",
        type=_positive_int,
        default=4 * 1024 * 1024,
        metavar="N",
        help="largest request accepted (413 / RESOURCE_EXHAUSTED above; default: %(default)s)",
    )
    serve.add_argument(
        "--max-pending-spans",
        type=_positive_int,
        default=100_000,
        metavar="N",
        help="spans held and waiting to be forwarded past which, while the upstream fails, senders are "
        "answered 503 / UNAVAILABLE (default: %(default)s)",
    )
    serve.add_argument(
        "--metrics-interval",
        type=_non_negative_float,
        default=10.0,
        metavar="S",
        help="seconds between exports of the profile metrics (default: %(default)s)",
    )
    serve.add_argument(
        "--tls-cert",
        metavar="PATH",
        help="PEM certificate (chain) to serve both receivers over TLS; needs --tls-key (default: no TLS)",
    )
    serve.add_argument(
        "--tls-key", metavar="PATH", help="PEM private key (unencrypted) of --tls-cert; needs --tls-cert"
    )
    serve.add_argument(
        "--bearer-token-file",
        metavar="PATH",
        help=(
            "file holding a token that every request but GET /health must carry as 'Authorization: Bearer TOKEN' "
            f"(401 / UNAUTHENTICATED otherwise). Default: ${TOKEN_ENV}; without either, no token is required"
        ),
    )


def _default_protocol() -> str:
    protocol = os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "").strip().lower()
    return "http" if protocol.startswith("http") else "grpc"


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be 0 to 65535, got {value}")
    return value


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number of at least 0, got {text}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _error(message: str) -> None:
    print(f"{PROG}: error: {message}", file=sys.stderr)


def _prefix_candidates(profiles: list[TraceProfile]) -> list[Any]:
    # Imported on demand: the analytics package loads pandas, which `analyze` otherwise never needs.
    from ..analytics.prefix_cache import prefix_cache_candidates

    return prefix_cache_candidates(profiles)


def _prefix_cache_text(candidates: list[Any]) -> str:
    lines = ["", "Prompt-prefix caching candidates (shared prompt beginnings per model)"]
    if not candidates:
        lines.append("  none: no model had calls sharing 1,024+ tokens of captured prompt")
    for candidate in candidates[:10]:
        lines.append(
            f"  {candidate.model}: {candidate.calls} calls share {candidate.prefix_tokens:,} tokens; "
            f"{candidate.uncached_repeated_tokens:,} repeated tokens were not cached"
        )
    return "\n".join(lines) + "\n"


def _analyze(args: argparse.Namespace) -> int:
    records: list[SpanRecord] = []
    files = []
    exit_code = EXIT_OK
    progress = Progress(progress_enabled(args.progress))
    with cyclic_gc_paused():
        progress.start("reading", len(args.files))
        for path in args.files:
            trace_file = read_trace_file(path)
            records.extend(trace_file.records)
            files.append(trace_file)
            progress.advance(detail=os.path.basename(path))
            line = trace_file.error_line()
            if line is not None:
                progress.close()
                _error(line)
                exit_code = EXIT_BAD_INPUT
        progress.start("profiling", 1)
        profiles = profile_records(records)
        progress.advance()

        # Findings cost a projection of the trace each; JSON output for many traces skips them
        # unless asked for.
        with_findings = args.findings if args.findings is not None else args.format == "text"
        findings = None
        if with_findings:
            findings = {}
            progress.start("finding", len(profiles))
            for profile in profiles:
                findings[profile.trace_id] = find_all(profile)
                progress.advance()
    progress.close()

    if args.format == "json":
        document = profiles_to_dict(profiles)
        if findings is not None:
            for trace in document["traces"]:
                trace["findings"] = [finding.to_dict() for finding in findings[trace["trace_id"]]]
        document["files"] = [
            {"path": f.path, "format": f.format, "spans": len(f.records), "problems": f.problems} for f in files
        ]
        if args.prefix_cache:
            document["prefix_cache_candidates"] = [c.to_dict() for c in _prefix_candidates(profiles)]
        report = json.dumps(document, indent=2) + "\n"
    else:
        stream = sys.stdout if args.output is None else None
        ascii_only = args.ascii or (stream is not None and not can_draw(stream))
        report = render_traces(profiles, max_spans=args.max_spans, ascii_only=ascii_only, findings=findings)
        if args.prefix_cache:
            report += _prefix_cache_text(_prefix_candidates(profiles))
        if not profiles:
            report = "No traces to report.\n"

    if args.output is None:
        sys.stdout.write(report)
        sys.stdout.flush()
    else:
        try:
            with open(args.output, "w", encoding="utf-8") as out:
                out.write(report)
        except OSError as exc:
            _error(f"cannot write {args.output}: {exc.strerror or exc}")
            return EXIT_FAILURE
    return exit_code


def _export(args: argparse.Namespace) -> int:
    from ..report.chrome_trace import to_chrome_trace
    from ..report.speedscope import to_speedscope

    records: list[SpanRecord] = []
    exit_code = EXIT_OK
    with cyclic_gc_paused():
        for path in args.files:
            trace_file = read_trace_file(path)
            records.extend(trace_file.records)
            line = trace_file.error_line()
            if line is not None:
                _error(line)
                exit_code = EXIT_BAD_INPUT
        profiles = profile_records(records)

    if args.trace:
        by_id = {profile.trace_id: profile for profile in profiles}
        selected = []
        for wanted in args.trace:
            trace_id = wanted.strip().lower()
            if len(trace_id) == 16:  # a 64-bit (Jaeger) id, as the readers store it
                trace_id = trace_id.rjust(32, "0")
            if trace_id not in by_id:
                read = f"{len(profiles)} trace{'' if len(profiles) == 1 else 's'} read"
                _error(f"no trace {wanted} in the input ({read})")
                return EXIT_BAD_INPUT
            if by_id[trace_id] not in selected:
                selected.append(by_id[trace_id])
        profiles = selected
    if not profiles:
        _error("no traces to export")
        return EXIT_BAD_INPUT

    if args.format == "speedscope":
        name = os.path.basename(args.files[0]) if len(args.files) == 1 and args.files[0] != "-" else PROG
        document = to_speedscope(profiles, name=name)
    else:
        document = to_chrome_trace(profiles)
    text = json.dumps(document, separators=(",", ":")) + "\n"
    if args.output == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return exit_code
    try:
        with open(args.output, "w", encoding="utf-8") as out:
            out.write(text)
    except OSError as exc:
        _error(f"cannot write {args.output}: {exc.strerror or exc}")
        return EXIT_FAILURE
    return exit_code


def _serve_token(args: argparse.Namespace) -> str | None:
    """The bearer token from --bearer-token-file, else $OTEL_AGENT_PROFILER_SERVE_TOKEN, else None."""
    if args.bearer_token_file is None:
        token = os.environ.get(TOKEN_ENV, "").strip()
        return token or None
    try:
        with open(args.bearer_token_file, encoding="utf-8") as file:
            token = file.read().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read --bearer-token-file {args.bearer_token_file}: {exc}") from None
    if not token:
        raise ValueError(f"--bearer-token-file {args.bearer_token_file} is empty")
    return token


def _serve(args: argparse.Namespace) -> int:
    from ..service.app import ServeConfig, run
    from ..service.pipeline import PipelineConfig

    if (args.tls_cert is None) != (args.tls_key is None):
        _error("--tls-cert and --tls-key go together: give both or neither")
        return EXIT_BAD_INPUT
    try:
        token = _serve_token(args)
    except ValueError as exc:
        _error(f"cannot serve: {exc}")
        return EXIT_FAILURE
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = ServeConfig(
        host=args.host,
        http_port=args.http_port,
        grpc_port=args.grpc_port,
        upstream=args.upstream,
        upstream_protocol=args.upstream_protocol,
        max_request_bytes=args.max_request_bytes,
        metrics_interval_s=args.metrics_interval,
        pipeline=PipelineConfig(
            quiet_period_s=args.quiet_period,
            max_traces=args.max_traces,
            max_spans_per_trace=args.max_spans_per_trace,
            max_pending_spans=args.max_pending_spans,
        ),
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        bearer_token=token,
    )
    try:
        return run(config)
    except (OSError, ValueError) as exc:
        _error(f"cannot serve: {exc}")
        return EXIT_FAILURE


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "analyze":
            return _analyze(args)
        if args.command == "export":
            return _export(args)
        if args.command == "diff":
            return run_diff(args, _error, EXIT_BAD_INPUT)
        if args.command == "report":
            return run_report(args, _error, EXIT_BAD_INPUT)
        if args.command == "serve":
            return _serve(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `| head`); nothing useful is left to do.
        return EXIT_OK
    parser.error(f"unknown command {args.command!r}")
    return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())

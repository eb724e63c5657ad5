"""``otel-agent-profiler serve``: receive OTLP traces, profile them and forward them enriched (and metrics
and logs unchanged)."""

from __future__ import annotations

import argparse
import errno
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..core.price_sources import BUILT_IN_PRICES_AS_OF
from ..plugin.environment_variables import (
    OTEL_AGENT_PROFILER_CATEGORY_OVERRIDES,
    OTEL_AGENT_PROFILER_CONTEXT_WINDOWS,
    OTEL_AGENT_PROFILER_PRICES,
)
from .arguments import (
    EXIT_BAD_INPUT,
    add_context_windows_option,
    argument_type,
    error,
    given_or_variable,
    metrics_url,
    non_negative_float,
    port,
    positive_float,
    positive_int,
    prices,
)

if TYPE_CHECKING:
    from ..live.profile_options import CategoryOverrides, ProfileOptions

#: --max-upstream-request-bytes by default: the forwarder's own default (``service.forwarder``, not imported
#: here so that the other commands do not load gRPC; a test keeps the two equal).
DEFAULT_MAX_UPSTREAM_REQUEST_BYTES = 3 * 1024 * 1024 + 512 * 1024

#: The upstream connection's variables and compressions, as ``service.upstream_connection`` names them:
#: copied, not imported, so that `serve --help` does not load that module (a test keeps them equal).
OTEL_EXPORTER_OTLP_HEADERS = "OTEL_EXPORTER_OTLP_HEADERS"
OTEL_EXPORTER_OTLP_COMPRESSION = "OTEL_EXPORTER_OTLP_COMPRESSION"
OTEL_EXPORTER_OTLP_CERTIFICATE = "OTEL_EXPORTER_OTLP_CERTIFICATE"
OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE = "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE"
OTEL_EXPORTER_OTLP_CLIENT_KEY = "OTEL_EXPORTER_OTLP_CLIENT_KEY"
COMPRESSIONS = ("gzip", "none")

#: Where ``serve`` takes its bearer token from when --bearer-token-file is not given.
TOKEN_ENV = "OTEL_AGENT_PROFILER_SERVE_TOKEN"


HELP = "receive OTLP traces, profile them and forward them enriched"
DESCRIPTION = (
    "Receive OTLP traces over gRPC and HTTP (protobuf or JSON on /v1/traces) from any number of "
    "services, group the spans by trace, profile each trace once no new span arrived for the quiet "
    "period (or at its maximum age, see below), and forward the spans with the agent_profiler.* "
    "attributes, and the profile metrics, to "
    "the upstream OTLP endpoint. Spans over a cap or arriving after their trace was profiled are "
    "forwarded unprofiled. Metrics (/v1/metrics) and logs (/v1/logs) are forwarded to the upstream "
    "unchanged, under the same limits; without an upstream they are accepted and counted. Also serves "
    "GET /health, /health/live, /health/ready (503 while senders would be pushed back), /profiles, "
    "/profiles/TRACE_ID and /programs (the profiles averaged per agent program) on the HTTP port. "
    "A 200 / OK means the spans are held until delivered: while the upstream fails they are retried with "
    "backoff, and at --max-pending-spans or --max-memory-mib senders get 503 with Retry-After / UNAVAILABLE. "
    "HTTP connections: at most 100 open at once, closed after 10 s without data. "
    "Requests sent upstream are bounded in bytes (split to fit); spans an upstream rejects in a "
    "partial-success answer are counted as rejected. "
    "Stops on Ctrl-C, SIGTERM or SIGHUP after profiling and forwarding what it holds, for up to --shutdown-grace "
    "seconds; exits 1 if spans it accepted could not be delivered or were rejected by the upstream (logged with "
    "their count), 2 if it cannot start (a port in use, unreadable TLS or token files, a bad upstream, an "
    "upstream header, certificate or variable that cannot be used). TLS and a bearer token are optional and off "
    "by default; the upstream's credentials (headers, CA, client certificate) too, each from its option or else "
    "from the OTEL_EXPORTER_OTLP_* variable the OpenTelemetry SDK reads."
)


def add_arguments(serve: argparse.ArgumentParser) -> None:
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    serve.add_argument(
        "--http-port",
        type=port,
        default=4318,
        metavar="N",
        help="OTLP/HTTP and status port; 0 picks a free one (default: %(default)s)",
    )
    serve.add_argument(
        "--grpc-port",
        type=port,
        default=4317,
        metavar="N",
        help="OTLP/gRPC port; 0 picks a free one (default: %(default)s)",
    )
    serve.add_argument(
        "--upstream",
        metavar="URL",
        default=os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or None,
        help=(
            "OTLP endpoint to forward spans, metrics and logs to, e.g. http://collector:4317 (gRPC) or "
            "http://collector:4318 (HTTP; /v1/traces, /v1/metrics, /v1/logs are appended). Default: "
            "$OTEL_EXPORTER_OTLP_ENDPOINT; without either, traces are only profiled, metrics and logs only counted"
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
        "--upstream-header",
        action="append",
        type=upstream_header,
        metavar="KEY=VALUE",
        help=(
            "a header sent with every request to the upstream (gRPC metadata or an HTTP header), taken as "
            "written, e.g. 'Authorization=Bearer TOKEN' or 'X-Scope-OrgID=tenant-1'; repeat for several. Given, "
            "they replace the variables. Default: $OTEL_EXPORTER_OTLP_<SIGNAL>_HEADERS (TRACES, METRICS, LOGS), "
            f"else ${OTEL_EXPORTER_OTLP_HEADERS}: key=value pairs separated by commas, "
            "percent-decoded. Values are never logged"
        ),
    )
    serve.add_argument(
        "--upstream-compression",
        choices=COMPRESSIONS,
        help=(
            "compression of the requests to the upstream. Default: $OTEL_EXPORTER_OTLP_<SIGNAL>_COMPRESSION, "
            f"else ${OTEL_EXPORTER_OTLP_COMPRESSION}, else none"
        ),
    )
    serve.add_argument(
        "--upstream-ca",
        metavar="PATH",
        help="PEM CA certificate(s) to verify an https:// upstream with, instead of the public CAs. Default: "
        f"$OTEL_EXPORTER_OTLP_<SIGNAL>_CERTIFICATE, else ${OTEL_EXPORTER_OTLP_CERTIFICATE} (read for an https:// "
        "upstream only), else the public CAs (the system's for HTTP, gRPC's own for gRPC)",
    )
    serve.add_argument(
        "--upstream-client-cert",
        metavar="PATH",
        help="PEM client certificate shown to an https:// upstream that asks for one (mutual TLS); give its key too. "
        f"Default: $OTEL_EXPORTER_OTLP_<SIGNAL>_CLIENT_CERTIFICATE, else ${OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE} "
        "(https:// upstreams only), else none",
    )
    serve.add_argument(
        "--upstream-client-key",
        metavar="PATH",
        help="PEM private key (unencrypted) of the client certificate; give the certificate too. Default: "
        f"$OTEL_EXPORTER_OTLP_<SIGNAL>_CLIENT_KEY, else ${OTEL_EXPORTER_OTLP_CLIENT_KEY} (https:// upstreams only). "
        "Each of these options, given, beats its variables",
    )
    serve.add_argument(
        "--quiet-period",
        type=non_negative_float,
        default=5.0,
        metavar="S",
        help="seconds without a new span after which a trace is profiled (default: %(default)s)",
    )
    serve.add_argument(
        "--max-trace-age",
        type=positive_float,
        default=60.0,
        metavar="S",
        help="seconds after its first span at which a trace still receiving spans is profiled and forwarded "
        "with the spans it has; its later spans are forwarded unprofiled. Bounds how long a span waits to be "
        "profiled, and so what a kill of serve loses (default: %(default)s)",
    )
    serve.add_argument(
        "--max-traces", type=positive_int, default=1000, metavar="N", help="traces held at once (default: %(default)s)"
    )
    serve.add_argument(
        "--max-spans-per-trace",
        type=positive_int,
        default=10_000,
        metavar="N",
        help="spans held per trace; more are forwarded unprofiled (default: %(default)s)",
    )
    serve.add_argument(
        "--max-request-bytes",
        type=positive_int,
        default=4 * 1024 * 1024,
        metavar="N",
        help="largest request accepted (413 / RESOURCE_EXHAUSTED above; default: %(default)s)",
    )
    serve.add_argument(
        "--max-upstream-request-bytes",
        type=positive_int,
        default=DEFAULT_MAX_UPSTREAM_REQUEST_BYTES,
        metavar="N",
        help="largest request sent upstream, the agent_profiler.* attributes included: larger batches and traces "
        "are split across requests, and a request the upstream refuses as too large is split and sent again "
        "(default: %(default)s, under the 4 MiB gRPC limit of collectors)",
    )
    serve.add_argument(
        "--max-pending-spans",
        type=positive_int,
        default=100_000,
        metavar="N",
        help="spans held (assembling, or waiting to be forwarded) past which senders are answered 503 / "
        "UNAVAILABLE until some are delivered; the same bound applies to the metric data points and to the "
        "log records waiting to be forwarded (default: %(default)s)",
    )
    serve.add_argument(
        "--max-memory-mib",
        type=positive_int,
        default=256,
        metavar="N",
        help="MiB of span data held (estimated from the serialized OTLP size of the spans received) past "
        "which senders are answered 503 / UNAVAILABLE (default: %(default)s)",
    )
    serve.add_argument(
        "--shutdown-grace",
        type=non_negative_float,
        default=30.0,
        metavar="S",
        help="seconds Ctrl-C, SIGTERM or SIGHUP keeps forwarding what is held; an export in flight then is waited "
        "for; what is left is counted as not delivered (default: %(default)s)",
    )
    serve.add_argument(
        "--metrics-interval",
        type=non_negative_float,
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
            "file holding a token that every request but the health checks (GET /health, /health/live, "
            "/health/ready) must carry as 'Authorization: Bearer TOKEN' "
            f"(401 / UNAUTHENTICATED otherwise). Default: ${TOKEN_ENV}; without either, no token is required"
        ),
    )
    serve.add_argument(
        "--backend-metrics",
        action="append",
        type=metrics_url,
        default=[],
        metavar="URL",
        help="an inference server's Prometheus endpoint (vLLM or SGLang), e.g. http://vllm:8000/metrics; "
        "polled every second, and each LLM call gets the load the server showed while it ran (requests "
        "running and waiting, KV-cache use, prefix-cache hit rate, preemptions) as agent_profiler.backend.* "
        "attributes and in /profiles. Repeat for several servers (default: none)",
    )
    # The options of the profile itself are the in-process profiler's, with its variables and formats.
    serve.add_argument(
        "--category-overrides",
        type=category_overrides,
        metavar="PATTERN=CATEGORY,...",
        help=(
            "categories by span name, shell-style patterns, first match wins, e.g. 'fetch_*=tool,*memory*=memory'; "
            "they beat the conventions, an agent_profiler.category attribute beats them. Default: "
            f"${OTEL_AGENT_PROFILER_CATEGORY_OVERRIDES}; without either, the conventions alone"
        ),
    )
    serve.add_argument(
        "--prices",
        type=prices,
        metavar="FILE|JSON",
        help=(
            "prices of models for the cost of LLM and embedding calls, US dollars per million tokens, as a JSON "
            'file or JSON text: \'{"gpt-4o": {"input": 2.5, "output": 10, "cached_input": 1.25}}\'. Default: '
            f"${OTEL_AGENT_PROFILER_PRICES}; either one is added to (and beats) the built-in list prices of common "
            f"OpenAI and Anthropic models (as of {BUILT_IN_PRICES_AS_OF}), as in the offline commands and the "
            "in-process profiler; '{}' prices nothing"
        ),
    )
    add_context_windows_option(serve)


def _header_option(text: str) -> tuple[str, str]:
    # Imported when used (see COMPRESSIONS).
    from ..service.upstream_connection import header_option

    return header_option(text)


#: ``KEY=VALUE`` of --upstream-header; the message never repeats the value, which may be a secret.
upstream_header = argument_type(_header_option, "header")


def _parse_category_overrides(text: str) -> CategoryOverrides:
    # Imported when used, as in profile_options: the profile's options load the analysis core.
    from ..live.profile_options import parse_category_overrides

    return parse_category_overrides(text)


#: ``pattern=category,...`` (the format of OTEL_AGENT_PROFILER_CATEGORY_OVERRIDES).
category_overrides = argument_type(_parse_category_overrides, "category overrides")


def profile_options(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> ProfileOptions:
    """The categories, prices and context windows of serve's profiles: each option, else its
    variable, else the conventions alone and the built-in prices and windows (a table given is
    laid over them).

    Raises ``ValueError`` naming the variable when a variable is set but unusable: serve is a
    command, so a bad setting stops it at the start (exit code 2), as the offline commands do.
    """
    from ..core.context_window import parse_context_windows, with_built_in_context_windows
    from ..core.pricing import parse_prices, with_built_in_prices
    from ..live.profile_options import ProfileOptions, make_classifier, parse_category_overrides

    overrides = given_or_variable(
        args.category_overrides, OTEL_AGENT_PROFILER_CATEGORY_OVERRIDES, parse_category_overrides, environ
    )
    table = given_or_variable(args.prices, OTEL_AGENT_PROFILER_PRICES, parse_prices, environ)
    windows = given_or_variable(
        args.context_windows, OTEL_AGENT_PROFILER_CONTEXT_WINDOWS, parse_context_windows, environ
    )
    return ProfileOptions(
        make_classifier(overrides or ()), with_built_in_prices(table), with_built_in_context_windows(windows)
    )


def _default_protocol() -> str:
    protocol = os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "").strip().lower()
    return "http" if protocol.startswith("http") else "grpc"


def _token(args: argparse.Namespace) -> str | None:
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


def run(args: argparse.Namespace) -> int:
    from ..service.app import ServeConfig
    from ..service.app import run as run_service
    from ..service.pipeline import PipelineConfig

    if (args.tls_cert is None) != (args.tls_key is None):
        error("--tls-cert and --tls-key go together: give both or neither")
        return EXIT_BAD_INPUT
    if (args.upstream_client_cert is None) != (args.upstream_client_key is None):
        error("--upstream-client-cert and --upstream-client-key go together: give both or neither")
        return EXIT_BAD_INPUT
    upstream_options = [
        option
        for option, value in (
            ("--upstream-header", args.upstream_header),
            ("--upstream-compression", args.upstream_compression),
            ("--upstream-ca", args.upstream_ca),
            ("--upstream-client-cert", args.upstream_client_cert),
        )
        if value is not None
    ]
    if upstream_options and not args.upstream:
        error(f"{upstream_options[0]} needs an upstream (--upstream or $OTEL_EXPORTER_OTLP_ENDPOINT)")
        return EXIT_BAD_INPUT
    try:
        token = _token(args)
        options = profile_options(args)
    except ValueError as exc:
        error(f"cannot serve: {exc}")
        return EXIT_BAD_INPUT
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = ServeConfig(
        host=args.host,
        http_port=args.http_port,
        grpc_port=args.grpc_port,
        upstream=args.upstream,
        upstream_protocol=args.upstream_protocol,
        max_request_bytes=args.max_request_bytes,
        max_upstream_request_bytes=args.max_upstream_request_bytes,
        metrics_interval_s=args.metrics_interval,
        pipeline=PipelineConfig(
            quiet_period_s=args.quiet_period,
            max_trace_age_s=args.max_trace_age,
            max_traces=args.max_traces,
            max_spans_per_trace=args.max_spans_per_trace,
            max_pending_spans=args.max_pending_spans,
            max_held_bytes=args.max_memory_mib * 1024 * 1024,
            profile_options=options,
        ),
        shutdown_grace_s=args.shutdown_grace,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        bearer_token=token,
        backend_metrics=tuple(args.backend_metrics),
        upstream_headers=tuple(args.upstream_header) if args.upstream_header is not None else None,
        upstream_compression=args.upstream_compression,
        upstream_ca=args.upstream_ca,
        upstream_client_cert=args.upstream_client_cert,
        upstream_client_key=args.upstream_client_key,
    )
    try:
        return run_service(config)
    except (OSError, ValueError) as exc:
        # What stops serve from starting is the command line's or the machine's setup (a port in
        # use, an unreadable certificate, a bad upstream): a user error. Exit code 1 stays what
        # docs/serve.md says: spans accepted but not delivered.
        message = str(exc)
        if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE and exc.strerror:
            message = exc.strerror  # names the port; without "[Errno 98]"
        error(f"cannot serve: {message}")
        return EXIT_BAD_INPUT

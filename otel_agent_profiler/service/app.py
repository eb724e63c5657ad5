"""Starting and stopping the whole service: receivers, pipeline, forwarder and metrics.

``ProfilingService(config).start()`` binds the ports (0 picks free ones; the bound ports are
``http_port``/``grpc_port``); ``stop()`` stops receiving, profiles and forwards what is held
(for up to ``shutdown_grace_s``; what is still undelivered then is counted as failed), flushes the
metrics and closes everything. ``run(config)`` does both around SIGINT/SIGTERM/SIGHUP and exits 1
when spans it accepted were not delivered.

Traces are profiled and forwarded; metrics and logs are forwarded unchanged (``signal_relay``),
each signal by its own forwarder. Without an upstream all three are accepted and counted.

``tls_cert``/``tls_key`` (PEM files, both or neither) put both receivers on TLS; ``bearer_token``
makes every request but the health checks (``GET /health``, ``/health/live``, ``/health/ready``)
need ``Authorization: Bearer <token>``. Both are off by default.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import ssl
import sys
import threading
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import grpc  # type: ignore[import-untyped]
import requests
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExporter, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource

from .._version import __version__
from ..core.units import plural
from ..live.backend_poller import BackendPoller
from ..live.profile_metrics import ProfileMetrics
from .forwarder import (
    DEFAULT_MAX_REQUEST_BYTES as DEFAULT_MAX_UPSTREAM_REQUEST_BYTES,
    Forwarder,
    grpc_target,
    http_signal_url,
    make_exporter,
)
from .http_receiver import HttpEndpoints, HttpReceiver, ServiceLoop
from .pipeline import Pipeline, PipelineConfig
from .receivers import BearerToken, GrpcReceiver, Receive
from .self_metrics import register_service_metrics
from .signal_relay import SignalRelay
from .signals import LOGS, METRICS, TRACES, Signal
from .upstream_connection import (
    UpstreamConnection,
    UpstreamTls,
    resolve_compression,
    resolve_headers,
    resolve_tls,
)

logger = logging.getLogger(__name__)

DEFAULT_HTTP_PORT = 4318
DEFAULT_GRPC_PORT = 4317
DEFAULT_MAX_REQUEST_BYTES = 4 * 1024 * 1024


@dataclass
class ServeConfig:
    host: str = "127.0.0.1"
    http_port: int = DEFAULT_HTTP_PORT
    grpc_port: int = DEFAULT_GRPC_PORT
    upstream: str | None = None
    upstream_protocol: str = "grpc"
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    #: Serialized bytes per request sent upstream at most (profiled spans included): requests are cut to fit.
    max_upstream_request_bytes: int = DEFAULT_MAX_UPSTREAM_REQUEST_BYTES
    metrics_interval_s: float = 10.0
    export_timeout_s: float = 10.0
    #: Backoff between retries of a failed export: doubles from the initial value up to the maximum.
    retry_initial_backoff_s: float = 0.2
    retry_max_backoff_s: float = 5.0
    #: Seconds ``stop()`` (SIGTERM) keeps forwarding what is held; an export in flight then is waited for.
    shutdown_grace_s: float = 30.0
    #: Seconds an HTTP connection may take to send a request line, its headers or the next chunk of its body.
    read_timeout_s: float = 10.0
    #: HTTP connections open at once; more are answered 503 and closed.
    max_connections: int = 100
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    #: PEM certificate chain and private key (unencrypted) for TLS on both receivers; both or neither.
    tls_cert: str | None = None
    tls_key: str | None = None
    #: When set, every request but ``GET /health`` must carry ``Authorization: Bearer <token>``.
    bearer_token: str | None = field(default=None, repr=False)
    #: Inference servers' Prometheus endpoints polled every second; each LLM call gets the load it met.
    backend_metrics: tuple[str, ...] = ()
    #: Headers sent to the upstream with every request (gRPC metadata or HTTP headers), keys in lower
    #: case; None: each signal's from its ``OTEL_EXPORTER_OTLP_<SIGNAL>_HEADERS``, else ``OTEL_EXPORTER_OTLP_HEADERS``.
    upstream_headers: tuple[tuple[str, str], ...] | None = field(default=None, repr=False)
    #: ``gzip`` or ``none``; None: from ``OTEL_EXPORTER_OTLP_<SIGNAL>_COMPRESSION``, else
    #: ``OTEL_EXPORTER_OTLP_COMPRESSION``, else none.
    upstream_compression: str | None = None
    #: PEM CA certificate(s) the upstream's certificate is verified against (default: the public CAs); https only.
    upstream_ca: str | None = None
    #: PEM client certificate and its unencrypted key, shown to an upstream that asks for one; both or neither.
    upstream_client_cert: str | None = None
    upstream_client_key: str | None = None


def _no_password() -> bytes:
    raise ValueError("encrypted private keys are not supported")


def load_tls(cert: str | None, key: str | None) -> tuple[ssl.SSLContext, grpc.ServerCredentials] | None:
    """The HTTP receiver's SSL context and the gRPC receiver's credentials, or None without TLS."""
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        raise ValueError("TLS needs both a certificate and a private key (--tls-cert and --tls-key)")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        # Loading through ssl first checks that the files parse and that the key matches the certificate.
        context.load_cert_chain(cert, key, password=_no_password)
        with open(cert, "rb") as cert_file, open(key, "rb") as key_file:
            chain, private_key = cert_file.read(), key_file.read()
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or getattr(exc, "reason", None) or str(exc)
        raise ValueError(f"cannot load TLS certificate {cert} and key {key}: {reason}") from None
    return context, grpc.ssl_server_credentials([(private_key, chain)])


def upstream_connection(config: ServeConfig, signal: Signal, environ: Mapping[str, str]) -> UpstreamConnection:
    """The headers, compression and TLS files of ``signal``'s requests upstream: the config's, else the
    OpenTelemetry exporter variables' (raises ``ValueError`` naming a variable that cannot be used)."""
    secure = urllib.parse.urlsplit(config.upstream or "").scheme == "https"
    given = UpstreamTls(config.upstream_ca, config.upstream_client_cert, config.upstream_client_key)
    return UpstreamConnection(
        resolve_headers(signal, config.upstream_headers, environ),
        resolve_compression(signal, config.upstream_compression, environ),
        resolve_tls(signal, given, environ, secure),
    )


def _metric_exporter(url: str, protocol: str, timeout_s: float, connection: UpstreamConnection) -> MetricExporter:
    # The profile metrics go to the same upstream as the metrics passed through, with the same credentials.
    tls = connection.tls
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcMetricExporter

        target, secure = grpc_target(url)
        return GrpcMetricExporter(
            endpoint=target,
            insecure=not secure,
            credentials=tls.grpc_credentials() if secure else None,
            headers=connection.headers,
            timeout=timeout_s,
            compression=grpc.Compression.Gzip if connection.compression == "gzip" else grpc.Compression.NoCompression,
        )
    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpMetricExporter

    return HttpMetricExporter(
        endpoint=http_signal_url(url, METRICS),
        certificate_file=tls.ca_file,
        client_key_file=tls.client_key_file,
        client_certificate_file=tls.client_cert_file,
        headers=dict(connection.headers),
        timeout=timeout_s,
        compression=Compression.Gzip if connection.compression == "gzip" else Compression.NoCompression,
        session=_OwnCaSession() if tls.ca_file is not None else None,
    )


class _OwnCaSession(requests.Session):
    """A session whose own CA file is used even when ``$REQUESTS_CA_BUNDLE`` or ``$CURL_CA_BUNDLE`` is set.

    requests lets those variables beat a session's ``verify`` (psf/requests#3829), and the SDK's HTTP
    exporter sets its certificate file on the session: with a private CA given as ``--upstream-ca``,
    the profile metrics then failed verification wherever the system's bundle is in the environment.
    """

    def merge_environment_settings(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        settings: dict[str, Any] = super().merge_environment_settings(*args, **kwargs)
        settings["verify"] = self.verify
        return settings


class ProfilingService:
    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self._tls = load_tls(config.tls_cert, config.tls_key)
        self._bearer = BearerToken(config.bearer_token) if config.bearer_token is not None else None
        self._meter_provider: MeterProvider | None = None
        self._connections = (
            {signal.name: upstream_connection(config, signal, os.environ) for signal in (TRACES, METRICS, LOGS)}
            if config.upstream
            else {}
        )
        forwarder = None
        metrics = None
        if config.upstream:
            forwarder = self._forwarder(TRACES)
            reader = PeriodicExportingMetricReader(
                _metric_exporter(
                    config.upstream,
                    config.upstream_protocol,
                    config.export_timeout_s,
                    self._connections[METRICS.name],
                ),
                export_interval_millis=config.metrics_interval_s * 1000,
            )
            self._meter_provider = MeterProvider(
                [reader],
                resource=Resource.create({"service.name": "otel-agent-profiler", "service.version": __version__}),
            )
            metrics = ProfileMetrics(self._meter_provider)
        self.backend_poller = BackendPoller(config.backend_metrics) if config.backend_metrics else None
        self.pipeline = Pipeline(
            config.pipeline,
            forwarder,
            metrics,
            backend_load=self.backend_poller.history if self.backend_poller is not None else None,
        )
        pipeline = self.pipeline
        self.relays = {
            signal.name: SignalRelay(
                signal,
                self._forwarder(signal) if config.upstream else None,
                max_pending_items=config.pipeline.max_pending_spans,
                max_held_bytes=config.pipeline.max_held_bytes,
                other_held_bytes=lambda: pipeline.held_bytes,
            )
            for signal in (METRICS, LOGS)
        }
        relays = list(self.relays.values())
        pipeline.other_held_bytes = lambda: sum(relay.held_bytes for relay in relays)
        if self._meter_provider is not None:
            meter = self._meter_provider.get_meter("otel_agent_profiler.serve", __version__)
            register_service_metrics(meter, self.health)
        self._loop: ServiceLoop | None = None
        self._http: HttpReceiver | None = None
        self._grpc: GrpcReceiver | None = None
        self.http_port = 0
        self.grpc_port = 0

    def _forwarder(self, signal: Signal) -> Forwarder:
        config = self.config
        assert config.upstream
        return Forwarder(
            make_exporter(
                config.upstream,
                config.upstream_protocol,
                config.export_timeout_s,
                signal,
                self._connections[signal.name],
            ),
            initial_backoff_s=config.retry_initial_backoff_s,
            max_backoff_s=config.retry_max_backoff_s,
            signal=signal,
            max_request_bytes=config.max_upstream_request_bytes,
        )

    def describe_upstream(self) -> str:
        """What the requests upstream carry, for the start-up log: header names (never their values),
        compression and the TLS files."""
        parts = []
        for name, connection in self._connections.items():
            headers = ", ".join(key for key, _ in connection.headers) or "none"
            part = f"{name}: headers {headers} (values not shown), compression {connection.compression}"
            if connection.tls.ca_file is not None:
                part += f", CA {connection.tls.ca_file}"
            if connection.tls.client_cert_file is not None:
                part += f", client certificate {connection.tls.client_cert_file}"
            parts.append(part)
        return "; ".join(parts)

    def _receivers(self) -> dict[str, tuple[Signal, Receive]]:
        """What each OTLP path takes: traces go to the pipeline, metrics and logs pass through."""
        pipeline = self.pipeline

        def traces(request: object, size_bytes: int) -> int:
            return pipeline.receive(request)  # type: ignore[arg-type]

        receivers: dict[str, tuple[Signal, Receive]] = {TRACES.http_path: (TRACES, traces)}
        for relay in self.relays.values():
            receivers[relay.signal.http_path] = (relay.signal, relay.receive)
        return receivers

    def health(self) -> dict[str, Any]:
        """``GET /health``: the pipeline's status and span counts, and the metrics and logs passed through."""
        document = self.pipeline.health()
        document["signals"] = {name: relay.counts() for name, relay in self.relays.items()}
        return document

    def not_ready(self) -> str | None:
        """Why requests would be pushed back now (``GET /health/ready`` answers 503), or None."""
        reason = self.pipeline.not_ready()
        if reason is None:
            for relay in self.relays.values():
                if relay.overloaded():
                    return f"{relay.signal.name} held at a limit"
        return reason

    def start(self) -> ProfilingService:
        config = self.config
        try:
            ssl_context, credentials = self._tls if self._tls is not None else (None, None)
            receivers = self._receivers()
            self._loop = ServiceLoop()
            self._http = HttpReceiver(
                self._loop,
                config.host,
                config.http_port,
                HttpEndpoints(receivers, self.pipeline, self.health, self.not_ready),
                config.max_request_bytes,
                ssl_context,
                self._bearer,
                read_timeout_s=config.read_timeout_s,
                max_connections=config.max_connections,
            ).start()
            self.http_port = self._http.port
            self._grpc = GrpcReceiver(
                config.host,
                config.grpc_port,
                receivers,
                config.max_request_bytes,
                credentials=credentials,
                bearer_token=self._bearer,
            ).start()
            self.grpc_port = self._grpc.port
            if self.backend_poller is not None:
                self.backend_poller.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop receiving; profile and forward what is held, within the shutdown grace; flush and close."""
        deadline = time.monotonic() + self.config.shutdown_grace_s
        if self._grpc is not None:
            self._grpc.stop(min(5.0, self.config.shutdown_grace_s))
            self._grpc = None
        if self._http is not None:
            self._http.stop(min(5.0, self.config.shutdown_grace_s))
            self._http = None
        if self._loop is not None:
            self._loop.close()
            self._loop = None
        for relay in self.relays.values():
            relay.stop_receiving()
        # Polled until the last traces are profiled: their last calls' counters need a sample after them.
        self.pipeline.stop()
        if self.backend_poller is not None:
            self.backend_poller.stop()
        forwarders = [self.pipeline.forwarder] + [p.forwarder for p in self.relays.values()]
        closers = [
            threading.Thread(
                target=forwarder.close,
                args=(max(0.0, deadline - time.monotonic()), self.config.export_timeout_s),
                name=f"agent-profiler-close-{forwarder.signal.name}",
            )
            for forwarder in forwarders
            if forwarder is not None
        ]
        for closer in closers:  # the signals drain side by side, within one grace
            closer.start()
        for closer in closers:
            closer.join()
        if self._meter_provider is not None:
            # The last metrics get what is left of the grace (at least a second), not the exporter's own timeout.
            remaining_s = max(1.0, deadline - time.monotonic())
            self._meter_provider.shutdown(timeout_millis=remaining_s * 1000)
            self._meter_provider = None

    def __enter__(self) -> ProfilingService:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def stop_report(config: ServeConfig, counts: Mapping[str, int]) -> tuple[int, str]:
    """The log level and the sentence saying what a stopped service received, profiled and delivered,
    and what it did not (``counts``: ``Pipeline.health()``'s)."""
    profiled = f"profiled {counts['profiled']:,} of them"
    if counts.get("traces_profiled"):
        profiled += f" in {plural(counts['traces_profiled'], 'trace')}"
    line = f"received {plural(counts['received'], 'span')} and {profiled}"
    unprofiled = [
        f"{counts[key]:,} {words}"
        for key, words in (
            ("late", "arrived after their trace was profiled"),
            ("over_caps", "were past the limits on traces held"),
            ("invalid", "had no usable trace id"),
        )
        if counts.get(key)
    ]
    if unprofiled:
        line += f" ({_listed(unprofiled)}: passed on unprofiled)"
    if counts.get("rejected_requests"):
        line += f"; {plural(counts['rejected_requests'], 'request')} pushed back while full, for the senders to retry"
    if not config.upstream:
        return logging.INFO, line + "; no upstream, so nothing was forwarded."
    failed, rejected = counts["failed"], counts.get("rejected", 0)
    # Always the forwarded and the undelivered, in this order: the line is read by people and by scripts.
    line += f"; forwarded {counts['forwarded']:,}, {failed:,} not delivered"
    if failed:
        line += (
            f" (rejected by the upstream, or still held when the {config.shutdown_grace_s:g} s shutdown grace ended)"
        )
    if rejected:
        line += f", {rejected:,} rejected in the upstream's answers (partial success)"
    if not failed and not rejected:
        return logging.INFO, line + "."
    return logging.WARNING, line + "; exit code 1."


def relay_stop_report(signal: Signal, counts: Mapping[str, int]) -> tuple[int, str]:
    """The log level and the sentence saying what became of a signal ``serve`` passed through."""
    line = (
        f"{signal.name} passed through: received {plural(counts['received'], signal.item)}, "
        f"forwarded {counts['forwarded']:,}"
    )
    trouble = [
        f"{counts[key]:,} {words}"
        for key, words in (("failed", "not delivered"), ("rejected", "rejected in the upstream's answers"))
        if counts.get(key)
    ]
    if counts.get("rejected_requests"):
        trouble.append(f"{plural(counts['rejected_requests'], 'request')} pushed back while full")
    if not trouble:
        return logging.INFO, line + "."
    return logging.WARNING, f"{line}; {_listed(trouble)}."


def _listed(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


#: How long a thread may hold the GIL while another waits for it, in ``serve``'s process (CPython's
#: default is 5 ms). The profiling worker is CPU-bound; the receivers release the GIL at every socket
#: read and wait for it again, up to a whole interval each time, whenever the worker is busy: ingest
#: then fell to a third and swung with how much profiling overlapped each burst.
SWITCH_INTERVAL_S = 0.0005
#: Garbage collection thresholds: 20,000 allocations between young-generation collections (CPython:
#: 700), and each older generation every 20 collections of the one below (CPython: 10). Each request
#: decodes thousands of objects; with the defaults, tens of thousands of held spans meant hundreds of
#: pauses per second of ingest (0.1-0.4 s of each 1-2 s burst), some over 100 ms.
GC_THRESHOLDS = (20_000, 20, 20)


def tune_interpreter() -> None:
    """Settings for a process that runs ``serve`` and nothing else (``run`` calls it; an embedding
    application keeps its own): a short GIL switch interval, so that the receivers are not starved by
    the profiling worker, and fewer garbage collections, with what was loaded at start-up frozen out
    of them."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


#: The signals on which ``run`` stops receiving, drains what it holds and exits.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def run(config: ServeConfig, ready: threading.Event | None = None) -> int:
    """Serve until SIGINT, SIGTERM or SIGHUP, then shut down; returns the exit code.

    The exit code is 0 when every span accepted was delivered (or there is no upstream), 1 when
    some were not: counted as failed (rejected by the upstream, or undelivered at the end of the
    shutdown grace), or as rejected in an upstream's partial-success answer.
    """
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    # SIGHUP (the terminal closed, or a supervisor's "reload") drains like SIGTERM: there is no
    # configuration to reload, and ending without draining would lose what is held.
    previous = {sig: signal.signal(sig, on_signal) for sig in STOP_SIGNALS}
    try:
        service = ProfilingService(config).start()
        tune_interpreter()
        logger.info(
            "otel-agent-profiler serve: OTLP/HTTP on %s:%d, OTLP/gRPC on %s:%d, TLS %s, bearer token %s, "
            "upstream %s (pid %d)",
            config.host,
            service.http_port,
            config.host,
            service.grpc_port,
            "on" if config.tls_cert else "off",
            "required" if config.bearer_token is not None else "off",
            f"{config.upstream} ({config.upstream_protocol})" if config.upstream else "none (profile only)",
            os.getpid(),
        )
        if config.upstream:
            logger.info("upstream requests: %s", service.describe_upstream())
        if ready is not None:
            ready.set()
        try:
            while not stop.wait(0.5):
                pass
        finally:
            service.stop()
            counts = service.pipeline.health()["counts"]
            level, line = stop_report(config, counts)
            logger.log(level, "otel-agent-profiler serve stopped: %s", line)
            for relay in service.relays.values():
                signal_counts = relay.counts()
                if signal_counts["received"]:
                    logger.log(*relay_stop_report(relay.signal, signal_counts))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 1 if counts["failed"] or counts["rejected"] else 0

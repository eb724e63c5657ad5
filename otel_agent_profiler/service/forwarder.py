"""Forwarding batches to an upstream OTLP endpoint (gRPC or HTTP/protobuf), retried until delivered.

One forwarder per signal: spans (profiled and enriched), and the metrics and logs passed through.

Batches wait in a queue served by one thread, in order (those waiting are merged into requests
of up to ``MERGE_UP_TO_SPANS`` spans). A batch whose export fails with a
retryable error (network errors, gRPC UNAVAILABLE, HTTP 429/502/503/504, ...) is retried with
exponential backoff for as long as it takes: what the queue holds is bounded by the pipeline,
which refuses new data at its limits, so retrying never grows memory. A batch the upstream
rejects for good (e.g. HTTP 400) is counted as failed and logged. While the upstream fails,
``failing`` is true.

``close(timeout_s)`` keeps sending and retrying for up to ``timeout_s``; an export in flight then is
waited for (it ends within the export timeout) and counted by its real outcome; batches never
sent are counted as failed. Each batch's outcome is reported to ``on_done(delivered, spans,
size_bytes)``.
"""

from __future__ import annotations

import gzip
import logging
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import grpc  # type: ignore[import-untyped]

from .signals import TRACES, Signal
from .upstream_connection import UpstreamConnection

logger = logging.getLogger(__name__)


class Exporter(Protocol):
    """Sends one request upstream; raises on failure."""

    def export(self, request: Any) -> None: ...

    def close(self) -> None: ...


def grpc_target(url: str) -> tuple[str, bool]:
    """``host:port`` and whether TLS is used, from ``http://host:port``, ``https://...`` or ``host:port``."""
    if "://" not in url:
        return url, False
    parsed = urllib.parse.urlsplit(url)
    if not parsed.hostname or not parsed.port:
        raise ValueError(f"upstream {url!r} needs a host and a port")
    return f"{parsed.hostname}:{parsed.port}", parsed.scheme == "https"


def http_traces_url(url: str) -> str:
    """The traces URL: ``/v1/traces`` appended to a base URL (as ``OTEL_EXPORTER_OTLP_ENDPOINT``)."""
    return http_signal_url(url, TRACES)


def http_signal_url(url: str, signal: Signal) -> str:
    """The URL of ``signal``: its path (``/v1/metrics``, ...) appended to a base URL.

    A URL that already ends with the traces path (``--upstream http://host:4318/v1/traces``) is
    taken as the base URL plus that path.
    """
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(f"upstream {url!r} must be an http:// or https:// URL")
    if parsed.path.endswith(TRACES.http_path):
        url = url[: -len(TRACES.http_path)]
    return url.rstrip("/") + signal.http_path


class GrpcExporter:
    def __init__(
        self, url: str, timeout_s: float = 10.0, signal: Signal = TRACES, connection: UpstreamConnection | None = None
    ) -> None:
        connection = connection or UpstreamConnection()
        target, secure = grpc_target(url)
        _check_tls_scheme(url, secure, connection)
        compression = grpc.Compression.Gzip if connection.compression == "gzip" else grpc.Compression.NoCompression
        self._channel = (
            grpc.secure_channel(target, connection.tls.grpc_credentials(), compression=compression)
            if secure
            else grpc.insecure_channel(target, compression=compression)
        )
        self._export = self._channel.unary_unary(
            f"/{signal.grpc_service}/Export",
            request_serializer=signal.request_class.SerializeToString,
            response_deserializer=signal.response_class.FromString,
        )
        self._timeout = timeout_s
        self._metadata = connection.headers or None

    def export(self, request: Any) -> None:
        self._export(request, timeout=self._timeout, metadata=self._metadata)

    def close(self) -> None:
        self._channel.close()


class HttpExporter:
    def __init__(
        self, url: str, timeout_s: float = 10.0, signal: Signal = TRACES, connection: UpstreamConnection | None = None
    ) -> None:
        connection = connection or UpstreamConnection()
        self.url = http_signal_url(url, signal)
        secure = urllib.parse.urlsplit(self.url).scheme == "https"
        _check_tls_scheme(url, secure, connection)
        self._timeout = timeout_s
        self._gzip = connection.compression == "gzip"
        self._headers = {"Content-Type": "application/x-protobuf", **dict(connection.headers)}
        if self._gzip:
            self._headers["Content-Encoding"] = "gzip"
        self._context = connection.tls.ssl_context() if secure and connection.tls.given else None

    def export(self, request: Any) -> None:
        body = request.SerializeToString()
        http_request = urllib.request.Request(
            self.url,
            data=gzip.compress(body, compresslevel=6) if self._gzip else body,
            headers=self._headers,
            method="POST",
        )
        with urllib.request.urlopen(http_request, timeout=self._timeout, context=self._context) as response:
            response.read()

    def close(self) -> None:
        pass


def _check_tls_scheme(url: str, secure: bool, connection: UpstreamConnection) -> None:
    if connection.tls.given and not secure:
        # Without TLS the CA and the certificate would be ignored, and the headers travel in clear.
        raise ValueError(f"--upstream-ca and --upstream-client-cert need an https:// upstream, not {url!r}")


def make_exporter(
    url: str,
    protocol: str,
    timeout_s: float = 10.0,
    signal: Signal = TRACES,
    connection: UpstreamConnection | None = None,
) -> Exporter:
    if protocol == "grpc":
        return GrpcExporter(url, timeout_s, signal, connection)
    if protocol == "http":
        return HttpExporter(url, timeout_s, signal, connection)
    raise ValueError(f"protocol must be grpc or http, not {protocol!r}")


_RETRYABLE_GRPC = frozenset(
    {"CANCELLED", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED", "ABORTED", "OUT_OF_RANGE", "UNAVAILABLE", "DATA_LOSS"}
)
_RETRYABLE_HTTP = frozenset({429, 502, 503, 504})


def retryable(exc: BaseException) -> bool:
    """Whether OTLP says a failed export may succeed when retried (network errors do)."""
    if isinstance(exc, grpc.RpcError) and hasattr(exc, "code"):
        return getattr(exc.code(), "name", "") in _RETRYABLE_GRPC
    if isinstance(exc, urllib.error.HTTPError):
        return exc.code in _RETRYABLE_HTTP
    return isinstance(exc, OSError)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, grpc.RpcError):
        code = exc.code() if hasattr(exc, "code") else None
        return f"gRPC {getattr(code, 'name', code)}"
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code}"
    return f"{type(exc).__name__}: {exc}"


#: Batches waiting in the queue are sent together, in requests of up to this many items (spans, ...).
MERGE_UP_TO_SPANS = 1000

#: Called with each batch's outcome: (delivered, span count, estimated bytes).
OnDone = Callable[[bool, int, int], None]


@dataclass
class DeliveryCounts:
    """What became of what a signal's senders sent: items received, forwarded upstream, and failed
    (given up on, not delivered)."""

    received: int = 0
    forwarded: int = 0
    failed: int = 0

    def settle(self, delivered: bool, items: int) -> None:
        """Count ``items`` the forwarder is done with: delivered, or given up on."""
        if delivered:
            self.forwarded += items
        else:
            self.failed += items


class Forwarder:
    """A queue of batches and the thread sending them upstream until they are delivered."""

    def __init__(
        self,
        exporter: Exporter,
        *,
        initial_backoff_s: float = 0.2,
        max_backoff_s: float = 5.0,
        on_done: OnDone | None = None,
        signal: Signal = TRACES,
    ) -> None:
        self._exporter = exporter
        self.signal = signal
        self._initial_backoff = initial_backoff_s
        self._max_backoff = max_backoff_s
        self.on_done = on_done
        self._queue: deque[tuple[Any, int, int]] = deque()
        self._cond = threading.Condition()
        self._deadline: float | None = None  # monotonic time past which nothing new is sent
        self._pending = 0
        self._in_flight = False
        self.forwarded = 0
        self.failed = 0
        self.failing = False
        self._thread = threading.Thread(target=self._run, name="agent-profiler-forwarder", daemon=True)
        self._thread.start()

    @property
    def pending_spans(self) -> int:
        return self._pending

    def submit(self, request: Any, size_bytes: int = 0, count: int | None = None) -> None:
        """Queue ``request`` (``count`` items, counted when not given, estimated at ``size_bytes``).

        Empty requests are dropped.
        """
        if count is None:
            count = self.signal.count(request)
        if not count:
            return
        with self._cond:
            if self._deadline is not None and time.monotonic() >= self._deadline:
                self._settle(False, count, size_bytes)
                return
            self._queue.append((request, count, size_bytes))
            self._pending += count
            self._cond.notify_all()

    def _past_deadline(self) -> bool:
        return self._deadline is not None and time.monotonic() >= self._deadline

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and self._deadline is None:
                    self._cond.wait()
                if not self._queue or self._past_deadline():
                    return
                self._merge_head()
                request, count, size = self._queue[0]
                self._in_flight = True
            delivered = self._send(request, count)
            with self._cond:
                if not self._queue or self._queue[0][0] is not request:
                    return  # close() gave up waiting and settled it already
                self._queue.popleft()
                self._pending -= count
                self._in_flight = False
                if delivered is not None:
                    self._settle(delivered, count, size)
                else:  # not sent: the deadline came while waiting to retry
                    self._queue.appendleft((request, count, size))
                    self._pending += count
                self._cond.notify_all()

    def _merge_head(self) -> None:
        """Make the first batch one request of the batches waiting, up to ``MERGE_UP_TO_SPANS`` spans.

        A slow upstream then gets fewer, larger requests instead of a backlog of small ones.
        """
        if len(self._queue) < 2 or self._queue[0][1] + self._queue[1][1] > MERGE_UP_TO_SPANS:
            return
        field = self.signal.resources_field
        merged = self.signal.request_class()
        count = size = 0
        while self._queue and count + self._queue[0][1] <= MERGE_UP_TO_SPANS:
            request, spans, size_bytes = self._queue.popleft()
            getattr(merged, field).extend(getattr(request, field))
            count += spans
            size += size_bytes
        self._queue.appendleft((merged, count, size))

    def _settle(self, delivered: bool, count: int, size: int) -> None:
        if delivered:
            self.forwarded += count
        else:
            self.failed += count
        if self.on_done is not None:
            self.on_done(delivered, count, size)

    def _send(self, request: Any, count: int) -> bool | None:
        """Export until delivered (True), rejected for good (False), or the deadline (None)."""
        backoff = self._initial_backoff
        attempt = 0
        while True:
            attempt += 1
            try:
                self._exporter.export(request)
            except Exception as exc:
                # The upstream's answer, not a bug of ours: network errors and error statuses are
                # retried or counted as failed, as OTLP says (``retryable``).
                if not retryable(exc):
                    self.failing = True
                    logger.warning(
                        "%d %ss not delivered: the upstream rejected them (%s)", count, self.signal.item, _describe(exc)
                    )
                    return False
                if not self.failing:
                    logger.warning("upstream failed (%s); holding %ss and retrying", _describe(exc), self.signal.item)
                self.failing = True
                if self._wait_to_retry(time.monotonic() + backoff):
                    return None
                backoff = min(backoff * 2, self._max_backoff)
            else:
                if self.failing:
                    logger.info("upstream back after %d attempts", attempt)
                self.failing = False
                return True

    def _wait_to_retry(self, retry_at: float) -> bool:
        """Sleep until ``retry_at``; True (do not retry) when the shutdown deadline comes first."""
        with self._cond:
            while True:
                now = time.monotonic()
                if self._deadline is not None and now >= self._deadline:
                    return True
                if now >= retry_at:
                    return False
                until = retry_at if self._deadline is None else min(retry_at, self._deadline)
                self._cond.wait(until - now)

    def close(self, timeout_s: float = 10.0, export_timeout_s: float = 10.0) -> int:
        """Send what is queued for up to ``timeout_s``, then stop; returns the spans not delivered (in all).

        An export still in flight then is waited for, up to ``export_timeout_s`` more, and
        counted by its outcome. What was never sent is counted as failed.
        """
        deadline = time.monotonic() + timeout_s
        with self._cond:
            self._deadline = deadline
            self._cond.notify_all()
        self._thread.join(max(0.0, deadline - time.monotonic()) + export_timeout_s + 1.0)
        with self._cond:
            if self._thread.is_alive() and self._in_flight:
                # An export that outlived its own timeout: its outcome is unknown, it counts as not delivered.
                logger.warning(
                    "an export to the upstream did not return; its %ss count as not delivered", self.signal.item
                )
            for _, count, size in self._queue:
                self._settle(False, count, size)
            self._queue.clear()
            self._pending = 0
        self._exporter.close()
        return self.failed

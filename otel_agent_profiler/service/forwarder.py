"""Forwarding batches to an upstream OTLP endpoint (gRPC or HTTP/protobuf), retried until delivered.

One forwarder per signal: spans (profiled and enriched), and the metrics and logs passed through.

Batches wait in a queue served by one thread, in order. Those waiting are merged into requests of
up to ``MERGE_UP_TO_SPANS`` items and ``max_request_bytes`` serialized bytes, and a batch over the
byte bound is cut into requests under it (``request_split``): an upstream's request limit (4 MiB
for gRPC by default) is never met by a request ``serve`` made. What the upstream answers decides
what happens next:

* delivered: counted as forwarded, less the items an OTLP ``partial_success`` says it rejected,
  which are counted as rejected and logged;
* refused as too large (gRPC OUT_OF_RANGE, RESOURCE_EXHAUSTED naming the message size, HTTP 413):
  cut in two and both halves sent, never the whole again; requests are kept under half that size
  from then on. A single item refused as too large is counted as failed;
* timed out twice in a row: cut in two, and later requests merged up to half as many items, so a
  slow upstream gets requests it can take within the export timeout;
* a retryable error (network errors, gRPC UNAVAILABLE, RESOURCE_EXHAUSTED with a ``RetryInfo``,
  HTTP 429/502/503/504, ...): retried with exponential backoff, or after the upstream's
  ``Retry-After`` (HTTP) or ``RetryInfo`` (gRPC) when it is longer, for as long as it takes: what
  the queue holds is bounded by the pipeline, which refuses new data at its limits, so retrying
  never grows memory;
* rejected for good (e.g. HTTP 400, a redirect, which is not followed, or gRPC RESOURCE_EXHAUSTED
  without a ``RetryInfo``, which OTLP says not to retry): counted as failed and logged.

While the upstream fails, ``failing`` is true.

``close(timeout_s)`` keeps sending and retrying for up to ``timeout_s``; an export in flight then is
waited for (it ends within the export timeout) and counted by its real outcome; batches never
sent are counted as failed. Each batch's outcome is reported to ``on_done(outcome, size_bytes)``.
"""

from __future__ import annotations

import email.utils
import gzip
import logging
import ssl
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

from .request_split import halves, leaf_count
from .signals import TRACES, Signal
from .upstream_connection import UpstreamConnection

logger = logging.getLogger(__name__)


class Exporter(Protocol):
    """Sends one request upstream; returns the upstream's response message (None when it sent no body); raises
    on failure."""

    def export(self, request: Any) -> Any: ...

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

    def export(self, request: Any) -> Any:
        return self._export(request, timeout=self._timeout, metadata=self._metadata)

    def close(self) -> None:
        self._channel.close()


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is answered as the error it is for an export: following it would turn the POST into a
    GET without the data (a sign-in page answering 200 would count as delivered)."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class HttpExporter:
    def __init__(
        self, url: str, timeout_s: float = 10.0, signal: Signal = TRACES, connection: UpstreamConnection | None = None
    ) -> None:
        connection = connection or UpstreamConnection()
        self.url = http_signal_url(url, signal)
        secure = urllib.parse.urlsplit(self.url).scheme == "https"
        _check_tls_scheme(url, secure, connection)
        self._timeout = timeout_s
        self._signal = signal
        self._gzip = connection.compression == "gzip"
        self._headers = {"Content-Type": "application/x-protobuf", **dict(connection.headers)}
        if self._gzip:
            self._headers["Content-Encoding"] = "gzip"
        context = connection.tls.ssl_context() if secure and connection.tls.given else None
        handlers: list[urllib.request.BaseHandler] = [_RefuseRedirects()]
        if context is not None:
            handlers.append(urllib.request.HTTPSHandler(context=context))
        self._opener = urllib.request.build_opener(*handlers)

    def export(self, request: Any) -> Any:
        body = request.SerializeToString()
        http_request = urllib.request.Request(
            self.url,
            data=gzip.compress(body, compresslevel=6) if self._gzip else body,
            headers=self._headers,
            method="POST",
        )
        with self._opener.open(http_request, timeout=self._timeout) as response:
            return response_message(self._signal, response.read(), response.headers.get("Content-Type", ""))

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


def response_message(signal: Signal, body: bytes, content_type: str) -> Any:
    """The OTLP response in an HTTP answer's body (protobuf or JSON), or None when it is empty or unreadable.

    Only its ``partial_success`` matters; an upstream answering 200 with something else delivered the request.
    """
    if not body:
        return None
    try:
        if "json" in content_type.lower():
            return _json_response(signal, body)
        return signal.response_class.FromString(body)
    except Exception:  # an answer we cannot read says nothing of rejected items
        return None


def _json_response(signal: Signal, body: bytes) -> Any:
    from google.protobuf import json_format  # type: ignore[import-untyped]

    message = signal.response_class()
    json_format.Parse(body, message, ignore_unknown_fields=True)
    return message


def rejected_items(response: Any) -> tuple[int, str]:
    """The items an OTLP response's ``partial_success`` says were rejected, and its message."""
    if response is None or not response.HasField("partial_success"):
        return 0, ""
    partial = response.partial_success
    rejected = sum(value for field, value in partial.ListFields() if field.name.startswith("rejected_"))
    return int(rejected), str(partial.error_message)


_RETRYABLE_GRPC = frozenset({"CANCELLED", "DEADLINE_EXCEEDED", "ABORTED", "OUT_OF_RANGE", "UNAVAILABLE", "DATA_LOSS"})
_RETRYABLE_HTTP = frozenset({429, 502, 503, 504})


def retryable(exc: BaseException) -> bool:
    """Whether OTLP says a failed export may succeed when retried (network errors do).

    gRPC RESOURCE_EXHAUSTED is retryable only with a ``RetryInfo`` in its status: OTLP/gRPC says
    that is how a server signals it can recover (throttling); without it the exhaustion is not
    expected to pass (a quota used up, a limit the request breaks), and retrying it forever would
    hold up everything queued behind it. (One that names the message size is cut, see ``too_large``.)
    """
    if isinstance(exc, grpc.RpcError) and hasattr(exc, "code"):
        name = getattr(exc.code(), "name", "")
        if name == "RESOURCE_EXHAUSTED":
            return hasattr(exc, "trailing_metadata") and _grpc_retry_delay(exc) is not None
        return name in _RETRYABLE_GRPC
    if isinstance(exc, urllib.error.HTTPError):
        return exc.code in _RETRYABLE_HTTP
    return isinstance(exc, OSError)


def too_large(exc: BaseException) -> bool:
    """Whether the upstream refused a request for its size: HTTP 413, gRPC OUT_OF_RANGE (rotel), or
    RESOURCE_EXHAUSTED naming the message size (grpc-go: "received message larger than max")."""
    if isinstance(exc, urllib.error.HTTPError):
        return exc.code == 413
    if isinstance(exc, grpc.RpcError) and hasattr(exc, "code"):
        name = getattr(exc.code(), "name", "")
        if name == "OUT_OF_RANGE":
            return True
        details = (exc.details() if hasattr(exc, "details") else "") or ""
        return name == "RESOURCE_EXHAUSTED" and any(
            words in details.lower() for words in ("larger than", "too large", "message length")
        )
    return False


def timed_out(exc: BaseException) -> bool:
    """Whether an export ran out of its timeout (the upstream may have taken the request meanwhile)."""
    if isinstance(exc, grpc.RpcError) and hasattr(exc, "code"):
        return getattr(exc.code(), "name", "") == "DEADLINE_EXCEEDED"
    if isinstance(exc, urllib.error.URLError) and not isinstance(exc, urllib.error.HTTPError):
        return isinstance(exc.reason, TimeoutError)
    return isinstance(exc, TimeoutError)


#: The longest wait a ``Retry-After`` or ``RetryInfo`` is followed for; longer ones are taken as this.
MAX_RETRY_AFTER_S = 300.0


def retry_after_s(exc: BaseException, now: float | None = None) -> float | None:
    """The delay the upstream asked for before a retry: HTTP ``Retry-After`` (seconds or a date), gRPC
    ``RetryInfo``; None when it asked for none."""
    delay: float | None = None
    if isinstance(exc, urllib.error.HTTPError) and exc.headers is not None:
        value = (exc.headers.get("Retry-After") or "").strip()
        if value.isdigit():
            delay = float(value)
        elif value:
            try:
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError):
                when = None
            if when is not None and when.tzinfo is not None:
                delay = when.timestamp() - (time.time() if now is None else now)
    elif isinstance(exc, grpc.RpcError) and hasattr(exc, "trailing_metadata"):
        delay = _grpc_retry_delay(exc)
    return None if delay is None else min(max(delay, 0.0), MAX_RETRY_AFTER_S)


def _grpc_retry_delay(exc: Any) -> float | None:
    try:
        from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-untyped]

        for key, value in exc.trailing_metadata() or ():
            if key != "grpc-status-details-bin":
                continue
            for detail in status_pb2.Status.FromString(value).details:
                if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
                    info = error_details_pb2.RetryInfo()
                    detail.Unpack(info)
                    return float(info.retry_delay.seconds + info.retry_delay.nanos / 1e9)
    except Exception:  # a malformed status detail is no instruction: the usual backoff applies
        return None
    return None


def _describe(exc: BaseException) -> str:
    """One line for a log: what the upstream answered, with its message, and what to check when TLS failed."""
    described = _describe_answer(exc)
    if _tls_failed(exc):
        # gRPC names a refused client certificate "UNAVAILABLE ... Unwrap failed"; say what it means.
        described += (
            "; the TLS connection failed: check the upstream's CA and, if it asks for one, the client certificate"
        )
    return described


def _describe_answer(exc: BaseException) -> str:
    if isinstance(exc, grpc.RpcError):
        code = exc.code() if hasattr(exc, "code") else None
        name = getattr(code, "name", code)
        # The server's message says which check failed (a token, a quota, a connection); capped, on one line.
        details = " ".join(((exc.details() if hasattr(exc, "details") else "") or "").split())[:200]
        if name == "RESOURCE_EXHAUSTED" and not retryable(exc):
            # Which limit it was is only in the message: a quota, a rate, a memory limit.
            return f"gRPC RESOURCE_EXHAUSTED without RetryInfo, not retried: {details or 'no message'}"
        return f"gRPC {name}: {details}" if details else f"gRPC {name}"
    if isinstance(exc, urllib.error.HTTPError):
        if 300 <= exc.code < 400:
            return f"HTTP {exc.code} redirect to {exc.headers.get('Location') if exc.headers else None}, not followed"
        return f"HTTP {exc.code} {exc.reason}" if exc.reason else f"HTTP {exc.code}"
    return f"{type(exc).__name__}: {exc}"


#: What gRPC's messages say when the TLS handshake or the TLS records failed (the TSI_ codes are its own).
_GRPC_TLS_MARKERS = ("TSI_", "SSL", "ssl", "handshake", "certificate")


def _tls_failed(exc: BaseException) -> bool:
    if isinstance(exc, ssl.SSLError):
        return True
    if isinstance(exc, urllib.error.URLError) and not isinstance(exc, urllib.error.HTTPError):
        return isinstance(exc.reason, ssl.SSLError)
    if isinstance(exc, grpc.RpcError) and hasattr(exc, "details"):
        details = exc.details() or ""
        return any(marker in details for marker in _GRPC_TLS_MARKERS)
    return False


#: Batches waiting in the queue are sent together, in requests of up to this many items (spans, ...).
MERGE_UP_TO_SPANS = 1000
#: Requests are kept under this many serialized bytes by default: below the 4 MiB that gRPC servers take by
#: default (rotel, the OpenTelemetry Collector), with room for what a proxy adds.
DEFAULT_MAX_REQUEST_BYTES = 3 * 1024 * 1024 + 512 * 1024
#: Successful requests after which a forwarder that shrank its requests for a slow upstream doubles them again.
GROW_BACK_AFTER = 8


@dataclass(frozen=True)
class Outcome:
    """What became of a batch's items: delivered, given up on, or rejected by the upstream (OTLP
    ``partial_success``: it took the request and refused those items)."""

    forwarded: int = 0
    failed: int = 0
    rejected: int = 0


#: Called with each batch's outcome and its estimated bytes.
OnDone = Callable[[Outcome, int], None]


@dataclass
class DeliveryCounts:
    """What became of what a signal's senders sent: items received, forwarded upstream, failed
    (given up on, not delivered), and rejected by the upstream (its ``partial_success``)."""

    received: int = 0
    forwarded: int = 0
    failed: int = 0
    rejected: int = 0

    def settle(self, outcome: Outcome) -> None:
        """Count the items the forwarder is done with."""
        self.forwarded += outcome.forwarded
        self.failed += outcome.failed
        self.rejected += outcome.rejected


@dataclass(eq=False)
class _Batch:
    request: Any
    count: int
    #: The pipeline's estimate of what it holds for these items (reported back with the outcome).
    size: int
    #: The serialized size of ``request``.
    wire_bytes: int
    #: How many times in a row this request (or the one it was cut from) timed out.
    timeouts: int = 0


#: ``_send``'s answer for a request to be cut in two and sent as halves.
_CUT = "cut"


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
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    ) -> None:
        if max_request_bytes < 1:
            raise ValueError("max_request_bytes must be at least 1")
        self._exporter = exporter
        self.signal = signal
        self._initial_backoff = initial_backoff_s
        self._max_backoff = max_backoff_s
        self.on_done = on_done
        #: Serialized bytes per request at most; lowered when the upstream refuses smaller requests.
        self.max_request_bytes = max_request_bytes
        #: Items per request at most; lowered while exports time out, raised back as they succeed.
        self.max_request_items = MERGE_UP_TO_SPANS
        self._successes = 0
        self._queue: deque[_Batch] = deque()
        self._cond = threading.Condition()
        self._deadline: float | None = None  # monotonic time past which nothing new is sent
        self._pending = 0
        self._in_flight = False
        self.forwarded = 0
        self.failed = 0
        self.rejected = 0
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
        batch = _Batch(request, count, size_bytes, request.ByteSize())
        with self._cond:
            if self._deadline is not None and time.monotonic() >= self._deadline:
                self._settle(Outcome(failed=count), size_bytes)
                return
            self._queue.append(batch)
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
                self._cut_head()
                batch = self._queue[0]
                self._in_flight = True
            result = self._send(batch)
            with self._cond:
                if not self._queue or self._queue[0] is not batch:
                    return  # close() gave up waiting and settled it already
                self._in_flight = False
                if result == _CUT:  # sent again as two halves, first things first
                    self._queue.popleft()
                    for half in reversed(self._halves(batch)):
                        self._queue.appendleft(half)
                elif isinstance(result, Outcome):
                    self._queue.popleft()
                    self._pending -= batch.count
                    self._settle(result, batch.size)
                # else not sent: the deadline came while waiting to retry; it stays first
                self._cond.notify_all()

    def _merge_head(self) -> None:
        """Make the first batch one request of the batches waiting, within the request bounds.

        A slow upstream then gets fewer, larger requests instead of a backlog of small ones.
        """
        queue = self._queue
        if len(queue) < 2 or not self._fits(queue[0], queue[1]):
            return
        field = self.signal.resources_field
        merged = self.signal.request_class()
        first = queue.popleft()
        getattr(merged, field).extend(getattr(first.request, field))
        count, size, wire = first.count, first.size, first.wire_bytes
        timeouts = first.timeouts
        while queue and count + queue[0].count <= self.max_request_items:
            if wire + queue[0].wire_bytes > self.max_request_bytes:
                break
            batch = queue.popleft()
            getattr(merged, field).extend(getattr(batch.request, field))
            count += batch.count
            size += batch.size
            wire += batch.wire_bytes  # a request is its resources, one after the other
            timeouts = max(timeouts, batch.timeouts)
        queue.appendleft(_Batch(merged, count, size, wire, timeouts))

    def _fits(self, first: _Batch, second: _Batch) -> bool:
        return (
            first.count + second.count <= self.max_request_items
            and first.wire_bytes + second.wire_bytes <= self.max_request_bytes
        )

    def _cut_head(self) -> None:
        """Cut the first batch until each part is within the request bounds (one item always goes as it is)."""
        while True:
            head = self._queue[0]
            too_big = head.wire_bytes > self.max_request_bytes or head.count > self.max_request_items
            if not too_big or leaf_count(head.request, self.signal) < 2:
                return
            self._queue.popleft()
            for half in reversed(self._halves(head)):
                self._queue.appendleft(half)

    def _halves(self, batch: _Batch) -> list[_Batch]:
        """``batch`` cut in two, each half with its share of the estimate; the timeouts carry over."""
        first, second = halves(batch.request, self.signal)
        first_count = self.signal.count(first)
        first_size = batch.size * first_count // batch.count if batch.count else 0
        return [
            _Batch(first, first_count, first_size, first.ByteSize(), batch.timeouts),
            _Batch(second, batch.count - first_count, batch.size - first_size, second.ByteSize(), batch.timeouts),
        ]

    def _settle(self, outcome: Outcome, size: int) -> None:
        self.forwarded += outcome.forwarded
        self.failed += outcome.failed
        self.rejected += outcome.rejected
        if self.on_done is not None:
            self.on_done(outcome, size)

    def _send(self, batch: _Batch) -> Outcome | str | None:
        """Export until delivered or rejected for good (an ``Outcome``), to be cut (``_CUT``), or the deadline
        (None)."""
        backoff = self._initial_backoff
        attempt = 0
        item = self.signal.item
        while True:
            attempt += 1
            try:
                response = self._exporter.export(batch.request)
            except Exception as exc:
                # The upstream's answer, not a bug of ours: network errors and error statuses are
                # retried, cut or counted as failed, as OTLP says.
                divisible = leaf_count(batch.request, self.signal) > 1
                if too_large(exc):
                    if divisible:
                        self._shrink_bytes(batch, exc)
                        return _CUT
                    self.failing = True
                    logger.warning(
                        "1 %s not delivered: the upstream refuses it as too large (%s, %d bytes)",
                        item,
                        _describe(exc),
                        batch.wire_bytes,
                    )
                    return Outcome(failed=batch.count)
                if timed_out(exc):
                    batch.timeouts += 1
                    if batch.timeouts >= 2 and divisible:
                        self._shrink_items(batch)
                        return _CUT
                if not retryable(exc):
                    self.failing = True
                    logger.warning(
                        "%d %ss not delivered: the upstream rejected them (%s)", batch.count, item, _describe(exc)
                    )
                    return Outcome(failed=batch.count)
                if not self.failing:
                    logger.warning("upstream failed (%s); holding %ss and retrying", _describe(exc), item)
                self.failing = True
                asked = retry_after_s(exc)
                if self._wait_to_retry(time.monotonic() + max(backoff, asked or 0.0)):
                    return None
                backoff = min(backoff * 2, self._max_backoff)
            else:
                if self.failing:
                    logger.info("upstream back after %d attempts", attempt)
                self.failing = False
                self._grow_back()
                rejected, message = rejected_items(response)
                rejected = min(rejected, batch.count)
                if rejected:
                    logger.warning(
                        "%d of %d %ss not delivered: the upstream took the request but rejected them "
                        "(partial success: %s)",
                        rejected,
                        batch.count,
                        item,
                        message or "no message",
                    )
                return Outcome(forwarded=batch.count - rejected, rejected=rejected)

    def _shrink_bytes(self, batch: _Batch, exc: BaseException) -> None:
        """The upstream refused ``batch`` as too large: later requests stay under half its size."""
        limit = max(1, batch.wire_bytes // 2)
        if limit < self.max_request_bytes:
            logger.warning(
                "the upstream refused a request of %d %ss (%d bytes) as too large (%s); it is sent in halves, "
                "and requests are kept under %d bytes from now on",
                batch.count,
                self.signal.item,
                batch.wire_bytes,
                _describe(exc),
                limit,
            )
            self.max_request_bytes = limit

    def _shrink_items(self, batch: _Batch) -> None:
        """A request timed out twice: later requests carry at most half as many items, for a while."""
        limit = max(1, batch.count // 2)
        logger.warning(
            "a request of %d %ss timed out twice (the upstream may have stored it already); it is sent in halves, "
            "and requests carry at most %d %ss for now",
            batch.count,
            self.signal.item,
            limit,
            self.signal.item,
        )
        self.max_request_items = min(self.max_request_items, limit)
        self._successes = 0

    def _grow_back(self) -> None:
        if self.max_request_items >= MERGE_UP_TO_SPANS:
            return
        self._successes += 1
        if self._successes >= GROW_BACK_AFTER:
            self._successes = 0
            self.max_request_items = min(MERGE_UP_TO_SPANS, self.max_request_items * 2)

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
        """Send what is queued for up to ``timeout_s``, then stop; returns the items not delivered (in all:
        failed, and rejected by the upstream).

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
            for batch in self._queue:
                self._settle(Outcome(failed=batch.count), batch.size)
            self._queue.clear()
            self._pending = 0
        self._exporter.close()
        return self.failed + self.rejected

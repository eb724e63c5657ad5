"""The OTLP/HTTP receiver and the status endpoints, on aiohttp's asyncio server.

``POST /v1/traces``, ``/v1/metrics`` and ``/v1/logs`` with ``application/x-protobuf`` or
``application/json`` (gzip accepted). Too large: 413; malformed, shorter than its
``Content-Length`` or a gzip stream that is cut or corrupt: 400; no ``Content-Length``: 411; an
unknown content type or encoding: 415; pushed back: 503 with ``Retry-After``; a body that stalls
for ``read_timeout_s``: 408. Malformed requests are logged without their payload, in one line.

``GET /health`` (counts), ``/health/live`` (200 while the process serves), ``/health/ready`` (200,
or 503 with ``Retry-After`` while requests would be pushed back: the forward queue full, a memory
limit reached, or stopping), ``/profiles`` and ``/profiles/{trace_id}``, and ``/programs`` (the
profiles averaged per agent program, ``live.program_averages``; ``?service=NAME`` keeps one service's;
computed on a helper thread, not the event loop). The three health paths never need the bearer
token (they are what orchestrators probe); every other request does when one is set (401 with
``WWW-Authenticate: Bearer`` otherwise; compared in constant time, never logged).

Every connection is served on one event loop thread (``ServiceLoop``); requests are decoded and
handed to the pipeline there. At most ``max_connections`` connections are open at once: one more
is answered 503 with ``Retry-After`` as soon as it is accepted, and closed. A connection that
sends nothing for ``read_timeout_s`` while a request line or headers are due, or between requests,
is closed. A client that disconnects or times out is logged in one line.

aiohttp's low-level ``web.Server`` is used, not its application framework: the receiver needs its
own hooks on each connection (the limit counted at accept, the read timeout, answering after the
client half-closed), which ``_Connection`` adds to aiohttp's ``RequestHandler``.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import socket
import ssl
import threading
import zlib
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from google.protobuf.message import DecodeError  # type: ignore[import-untyped]

from ..errors import InternalErrorLog, Overloaded, RequestTooLarge
from .pipeline import Pipeline
from .receivers import RETRY_AFTER_S, BearerToken, gunzip, port_in_use
from .signals import Signal

logger = logging.getLogger(__name__)

T = TypeVar("T")

_PROTOBUF = "application/x-protobuf"
_JSON = "application/json"
#: Oversized bodies up to this size are read and discarded before the 413 answer.
_DRAIN_LIMIT = 64 * 1024 * 1024
_READ_CHUNK = 256 * 1024
#: Seconds a client has to complete the TLS handshake on the HTTP port.
TLS_HANDSHAKE_TIMEOUT_S = 10.0
#: Connections waiting to be accepted: a burst is accepted, then served or answered 503.
_BACKLOG = 1024
_REALM = 'Bearer realm="otel-agent-profiler"'
_LINGER_S = 1.0
#: Paths that never need the bearer token.
HEALTH_PATHS = ("/health", "/health/live", "/health/ready")
#: Answered to a connection over ``max_connections``, as soon as it is accepted.
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: application/json\r\n"
    b"Content-Length: 48\r\nConnection: close\r\n\r\n"
    b'{"code": 503, "message": "too many connections"}'
)

_RECEIVE_ERRORS = InternalErrorLog(
    logger, "receiving an OTLP request failed; answered 500 / INTERNAL", repeat_level=logging.ERROR
)

#: Takes a decoded request and its serialized size; returns its item count or raises ``Overloaded``.
Receive = Callable[[Any, int], int]


class ServiceLoop:
    """An asyncio event loop on its own thread, for the receivers."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="agent-profiler-loop", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def call(self, coroutine: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run ``coroutine`` on the loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout_s)

    def close(self) -> None:
        """Cancel what still runs on the loop (connections past the shutdown grace), stop it and close it."""
        if self._thread.is_alive():
            self.call(self._cancel_tasks(), 10.0)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join()
        self.loop.close()

    @staticmethod
    async def _cancel_tasks() -> None:
        tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@dataclass
class HttpEndpoints:
    """What the HTTP receiver serves: a receive function per OTLP path, and the status documents."""

    signals: Mapping[str, tuple[Signal, Receive]]
    pipeline: Pipeline
    health: Callable[[], dict[str, Any]]
    #: Why the service is not ready (requests would be pushed back), or None.
    not_ready: Callable[[], str | None]


class _Connection(web.RequestHandler):
    """aiohttp's connection, with a read timeout, counted against the connection limit, and kept open
    for the answer when the client half-closes after its request."""

    read_timeout_s = 10.0
    on_lost: Callable[[], None] = staticmethod(lambda: None)
    _last_data = 0.0
    _idle_check: asyncio.TimerHandle | None = None
    #: The client half-closed: nothing more will come after the requests received.
    _client_done = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._last_data = self._loop.time()
        self._idle_check = self._loop.call_later(self.read_timeout_s, self._check_idle)

    def data_received(self, data: bytes) -> None:
        self._last_data = self._loop.time()
        super().data_received(data)

    def _check_idle(self) -> None:
        """Close the connection when the client owes a request line or headers and sent nothing for the timeout.

        While a request is handled its body has its own timeout (408), and the answer is not the client's to wait on.
        """
        self._idle_check = None
        if self.transport is None:
            return
        due = self._last_data + self.read_timeout_s
        if not self._request_in_progress and self._loop.time() >= due:
            peer = self.transport.get_extra_info("peername")
            host = peer[0] if isinstance(peer, tuple) else peer
            logger.info("client %s timed out (no data for %g s); connection closed", host, self.read_timeout_s)
            self.force_close()
            return
        self._idle_check = self._loop.call_at(max(due, self._loop.time() + 0.1), self._check_idle)

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._idle_check is not None:
            self._idle_check.cancel()
            self._idle_check = None
        try:
            super().connection_lost(exc)
        finally:
            self.on_lost()

    def eof_received(self) -> bool:  # type: ignore[override]  # asyncio: True keeps the transport open
        if self._waiter is not None and not self._waiter.done():
            return False  # idle, waiting for a request that will not come: asyncio closes the transport
        # The client sent all it will send: a body cut short reads as ended (answered 400), and the
        # answer still goes out. aiohttp's own handler would close the transport here.
        for _, payload in self._messages:
            payload.feed_eof()
        # A request just taken from the queue becomes current when its task runs, which is
        # already scheduled: feed its body's end after that.
        self._loop.call_soon(self._end_current_body)
        # Requests pipelined before the half-close are each answered and taken, some maybe still
        # unparsed: aiohttp's close() would drop everything after the current request. The
        # connection is closed once the last is answered instead (``_handle_request``).
        self._client_done = True
        # The last request may have been answered already, its handler returned before the
        # end arrived while aiohttp has not yet started waiting for the next: nothing else
        # would close the connection then, and the client would wait for the read timeout.
        self._loop.call_soon(self._close_when_answered)
        return True

    async def _handle_request(self, *args: Any, **kwargs: Any) -> Any:
        result = await super()._handle_request(*args, **kwargs)
        if self._client_done:
            self._loop.call_soon(self._close_when_answered)
        return result

    def _close_when_answered(self) -> None:
        """After a half-close: close the connection once no request is left to answer."""
        if self.transport is None or self._messages:
            return  # closed already, or the next request will check again once answered
        if self._waiter is not None and not self._waiter.done():
            self.transport.close()  # what was written is sent first
        else:  # the last answer is still being finished
            self._loop.call_later(0.01, self._close_when_answered)

    def _end_current_body(self) -> None:
        request = self._current_request
        if request is not None:
            request.content.feed_eof()

    def log_exception(self, message: str, *args: Any, exc_info: Any = None, **kwargs: Any) -> None:
        """aiohttp's report of a request it could not handle, in one line (a traceback only for a bug)."""
        peer = args[0] if args else "?"
        if isinstance(exc_info, HttpProcessingError):
            reason = (exc_info.message or type(exc_info).__name__).splitlines()[0]
            logger.info("bad HTTP request from %s answered %d: %s", peer, exc_info.code, reason)
        elif isinstance(exc_info, (ConnectionError, asyncio.IncompleteReadError)):
            logger.info("client %s disconnected: %s", peer, type(exc_info).__name__)
        else:
            logger.error("serving an HTTP request from %s failed; answered 500", peer, exc_info=exc_info or True)


class _Busy(asyncio.Protocol):
    """A connection over the limit: answered 503 at once, then closed.

    What the client sends meanwhile is read and dropped until it closes its side (or for a second):
    closing with unread data would make the kernel reset the connection, and the client might not
    see the answer.
    """

    def __init__(self, lingering: set[asyncio.Transport]) -> None:
        self._lingering = lingering  # closed by the receiver when it stops, if still open

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._lingering.add(transport)
        transport.write(_BUSY)
        if transport.can_write_eof():
            transport.write_eof()
            asyncio.get_running_loop().call_later(_LINGER_S, transport.close)
        else:  # TLS: no half-close
            transport.close()

    def data_received(self, data: bytes) -> None:
        pass

    def eof_received(self) -> bool:
        self._transport.close()
        return True

    def connection_lost(self, exc: BaseException | None) -> None:
        self._lingering.discard(self._transport)


class _ConnectionLimit:
    """The protocol factory: aiohttp's connection while fewer than ``limit`` are open, else ``_Busy``."""

    def __init__(self, server: web.Server, limit: int, read_timeout_s: float) -> None:
        self._server = server
        self._limit = limit
        self._read_timeout_s = read_timeout_s
        self._open = 0  # counted at accept: a burst is accepted before any connection is made
        self._refusing = False
        #: Connections answered 503 whose clients have not closed them yet.
        self.refused: set[asyncio.Transport] = set()

    def _lost(self) -> None:
        self._open -= 1

    def __call__(self) -> asyncio.Protocol:
        if self._open >= self._limit:
            if not self._refusing:
                logger.warning("too many HTTP connections: new ones are answered 503 until some end")
                self._refusing = True
            return _Busy(self.refused)
        self._refusing = False
        connection = _Connection(self._server, loop=self._server._loop, **self._server._kwargs)
        connection.read_timeout_s = self._read_timeout_s
        connection.on_lost = self._lost
        self._open += 1
        return connection


def _peer(request: web.BaseRequest) -> str:
    return request.remote or "?"


def _error(status: int, message: str, headers: dict[str, str] | None = None, *, close: bool = False) -> web.Response:
    response = web.Response(
        status=status, body=json.dumps({"code": status, "message": message}).encode(), headers=headers
    )
    response.content_type = _JSON
    if close:
        response.force_close()
    return response


def _json(document: Any) -> web.Response:
    response = web.Response(body=json.dumps(document).encode())
    response.content_type = _JSON
    return response


class _Handler:
    def __init__(
        self, endpoints: HttpEndpoints, max_request_bytes: int, bearer_token: BearerToken | None, read_timeout_s: float
    ) -> None:
        self.endpoints = endpoints
        self.max_request_bytes = max_request_bytes
        self.bearer_token = bearer_token
        self.read_timeout_s = read_timeout_s

    async def __call__(self, request: web.BaseRequest) -> web.StreamResponse:
        try:
            if request.method == "POST":
                return await self._post(request)
            if request.method in ("GET", "HEAD"):
                if request.path.rstrip("/") == "/programs":
                    return await self._programs(request)
                return self._get(request)
            return _error(405, "method not allowed", {"Allow": "GET, POST"})
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            logger.info("client %s disconnected: %s", _peer(request), type(exc).__name__)
            return _error(400, "connection lost", close=True)  # nobody reads it: aiohttp drops it
        except Exception:
            # Not the guard: our bug becomes the sender's 500, next to the answers above.
            _RECEIVE_ERRORS.report("serve http request")
            return _error(500, "internal error", close=True)

    def _unauthorized(self, request: web.BaseRequest) -> web.Response | None:
        """None when no token is required or the request carries it; otherwise the 401 answer."""
        token = self.bearer_token
        if token is None:
            return None
        authorization = request.headers.get("Authorization")
        if token.accepts(authorization):
            return None
        problem = "missing" if authorization is None else "invalid"
        logger.warning("%s bearer token on %s %s from %s", problem, request.method, request.path, _peer(request))
        challenge = _REALM if authorization is None else _REALM + ', error="invalid_token"'
        return _error(401, f"{problem} bearer token", {"WWW-Authenticate": challenge}, close=request.method == "POST")

    def _get(self, request: web.BaseRequest) -> web.Response:
        endpoints = self.endpoints
        path = request.path.rstrip("/")
        if path == "/health":
            return _json(endpoints.health())
        if path == "/health/live":
            return _json({"status": "live"})
        if path == "/health/ready":
            reason = endpoints.not_ready()
            if reason is None:
                return _json({"status": "ready"})
            return _error(503, f"not ready: {reason}", {"Retry-After": str(RETRY_AFTER_S)})
        denied = self._unauthorized(request)
        if denied is not None:
            return denied
        if path == "/profiles":
            return _json(endpoints.pipeline.summary())
        if path.startswith("/profiles/"):
            profile = endpoints.pipeline.profile(path[len("/profiles/") :])
            return _error(404, "no profile for this trace id") if profile is None else _json(profile)
        return _error(404, "not found")

    async def _programs(self, request: web.BaseRequest) -> web.Response:
        """``GET /programs[?service=NAME]``: the profiles averaged per program."""
        denied = self._unauthorized(request)
        if denied is not None:
            return denied
        service = request.query.get("service")
        # With a thousand programs, averaging and encoding take tens of milliseconds: on another
        # thread, so that the event loop goes on receiving meanwhile.
        body = await asyncio.get_running_loop().run_in_executor(None, self._programs_body, service)
        response = web.Response(body=body)
        response.content_type = _JSON
        return response

    def _programs_body(self, service: str | None) -> bytes:
        return json.dumps(self.endpoints.pipeline.programs.to_dict(service)).encode()

    async def _discard(self, request: web.BaseRequest, length: int) -> None:
        remaining = length
        while remaining > 0:
            chunk = await asyncio.wait_for(request.content.read(min(remaining, _READ_CHUNK)), self.read_timeout_s)
            if not chunk:
                return
            remaining -= len(chunk)

    async def _read_body(self, request: web.BaseRequest, length: int) -> bytes | None:
        """The body (shorter than ``length`` if the client stopped sending), or None after the read timeout."""
        chunks: list[bytes] = []
        remaining = length
        while remaining > 0:
            try:
                chunk = await asyncio.wait_for(request.content.read(min(remaining, _READ_CHUNK)), self.read_timeout_s)
            except asyncio.TimeoutError:
                return None
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    async def _post(self, request: web.BaseRequest) -> web.StreamResponse:
        limit = self.max_request_bytes
        length = request.content_length
        denied = self._unauthorized(request)
        if denied is not None:
            # Read what the sender may still be writing (up to the request limit) so that it sees the 401.
            if length is not None and 0 < length <= limit:
                await self._discard(request, length)
            return denied
        target = self.endpoints.signals.get(request.path)
        if target is None:
            return _error(404, "not found", close=True)
        signal, receive = target
        if length is None:
            return _error(411, "Content-Length required", close=True)
        if length > limit:
            # A body of reasonable size is read and discarded, so the client sees the answer rather
            # than a reset connection; the connection is closed after the answer either way.
            if length <= _DRAIN_LIMIT:
                await self._discard(request, length)
            return _error(413, f"request larger than {limit} bytes", close=True)
        body = await self._read_body(request, length)
        if body is None:
            logger.info(
                "client %s timed out sending its body (no data for %g s); answered 408",
                _peer(request),
                self.read_timeout_s,
            )
            return _error(408, "request body not received in time", close=True)
        if len(body) < length:
            message = "truncated OTLP/HTTP request from %s: %d of %d bytes (Content-Length)"
            logger.warning(message, _peer(request), len(body), length)
            return _error(400, "body shorter than its Content-Length", close=True)
        return self._take(request, signal, receive, body)

    def _take(self, request: web.BaseRequest, signal: Signal, receive: Receive, body: bytes) -> web.Response:
        limit = self.max_request_bytes
        content_type = (request.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        encoding = (request.headers.get("Content-Encoding") or "identity").strip().lower()
        message_name = signal.request_class.__name__
        try:
            if encoding == "gzip":
                body = gunzip(body, limit)
            elif encoding != "identity":
                return _error(415, f"unsupported Content-Encoding {encoding!r}")
            if content_type == _PROTOBUF:
                message = signal.request_class()
                message.ParseFromString(body)
            elif content_type == _JSON:
                message = signal.from_json(body)
            else:
                return _error(415, "Content-Type must be application/x-protobuf or application/json")
        except RequestTooLarge:
            return _error(413, f"request larger than {limit} bytes once decompressed")
        except (DecodeError, ValueError, zlib.error, UnicodeDecodeError, RecursionError) as exc:
            logger.warning(
                "malformed OTLP/HTTP request (%s, %d bytes) from %s: %s",
                content_type,
                len(body),
                _peer(request),
                type(exc).__name__,
            )
            return _error(400, f"malformed {message_name}")
        try:
            receive(message, message.ByteSize() if content_type == _JSON else len(body))
        except Overloaded as exc:
            return _error(503, f"{exc}; retry later", {"Retry-After": str(RETRY_AFTER_S)})
        except Exception:
            # Not the guard: our bug becomes the sender's 500, where Overloaded becomes its 503.
            _RECEIVE_ERRORS.report("serve receive")
            return _error(500, "internal error", close=True)
        if content_type == _JSON:
            response = web.Response(body=b"{}")
            response.content_type = _JSON
        else:
            response = web.Response(body=signal.response_class().SerializeToString())
            response.content_type = _PROTOBUF
        return response


class HttpReceiver:
    """The OTLP/HTTP server on a ``ServiceLoop``."""

    def __init__(
        self,
        loop: ServiceLoop,
        host: str,
        port: int,
        endpoints: HttpEndpoints,
        max_request_bytes: int,
        ssl_context: ssl.SSLContext | None = None,
        bearer_token: BearerToken | None = None,
        *,
        read_timeout_s: float = 10.0,
        max_connections: int = 100,
    ) -> None:
        self._loop = loop
        try:
            self._socket = socket.create_server((host, port), backlog=_BACKLOG)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise port_in_use(host, port, "OTLP/HTTP") from None
            raise
        self.port: int = self._socket.getsockname()[1]
        handler = _Handler(endpoints, max_request_bytes, bearer_token, read_timeout_s)
        self._ssl_context = ssl_context
        self._max_connections = max_connections
        self._read_timeout_s = read_timeout_s
        self._handler = handler
        self._server: web.Server | None = None
        self._limit: _ConnectionLimit | None = None
        self._listener: asyncio.AbstractServer | None = None

    async def _start(self) -> None:
        self._server = web.Server(
            self._handler,
            keepalive_timeout=self._read_timeout_s,  # an idle keep-alive connection (see _Connection too)
            # After an answer given before the whole body came (408, 401, ...), what the client still
            # sends is read and dropped this long, so that it sees the answer rather than a reset.
            lingering_time=_LINGER_S,
            auto_decompress=False,  # gzip is inflated by the handler, within the request limit
            access_log=None,
            handler_cancellation=False,
        )
        self._limit = _ConnectionLimit(self._server, self._max_connections, self._read_timeout_s)
        self._listener = await asyncio.get_running_loop().create_server(
            self._limit,
            sock=self._socket,
            ssl=self._ssl_context,
            ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S if self._ssl_context is not None else None,
            backlog=_BACKLOG,
        )

    async def _stop(self, grace_s: float) -> None:
        if self._listener is not None:
            self._listener.close()
        if self._server is not None:
            await self._server.shutdown(grace_s)
        if self._limit is not None:
            for transport in list(self._limit.refused):
                transport.abort()
        if self._listener is not None:
            self._listener.close()
            # Python 3.12 also waits here for every connection to be closed: bounded, just in case.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._listener.wait_closed(), 1.0)

    def start(self) -> HttpReceiver:
        self._loop.call(self._start())
        return self

    def stop(self, grace_s: float = 5.0) -> None:
        """Stop accepting; requests in progress get up to ``grace_s`` to be answered."""
        try:
            self._loop.call(self._stop(grace_s), grace_s + 5.0)
        finally:
            self._socket.close()

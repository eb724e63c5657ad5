"""The OTLP receivers (HTTP and gRPC) and the HTTP endpoints reporting on the service.

OTLP/HTTP: ``POST /v1/traces`` with ``application/x-protobuf`` or ``application/json`` (gzip
accepted). Too large: 413; malformed, shorter than its ``Content-Length`` or a gzip stream that is
cut or corrupt: 400; pushed back: 503 with ``Retry-After``. OTLP/gRPC: ``TraceService/Export``;
too large: RESOURCE_EXHAUSTED; malformed: INVALID_ARGUMENT; pushed back: UNAVAILABLE. Malformed
requests are logged without their payload, in one line.

Each HTTP connection has a thread; at most ``max_connections`` are served at once (more are
answered 503 and closed), and a connection that sends nothing for ``read_timeout_s`` while a
request line, headers or body are due is closed. A client that disconnects or times out is
logged in one line.

On the HTTP server also: ``GET /health``, ``GET /profiles``, ``GET /profiles/{trace_id}``.

Optional, off by default: TLS on both receivers (an ``ssl.SSLContext`` on the HTTP listening
socket, ``grpc.ssl_server_credentials`` on the gRPC port), and a bearer token that every request
but ``GET /health`` must carry as ``Authorization: Bearer <token>`` (gRPC metadata
``authorization``); without it: 401 with ``WWW-Authenticate: Bearer`` / UNAUTHENTICATED. The
token is compared in constant time and never logged.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import json
import logging
import socket
import ssl
import sys
import threading
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc  # type: ignore[import-untyped]
from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceServicer

from ..adapters.otlp_proto import request_from_otlp_json
from ..errors import InternalErrorLog
from .pipeline import Overloaded, Pipeline

logger = logging.getLogger(__name__)

TRACES_PATH = "/v1/traces"
RETRY_AFTER_S = 1
_PROTOBUF = "application/x-protobuf"
_JSON = "application/json"
#: Oversized bodies up to this size are read and discarded before the 413 answer.
_DRAIN_LIMIT = 64 * 1024 * 1024
#: Seconds a client has to complete the TLS handshake on the HTTP port.
TLS_HANDSHAKE_TIMEOUT_S = 10.0
_REALM = 'Bearer realm="otel-agent-profiler"'
#: Answered, on the accepting thread, to a connection over ``max_connections``.
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: application/json\r\n"
    b"Content-Length: 48\r\nConnection: close\r\n\r\n"
    b'{"code": 503, "message": "too many connections"}'
)

# A bug in the service answers 500 / INTERNAL and is logged with its traceback (each, not only the first).
_RECEIVE_ERRORS = InternalErrorLog(
    logger, "receiving an OTLP request failed; answered 500 / INTERNAL", repeat_level=logging.ERROR
)


class RequestTooLarge(Exception):
    pass


def _gunzip(body: bytes, limit: int) -> bytes:
    """The decompressed gzip ``body`` (members one after the other); ``zlib.error`` if cut or corrupt."""
    out = bytearray()
    rest = body
    while True:
        decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out += decompressor.decompress(rest, limit + 1 - len(out))
        if len(out) > limit:
            raise RequestTooLarge
        if not decompressor.eof:
            raise zlib.error("the gzip stream ends early")
        rest = decompressor.unused_data
        if not rest:
            return bytes(out)


class BearerToken:
    """The token requests must carry. Only its digest is kept; checks take constant time."""

    def __init__(self, token: str) -> None:
        if not token or not all("!" <= c <= "~" for c in token):
            raise ValueError("the bearer token must be non-empty printable ASCII without spaces")
        self._digest = hashlib.sha256(token.encode()).digest()

    def __repr__(self) -> str:
        return "BearerToken(<redacted>)"

    def accepts(self, authorization: str | None) -> bool:
        """Whether an ``Authorization`` value is ``Bearer <token>`` (scheme case-insensitive)."""
        scheme, _, credentials = (authorization or "").strip().partition(" ")
        # Hashing both sides first keeps the comparison's time independent of the token's length.
        given = hashlib.sha256(credentials.strip().encode("utf-8", "replace")).digest()
        return hmac.compare_digest(given, self._digest) and scheme.lower() == "bearer"


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    # Connections waiting to be accepted (socketserver's default is 5): a burst is accepted, then
    # served or answered 503, rather than left to the kernel's retransmissions.
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        pipeline: Pipeline,
        max_request_bytes: int,
        ssl_context: ssl.SSLContext | None = None,
        bearer_token: BearerToken | None = None,
        read_timeout_s: float = 10.0,
        max_connections: int = 100,
    ) -> None:
        self.pipeline = pipeline
        self.max_request_bytes = max_request_bytes
        self.bearer_token = bearer_token
        self.read_timeout_s = read_timeout_s
        self._slots = threading.BoundedSemaphore(max_connections)
        self._refusing = False
        super().__init__(address, _Handler)
        if ssl_context is not None:
            # The handshake is done by each connection's thread (see _Handler.handle), not by accept().
            self.socket = ssl_context.wrap_socket(self.socket, server_side=True, do_handshake_on_connect=False)

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve the connection on a new thread, or answer 503 and close it when all slots are taken."""
        if not self._slots.acquire(blocking=False):
            if not self._refusing:
                logger.warning("too many HTTP connections: new ones are answered 503 until some end")
                self._refusing = True
            if not isinstance(request, ssl.SSLSocket):  # a TLS answer would need the handshake: just close
                try:
                    request.settimeout(0.5)
                    request.sendall(_BUSY)
                except OSError:
                    pass
            self.shutdown_request(request)
            return
        self._refusing = False
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One line for a client that went away or stalled; a bug is reported with its traceback."""
        exc = sys.exc_info()[1]
        host = client_address[0] if isinstance(client_address, tuple) else client_address
        if isinstance(exc, TimeoutError):
            logger.info("client %s timed out (no data for %g s); connection closed", host, self.read_timeout_s)
        elif isinstance(exc, OSError):
            logger.info("client %s disconnected: %s", host, type(exc).__name__)
        else:
            _RECEIVE_ERRORS.report("serve http connection")


class _Handler(BaseHTTPRequestHandler):
    server: _HttpServer
    protocol_version = "HTTP/1.1"
    server_version = "otel-agent-profiler"

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s " + format, self.client_address[0], *args)

    def setup(self) -> None:
        super().setup()
        # Every read of the request line, headers or body waits at most this long (TimeoutError after).
        self.connection.settimeout(self.server.read_timeout_s)

    def handle(self) -> None:
        connection = self.connection
        if isinstance(connection, ssl.SSLSocket):
            try:
                connection.settimeout(TLS_HANDSHAKE_TIMEOUT_S)
                connection.do_handshake()
                connection.settimeout(self.server.read_timeout_s)
            except (ssl.SSLError, OSError) as exc:
                reason = getattr(exc, "reason", None) or type(exc).__name__
                logger.info("TLS handshake with %s failed: %s", self.client_address[0], reason)
                self.close_connection = True
                return
        super().handle()

    def _authorized(self) -> bool:
        """True when no token is required or the request carries it; otherwise answers 401."""
        token = self.server.bearer_token
        if token is None:
            return True
        authorization = self.headers.get("Authorization")
        if token.accepts(authorization):
            return True
        problem = "missing" if authorization is None else "invalid"
        logger.warning("%s bearer token on %s %s from %s", problem, self.command, self.path, self.client_address[0])
        challenge = _REALM if authorization is None else _REALM + ', error="invalid_token"'
        self._error(401, f"{problem} bearer token", {"WWW-Authenticate": challenge})
        return False

    def _discard_body(self, length: int) -> None:
        remaining = length
        while remaining > 0:
            chunk = self.rfile.read(min(remaining, 65536))
            if not chunk:
                break
            remaining -= len(chunk)

    def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def _send_json(self, status: int, document: Any) -> None:
        self._send(status, json.dumps(document).encode(), _JSON)

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps({"code": status, "message": message}).encode(), _JSON, headers)

    def do_GET(self) -> None:
        pipeline = self.server.pipeline
        path = self.path.split("?", 1)[0].rstrip("/")
        if path != "/health" and not self._authorized():
            return
        if path == "/health":
            self._send_json(200, pipeline.health())
        elif path == "/profiles":
            self._send_json(200, pipeline.summary())
        elif path.startswith("/profiles/"):
            profile = pipeline.profile(path[len("/profiles/") :])
            if profile is None:
                self._error(404, "no profile for this trace id")
            else:
                self._send_json(200, profile)
        else:
            self._error(404, "not found")

    def do_POST(self) -> None:
        if self.server.bearer_token is not None and not self.server.bearer_token.accepts(
            self.headers.get("Authorization")
        ):
            # Read what the sender may still be writing (up to the request limit) so that it sees the 401.
            self.close_connection = True
            try:
                length = int(self.headers.get("Content-Length", ""))
            except ValueError:
                length = 0
            if 0 < length <= self.server.max_request_bytes:
                self._discard_body(length)
            self._authorized()
            return
        if self.path.split("?", 1)[0] != TRACES_PATH:
            self.close_connection = True
            self._error(404, "not found")
            return
        limit = self.server.max_request_bytes
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self.close_connection = True
            self._error(411, "Content-Length required")
            return
        if length > limit or length < 0:
            # A body of reasonable size is read and discarded, so the client sees the answer rather
            # than a reset connection; the connection is closed after the answer either way.
            self.close_connection = True
            if 0 < length <= _DRAIN_LIMIT:
                self._discard_body(length)
            self._error(413, f"request larger than {limit} bytes")
            return
        try:
            body = self.rfile.read(length)
        except TimeoutError:
            self.close_connection = True
            logger.info(
                "client %s timed out sending its body (no data for %g s); answered 408",
                self.client_address[0],
                self.server.read_timeout_s,
            )
            self._error(408, "request body not received in time")
            return
        if len(body) < length:
            self.close_connection = True
            logger.warning(
                "truncated OTLP/HTTP request from %s: %d of %d bytes (Content-Length)",
                self.client_address[0],
                len(body),
                length,
            )
            self._error(400, "body shorter than its Content-Length")
            return
        content_type = (self.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        encoding = (self.headers.get("Content-Encoding") or "identity").strip().lower()
        try:
            if encoding == "gzip":
                body = _gunzip(body, limit)
            elif encoding != "identity":
                self._error(415, f"unsupported Content-Encoding {encoding!r}")
                return
            if content_type == _PROTOBUF:
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
            elif content_type == _JSON:
                request = request_from_otlp_json(body)
            else:
                self._error(415, "Content-Type must be application/x-protobuf or application/json")
                return
        except RequestTooLarge:
            self._error(413, f"request larger than {limit} bytes once decompressed")
            return
        except (DecodeError, ValueError, zlib.error, UnicodeDecodeError, RecursionError) as exc:
            logger.warning(
                "malformed OTLP/HTTP request (%s, %d bytes) from %s: %s",
                content_type,
                length,
                self.client_address[0],
                type(exc).__name__,
            )
            self._error(400, "malformed ExportTraceServiceRequest")
            return
        try:
            self.server.pipeline.receive(request)
        except Overloaded as exc:
            self._error(503, f"{exc}; retry later", {"Retry-After": str(RETRY_AFTER_S)})
            return
        except Exception:
            _RECEIVE_ERRORS.report("serve receive")
            self.close_connection = True
            self._error(500, "internal error")
            return
        response = ExportTraceServiceResponse()
        if content_type == _JSON:
            self._send(200, b"{}", _JSON)
        else:
            self._send(200, response.SerializeToString(), _PROTOBUF)


class HttpReceiver:
    """The HTTP server on its own thread."""

    def __init__(
        self,
        host: str,
        port: int,
        pipeline: Pipeline,
        max_request_bytes: int,
        ssl_context: ssl.SSLContext | None = None,
        bearer_token: BearerToken | None = None,
        *,
        read_timeout_s: float = 10.0,
        max_connections: int = 100,
    ) -> None:
        try:
            self._server = _HttpServer(
                (host, port), pipeline, max_request_bytes, ssl_context, bearer_token, read_timeout_s, max_connections
            )
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise _port_in_use(host, port, "OTLP/HTTP") from None
            raise
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="agent-profiler-http", daemon=True)

    def start(self) -> HttpReceiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join()
        self._server.server_close()


class TraceService(TraceServiceServicer):
    """OTLP/gRPC ``TraceService``; takes the request as bytes so a malformed one gets INVALID_ARGUMENT."""

    def __init__(self, pipeline: Pipeline) -> None:
        self._pipeline = pipeline

    def Export(self, request: Any, context: grpc.ServicerContext) -> ExportTraceServiceResponse:
        if isinstance(request, bytes):
            message = ExportTraceServiceRequest()
            try:
                message.ParseFromString(request)
            except (DecodeError, RecursionError) as exc:
                logger.warning(
                    "malformed OTLP/gRPC request (%d bytes) from %s: %s",
                    len(request),
                    context.peer(),
                    type(exc).__name__,
                )
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "malformed ExportTraceServiceRequest")
            request = message
        try:
            self._pipeline.receive(request)
        except Overloaded as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"{exc}; retry later")
        except Exception:
            _RECEIVE_ERRORS.report("serve receive")
            context.abort(grpc.StatusCode.INTERNAL, "internal error")
        return ExportTraceServiceResponse()


class _BearerInterceptor(grpc.ServerInterceptor):  # type: ignore[misc]
    """Answers UNAUTHENTICATED to calls without ``authorization: Bearer <token>`` metadata."""

    def __init__(self, token: BearerToken) -> None:
        self._token = token

        def deny(request: Any, context: grpc.ServicerContext) -> None:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or invalid bearer token")

        self._deny = grpc.unary_unary_rpc_method_handler(deny)

    def intercept_service(self, continuation: Callable[[Any], Any], handler_call_details: Any) -> Any:
        values = [v for k, v in handler_call_details.invocation_metadata or () if k.lower() == "authorization"]
        if len(values) == 1 and isinstance(values[0], str) and self._token.accepts(values[0]):
            return continuation(handler_call_details)
        logger.warning(
            "%s bearer token on OTLP/gRPC %s", "missing" if not values else "invalid", handler_call_details.method
        )
        return self._deny


def _port_in_use(host: str, port: int, receiver: str) -> OSError:
    return OSError(errno.EADDRINUSE, f"{receiver} port {port} on {host} is already in use")


def _in_use(host: str, port: int) -> bool:
    """Whether another socket listens on ``host``:``port`` (binding as gRPC does, with SO_REUSEADDR)."""
    try:
        family, kind, protocol, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except (OSError, UnicodeError):
        return False  # an address gRPC will report on itself
    with socket.socket(family, kind, protocol) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


class GrpcReceiver:
    def __init__(
        self,
        host: str,
        port: int,
        pipeline: Pipeline,
        max_request_bytes: int,
        workers: int = 8,
        credentials: grpc.ServerCredentials | None = None,
        bearer_token: BearerToken | None = None,
    ) -> None:
        if port and _in_use(host, port):
            # Checked first: gRPC would log its own multi-line complaint before failing.
            raise _port_in_use(host, port, "OTLP/gRPC")
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="agent-profiler-grpc")
        self._server = grpc.server(
            self._executor,
            interceptors=[_BearerInterceptor(bearer_token)] if bearer_token is not None else None,
            options=[("grpc.max_receive_message_length", max_request_bytes), ("grpc.so_reuseport", 0)],
        )
        service = TraceService(pipeline)
        handler = grpc.method_handlers_generic_handler(
            "opentelemetry.proto.collector.trace.v1.TraceService",
            {
                "Export": grpc.unary_unary_rpc_method_handler(
                    service.Export, response_serializer=ExportTraceServiceResponse.SerializeToString
                )
            },
        )
        self._server.add_generic_rpc_handlers((handler,))
        try:
            if credentials is None:
                self.port = self._server.add_insecure_port(f"{host}:{port}")
            else:
                self.port = self._server.add_secure_port(f"{host}:{port}", credentials)
        except RuntimeError:
            self.port = 0
        if not self.port:
            self._server.stop(None)
            self._executor.shutdown(wait=False)
            raise OSError(f"cannot listen on {host}:{port} for OTLP/gRPC")

    def start(self) -> GrpcReceiver:
        self._server.start()
        return self

    def stop(self, grace_s: float = 5.0) -> None:
        self._server.stop(grace_s).wait()
        self._executor.shutdown(wait=True)

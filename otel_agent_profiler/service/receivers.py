"""The OTLP/gRPC receiver, and what both receivers share: the bearer token, gzip within a limit.

OTLP/gRPC: ``TraceService/Export``, ``MetricsService/Export`` and ``LogsService/Export`` (metrics
and logs are passed through, see ``signal_relay``). Too large: RESOURCE_EXHAUSTED; malformed:
INVALID_ARGUMENT; pushed back: UNAVAILABLE. Malformed requests are logged without their payload,
in one line. The gRPC server runs its handlers on a small thread pool: the work per request is
short and holds the GIL, so more threads would only contend for it with the profiling worker.

Optional, off by default: TLS (``grpc.ssl_server_credentials``), and a bearer token that every
call must carry as metadata ``authorization: Bearer <token>``; without it: UNAUTHENTICATED. The
token is compared in constant time and never logged. The HTTP receiver is ``http_receiver``.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import logging
import socket
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc  # type: ignore[import-untyped]
from google.protobuf.message import DecodeError  # type: ignore[import-untyped]

from ..errors import InternalErrorLog, Overloaded, RequestTooLarge
from .signals import Signal

logger = logging.getLogger(__name__)

#: Seconds a pushed-back sender is told to wait (HTTP ``Retry-After``).
RETRY_AFTER_S = 1

# A bug in the service answers 500 / INTERNAL and is logged with its traceback (each, not only the first).
_RECEIVE_ERRORS = InternalErrorLog(
    logger, "receiving an OTLP request failed; answered 500 / INTERNAL", repeat_level=logging.ERROR
)


def gunzip(body: bytes, limit: int) -> bytes:
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


#: Takes a decoded request and its serialized size; returns its item count or raises ``Overloaded``.
Receive = Callable[[Any, int], int]


class ExportService:
    """One signal's ``Export`` method; takes the request as bytes so a malformed one gets INVALID_ARGUMENT."""

    def __init__(self, signal: Signal, receive: Receive) -> None:
        self._signal = signal
        self._receive = receive

    def Export(self, request: bytes, context: grpc.ServicerContext) -> Any:
        message = self._signal.request_class()
        try:
            message.ParseFromString(request)
        except (DecodeError, RecursionError) as exc:
            logger.warning(
                "malformed OTLP/gRPC request (%d bytes) from %s: %s", len(request), context.peer(), type(exc).__name__
            )
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"malformed {self._signal.request_class.__name__}")
        try:
            self._receive(message, len(request))
        except Overloaded as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"{exc}; retry later")
        except Exception:
            # Not the guard: our bug becomes the sender's INTERNAL status, and abort raises, so it
            # must come after the report, outside any guard.
            _RECEIVE_ERRORS.report("serve receive")
            context.abort(grpc.StatusCode.INTERNAL, "internal error")
        return self._signal.response_class()


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


def port_in_use(host: str, port: int, receiver: str) -> OSError:
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
        signals: dict[str, tuple[Signal, Receive]],
        max_request_bytes: int,
        workers: int = 4,
        credentials: grpc.ServerCredentials | None = None,
        bearer_token: BearerToken | None = None,
    ) -> None:
        if port and _in_use(host, port):
            # Checked first: gRPC would log its own multi-line complaint before failing.
            raise port_in_use(host, port, "OTLP/gRPC")
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="agent-profiler-grpc")
        self._server = grpc.server(
            self._executor,
            interceptors=[_BearerInterceptor(bearer_token)] if bearer_token is not None else None,
            options=[("grpc.max_receive_message_length", max_request_bytes), ("grpc.so_reuseport", 0)],
        )
        handlers = []
        for signal, receive in signals.values():
            service = ExportService(signal, receive)
            handlers.append(
                grpc.method_handlers_generic_handler(
                    signal.grpc_service,
                    {
                        "Export": grpc.unary_unary_rpc_method_handler(
                            service.Export, response_serializer=signal.response_class.SerializeToString
                        )
                    },
                )
            )
        self._server.add_generic_rpc_handlers(tuple(handlers))
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

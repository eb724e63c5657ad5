"""The HTTP side of the fake LLM server: the threading server, reading bodies, writing JSON and events.

``_HTTPServer`` is a ``ThreadingHTTPServer`` that knows its ``FakeOpenAIServer`` and can close every open
connection on shutdown. ``_HTTPHandlerBase`` is what every endpoint builds on: HTTP/1.1 keep-alive with
``TCP_NODELAY`` (so streamed chunks leave at once), bodies read with a size cap (``Content-Length`` or
chunked), JSON responses and OpenAI-shaped errors, and server-sent events over chunked encoding.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
import uuid
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from .request_errors import _ClientGone, _error_body, _RequestError

if TYPE_CHECKING:
    from .fake_openai_server import FakeOpenAIServer


# Every part of the fake server logs under the name it had as one module.
logger = logging.getLogger("demo.fake_llm")

_MAX_BODY_BYTES = 16 * 1024 * 1024


class _HTTPServer(ThreadingHTTPServer):
    """A threading HTTP server that knows its ``FakeOpenAIServer`` and its open connections."""

    daemon_threads = True
    # Keep-alive handler threads would otherwise block server_close() until clients hang up.
    block_on_close = False

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], fake: FakeOpenAIServer):
        self.fake = fake
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(address, handler)

    def track(self, connection: socket.socket, add: bool) -> None:
        with self._connections_lock:
            if add:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    def close_connections(self) -> None:
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # The default prints a traceback to stderr; a client that vanished is not worth one.
        logger.debug("connection from %s ended with an error", client_address, exc_info=True)


class _HTTPHandlerBase(BaseHTTPRequestHandler):
    """Connection handling, request bodies and response writing, shared by every endpoint of the handler."""

    server: _HTTPServer
    protocol_version = "HTTP/1.1"
    server_version = "fake-openai/1.0"
    sys_version = ""

    def setup(self) -> None:
        super().setup()
        # Small SSE chunks must leave at once, not wait for Nagle's algorithm, or the timing is off.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.track(self.connection, add=True)

    def finish(self) -> None:
        self.server.track(self.connection, add=False)
        with contextlib.suppress(OSError):
            super().finish()

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Protocol-level errors (bad request line, unknown method, huge headers) in OpenAI's JSON shape too."""
        error = _RequestError(code, message or explain or "Bad request.", None)
        data = json.dumps(_error_body(error)).encode()
        self.close_connection = True
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:
        # Request lines only (never bodies), and only when someone asked for debug logs.
        logger.debug("%s - %s", self.address_string(), format % args)

    # -- request bodies --

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self._read_chunked()
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            self.close_connection = True
            raise _RequestError(400, "Invalid Content-Length header.", "invalid_request") from None
        if length < 0 or length > _MAX_BODY_BYTES:
            self.close_connection = True
            raise _RequestError(413, "Request body too large.", "request_too_large")
        return self.rfile.read(length) if length else b""

    def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        total = 0
        while True:
            line = self.rfile.readline(1024)
            try:
                size = int(line.split(b";", 1)[0].strip() or b"x", 16)
            except ValueError:
                self.close_connection = True
                raise _RequestError(400, "Malformed chunked request body.", "invalid_request") from None
            total += size
            if size < 0 or total > _MAX_BODY_BYTES:
                self.close_connection = True
                raise _RequestError(413, "Request body too large.", "request_too_large")
            if size == 0:
                while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(parts)
            parts.append(self.rfile.read(size))
            self.rfile.readline(1024)

    def _drain_body(self) -> None:
        # Whatever came with a request we refuse must still be read, or it poisons the kept-alive connection.
        try:
            self._read_body()
        except _RequestError:
            self.close_connection = True

    def _json_body(self) -> dict[str, Any]:
        raw = self._read_body()
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise _RequestError(
                400,
                "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your "
                "HTTP library correctly. The OpenAI API expects a JSON payload.)",
                "invalid_json",
            ) from None
        if not isinstance(body, dict):
            raise _RequestError(400, "The request body must be a JSON object.", "invalid_json")
        return body

    # -- responses --

    def _send_json(self, status: int, payload: Any, extra_headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-request-id", f"req_{uuid.uuid4().hex}")
        for name, value in (extra_headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, error: _RequestError, entry: dict[str, Any]) -> None:
        fake = self.server.fake
        fake._update(entry, status=error.status, error=error.code or error.error_type, finished=time.monotonic())
        # A server bug is deterministic here, so the client's automatic retries would only repeat it.
        headers = {"x-should-retry": "false"} if error.status >= 500 else None
        try:
            self._send_json(error.status, _error_body(error), headers)
        except OSError:
            self.close_connection = True

    def _write_chunk(self, data: bytes) -> None:
        try:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError) as exc:
            raise _ClientGone from exc

    def _send_event(self, payload: Any) -> None:
        self._write_chunk(b"data: " + json.dumps(payload).encode() + b"\n\n")

"""The fake LLM server's request handler: routing, the small endpoints, and how each request ends.

``_Handler`` is the ``BaseHTTPRequestHandler`` the server runs: it counts the request in flight, opens its
request log entry, routes it (chat completions, embeddings, models, health, and ``/metrics`` in the
vLLM-like mode), and turns every way a request can end (an OpenAI-shaped error, the client hanging up, the
server stopping, a bug) into the right response and log entry.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .chat_requests import _ChatRequests
from .embeddings_endpoint import _EmbeddingsEndpoint
from .model_catalog import _MODEL_CREATED, _base_model
from .request_errors import _ClientGone, _RequestError, _Stopping

if TYPE_CHECKING:
    from .fake_openai_server import FakeOpenAIServer


# Every part of the fake server logs under the name it had as one module.
logger = logging.getLogger("demo.fake_llm")


class _Handler(_ChatRequests, _EmbeddingsEndpoint):
    """Routes one HTTP request to the fake model and writes the OpenAI-shaped answer."""

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    # -- routing --

    def _dispatch(self, method: str) -> None:
        fake = self.server.fake
        path = self.path.split("?", 1)[0].rstrip("/") or "/"
        fake._begin()
        try:
            self._handle(fake, method, path)
        finally:
            fake._end()

    def _handle(self, fake: FakeOpenAIServer, method: str, path: str) -> None:
        entry = fake._new_entry(method, path, self.headers.get("traceparent"))
        try:
            self._route(method, path, entry)
        except _RequestError as error:
            self._send_error(error, entry)
        except _Stopping:
            fake._update(entry, aborted=True, finished=time.monotonic())
            self.close_connection = True
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, _ClientGone):
            fake._update(entry, aborted=True, finished=time.monotonic())
            self.close_connection = True
        except Exception:
            logger.exception("fake LLM server failed on %s %s", method, path)
            if entry["status"] is None:
                self._send_error(_RequestError(500, "The server had an error processing your request.", None), entry)
            self.close_connection = True

    def _route(self, method: str, path: str, entry: dict[str, Any]) -> None:
        routes: dict[str, tuple[str, Callable[[dict[str, Any]], None]]] = {
            "/v1/chat/completions": ("POST", self._chat_completions),
            "/v1/embeddings": ("POST", self._embeddings),
            "/v1/models": ("GET", self._models),
            "/health": ("GET", self._health),
        }
        if self.server.fake.vllm_like is not None:
            routes["/metrics"] = ("GET", self._metrics)
        if path.startswith("/v1/models/") and method == "GET":
            self._drain_body()
            self._model(path.removeprefix("/v1/models/"), entry)
            return
        if path not in routes:
            self._drain_body()
            raise _RequestError(404, f"Invalid URL ({method} {path})", "unknown_url")
        expected, handler = routes[path]
        if method != expected:
            self._drain_body()
            raise _RequestError(405, f"Method {method} not allowed for {path}; use {expected}.", "method_not_allowed")
        handler(entry)

    def _health(self, entry: dict[str, Any]) -> None:
        self._drain_body()
        self.server.fake._update(entry, status=200, finished=time.monotonic())
        self._send_json(200, {"status": "ok"})

    def _metrics(self, entry: dict[str, Any]) -> None:
        self._drain_body()
        fake = self.server.fake
        assert fake.vllm_like is not None
        from .vllm_like import METRICS_CONTENT_TYPE

        data = fake.vllm_like.metrics_text()
        fake._update(entry, status=200, finished=time.monotonic())
        self.send_response(200)
        self.send_header("Content-Type", METRICS_CONTENT_TYPE)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _models(self, entry: dict[str, Any]) -> None:
        self._drain_body()
        fake = self.server.fake
        data = [
            {"id": name, "object": "model", "created": _MODEL_CREATED, "owned_by": "system"}
            for name in fake.known_models()
        ]
        fake._update(entry, status=200, finished=time.monotonic())
        self._send_json(200, {"object": "list", "data": data})

    def _model(self, name: str, entry: dict[str, Any]) -> None:
        fake = self.server.fake
        if name not in fake.known_models() and _base_model(name) not in fake.known_models():
            raise _RequestError(404, f"The model '{name}' does not exist", "model_not_found", "model")
        fake._update(entry, status=200, model=name, finished=time.monotonic())
        self._send_json(200, {"id": name, "object": "model", "created": _MODEL_CREATED, "owned_by": "system"})

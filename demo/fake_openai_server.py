"""``FakeOpenAIServer``: the fake LLM server object, its settings and its lifecycle.

It holds the settings (time scale, per-model timings, seed, answer length, embedding size, the optional
vLLM-like mode), starts and stops the HTTP server on 127.0.0.1 from a daemon thread, and gives the handler
what requests share: the request log (``demo.request_log``), the scripted model (``demo.scripted_chat``), the
prefix cache, the response ids and the timing of the first and every further token.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .http_handler import _Handler
from .http_transport import _HTTPServer
from .model_catalog import _EMBEDDING_MODELS, _FALLBACK_MODEL, DEFAULT_TIMINGS, ModelTiming, _base_model
from .prefix_cache import _PrefixCache
from .prompt_tokens import _stable_int
from .request_errors import _Stopping
from .request_log import _RequestLog
from .scripted_chat import _ScriptedChatModel

if TYPE_CHECKING:
    from .vllm_like import VllmLike


_DEFAULT_ANSWER_TOKENS = 40
_DEFAULT_EMBEDDING_DIMENSIONS = 64


class FakeOpenAIServer(_RequestLog, _ScriptedChatModel):
    """An OpenAI-compatible chat-completions and embeddings server on 127.0.0.1, for demos and tests.

    Use as ``with FakeOpenAIServer(time_scale=0.05) as server: OpenAI(base_url=server.base_url, api_key="x")``.
    ``requests`` is the log of what was asked (no bodies): one dict per request with ``method``, ``path``,
    ``status``, ``model``, ``stream``, ``started``/``first_token``/``finished`` (``time.monotonic()``),
    ``prompt_tokens``, ``completion_tokens``, ``cached_tokens``, ``reasoning_tokens``, ``usage_sent`` (whether the
    response carried the usage: always for plain calls, on request for streams), ``finish_reason``,
    ``tool_calls`` (names), ``inputs`` (embeddings), ``traceparent`` (the W3C header, if the client sent one),
    ``error`` (the error code, if any), ``aborted`` (the client hung up mid-response) and ``response_id`` (chat).
    """

    def __init__(
        self,
        *,
        time_scale: float = 1.0,
        timings: Mapping[str, ModelTiming | tuple[float, float]] | None = None,
        seed: int = 0,
        default_answer_tokens: int = _DEFAULT_ANSWER_TOKENS,
        embedding_dimensions: int = _DEFAULT_EMBEDDING_DIMENSIONS,
        port: int = 0,
        vllm_like: VllmLike | None = None,
    ) -> None:
        if time_scale < 0:
            raise ValueError("time_scale must be >= 0")
        self.time_scale = float(time_scale)
        self.seed = seed
        self.default_answer_tokens = default_answer_tokens
        self.embedding_dimensions = embedding_dimensions
        self.timings: dict[str, ModelTiming] = dict(DEFAULT_TIMINGS)
        for name, timing in (timings or {}).items():
            self.timings[name] = timing if isinstance(timing, ModelTiming) else ModelTiming(*timing)
        self._port = port
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._in_flight = 0
        self._log: list[dict[str, Any]] = []
        self._counter = 0
        self._cache = _PrefixCache()
        #: vLLM's behaviour (a bounded batch, server spans, ``/metrics``), when asked for.
        self.vllm_like = vllm_like

    # -- lifecycle --

    def start(self) -> FakeOpenAIServer:
        """Bind 127.0.0.1 (port 0 unless given) and serve from a daemon thread."""
        if self._httpd is not None:
            raise RuntimeError("server already started")
        self._stopping.clear()
        httpd = _HTTPServer(("127.0.0.1", self._port), _Handler, self)
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-openai-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, end requests still waiting, and close every connection."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        httpd.close_connections()
        # Requests that were waiting end within moments; after that the request log is final.
        with self._idle:
            self._idle.wait_for(lambda: self._in_flight == 0, timeout=5)
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self.vllm_like is not None:
            self.vllm_like.flush()

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server not started")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """What to give the OpenAI client as ``base_url``: ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- inspection --

    def reset(self) -> None:
        """Forget the request log and the prefix cache."""
        with self._lock:
            self._log.clear()
        self._cache.clear()

    def timing_for(self, model: str) -> ModelTiming:
        """The timing of ``model`` (a dated snapshot uses its alias'; unknown models get gpt-4o-mini's)."""
        return self.timings.get(model) or self.timings.get(_base_model(model)) or self.timings[_FALLBACK_MODEL]

    def known_models(self) -> list[str]:
        return sorted(set(self.timings) | set(_EMBEDDING_MODELS))

    # -- internals used by the handler --

    def _begin(self) -> None:
        with self._lock:
            self._in_flight += 1

    def _end(self) -> None:
        with self._idle:
            self._in_flight -= 1
            self._idle.notify_all()

    def _next_id_rng(self) -> random.Random:
        # Ids must differ between identical requests (as real ones do), so they come from a counter.
        with self._lock:
            self._counter += 1
            counter = self._counter
        return random.Random(_stable_int("ids", self.seed, counter))

    def _sleep_until(self, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining > 0 and self._stopping.wait(remaining):
            raise _Stopping

    def _ttft(self, model: str, uncached_prompt_tokens: int, reasoning_tokens: int) -> float:
        timing = self.timing_for(model)
        seconds = timing.ttft + uncached_prompt_tokens * timing.prefill_per_token
        return (seconds + reasoning_tokens * timing.decode_per_token) * self.time_scale

    def _decode(self, model: str) -> float:
        return self.timing_for(model).decode_per_token * self.time_scale

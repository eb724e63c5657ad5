"""A fake OpenAI-compatible HTTP server with realistic, deterministic timing.

The demo agent and the end-to-end tests point the real ``openai`` client (and with it the real
``opentelemetry-instrumentation-openai``) at this server, because no real LLM service is reachable.
It answers over plain HTTP/1.1 from a ``ThreadingHTTPServer`` on 127.0.0.1, so concurrent calls
(``asyncio.gather``) really overlap, and it uses only the standard library.

Endpoints: ``POST /v1/chat/completions`` (plain and ``stream=True`` server-sent events, tool calls,
``stream_options.include_usage``), ``POST /v1/embeddings``, ``GET /v1/models`` (and ``/v1/models/{id}``),
``GET /health``; with ``vllm_like`` also ``GET /metrics`` (see ``demo.vllm_like``). Errors use OpenAI's shape
``{"error": {"message", "type", "param", "code"}}``.

How the "model" behaves (deterministic for a given request and ``seed``):

* Tool calls or text: with ``tools`` in the request, the model calls tools while it still has a tool round
  to play after the last user message, otherwise it answers with text. With at most one ``[[call: ...]]``
  directive that is simply: no tool result (role ``tool``) after the last user message -> tool calls, else text.
* ``[[call: name1, name2]]`` in the last user message calls exactly those tools, in parallel (one response,
  several ``tool_calls``; a name may repeat). Several such directives are successive rounds: the k-th one is
  used after k-1 rounds of tool results, so ``[[call: search]] [[call: fetch, fetch]]`` scripts a two-step agent.
  Without a directive the first tool is called once. ``tool_choice="none"`` forces text, ``"required"`` a tool
  call every turn (the first tool once the directives are used up), ``{"type": "function", "function":
  {"name": ...}}`` that tool every turn; ``parallel_tool_calls=False`` keeps only the first call of a round.
  Arguments are generated from each tool's JSON-schema ``parameters``.
* ``[[answer_tokens: N]]`` sets the length of the text answer (default 40 tokens; ``max_tokens`` or
  ``max_completion_tokens`` cut it, with ``finish_reason="length"``). Text is plausible English-ish sentences;
  an answer that follows tool results starts with "I checked <tool names>."

Timing, per model (``ModelTiming``; every delay is multiplied by ``time_scale``):
the first token comes after ``ttft + uncached_prompt_tokens * prefill_per_token`` (plus, for reasoning
models, the hidden reasoning tokens at ``decode_per_token`` each), then one token per ``decode_per_token``;
the response ends one more decode step after the last token (the stop token). So a plain call takes
``ttft + n * decode`` and a stream delivers its first chunk after ``ttft`` and its last after the same total.

Tokens: prompt tokens are about a quarter of the characters of every message (plus 3 per message) and of
the ``tools`` JSON. Reasoning tokens exist only for ``o*`` models: about 30% of ``completion_tokens``.

Prefix cache, like OpenAI's: the server remembers every prompt prefix (tools, then whole messages) it has
prefilled for a model. ``cached_tokens`` is the token count of the longest remembered prefix, rounded down
to a multiple of 64, and 0 when that prefix is under 1024 tokens. A prefix is remembered once its prompt is
prefilled (at first token), so concurrent first calls all miss. To hit it in a demo, give every call the
same long system prompt (over ~4,200 characters, i.e. 1024+ tokens) and the same tools: the first call
reports 0 cached tokens, every later one with the same model reports the system prompt's tokens (rounded
down to 64) and gets a shorter time to first token.

Run it by hand with ``python -m demo.fake_llm --port 0``: it prints the base URL and
serves until interrupted; ``--vllm-like`` adds vLLM's queueing, server spans and ``/metrics``
(``demo.vllm_like``). The server never logs request bodies.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import json
import logging
import math
import random
import re
import signal
import socket
import string
import struct
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .vllm_like import VllmLike

__all__ = ["DEFAULT_TIMINGS", "FakeOpenAIServer", "ModelTiming", "main"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelTiming:
    """How fast one model answers, in seconds (before ``time_scale``).

    ``ttft`` is the time to first token for a short prompt, ``decode_per_token`` the time per further output
    token, ``prefill_per_token`` what each uncached prompt token adds to the time to first token.
    """

    ttft: float
    decode_per_token: float
    prefill_per_token: float = 0.0


# Small enough that a demo run of a dozen calls takes a few seconds, in the ratios real models show
# (mini models answer sooner and decode faster; reasoning models think before their first visible token).
DEFAULT_TIMINGS: Mapping[str, ModelTiming] = {
    "gpt-4o-mini": ModelTiming(ttft=0.25, decode_per_token=0.006, prefill_per_token=40e-6),
    "gpt-4o": ModelTiming(ttft=0.40, decode_per_token=0.010, prefill_per_token=60e-6),
    "gpt-4.1-mini": ModelTiming(ttft=0.30, decode_per_token=0.006, prefill_per_token=40e-6),
    "gpt-4.1": ModelTiming(ttft=0.45, decode_per_token=0.011, prefill_per_token=60e-6),
    "o3-mini": ModelTiming(ttft=0.50, decode_per_token=0.007, prefill_per_token=50e-6),
    "o4-mini": ModelTiming(ttft=0.50, decode_per_token=0.006, prefill_per_token=50e-6),
}

# Real responses name a dated snapshot rather than the alias that was asked for.
_SNAPSHOTS: Mapping[str, str] = {
    "gpt-4o-mini": "gpt-4o-mini-2024-07-18",
    "gpt-4o": "gpt-4o-2024-08-06",
    "gpt-4.1-mini": "gpt-4.1-mini-2025-04-14",
    "gpt-4.1": "gpt-4.1-2025-04-14",
    "o3-mini": "o3-mini-2025-01-31",
    "o4-mini": "o4-mini-2025-04-16",
}

# Embedding models: fixed latency plus a little per input token.
_EMBEDDING_MODELS: Mapping[str, tuple[float, float]] = {
    "text-embedding-3-small": (0.03, 2e-6),
    "text-embedding-3-large": (0.05, 4e-6),
    "text-embedding-ada-002": (0.04, 3e-6),
}

_FALLBACK_MODEL = "gpt-4o-mini"
_DEFAULT_ANSWER_TOKENS = 40
_DEFAULT_EMBEDDING_DIMENSIONS = 64
_MAX_BODY_BYTES = 16 * 1024 * 1024
_CACHE_MIN_TOKENS = 1024
_CACHE_GRANULARITY = 64
_CACHE_CAPACITY = 50_000
_REASONING_SHARE = 0.3
_MODEL_CREATED = 1_700_000_000

_CALL_DIRECTIVE = re.compile(r"\[\[\s*call\s*:\s*([^\]]*)\]\]", re.IGNORECASE)
_ANSWER_TOKENS_DIRECTIVE = re.compile(r"\[\[\s*answer_tokens\s*:\s*(\d+)\s*\]\]", re.IGNORECASE)
_ANY_DIRECTIVE = re.compile(r"\[\[[^\]]*\]\]")
_DATED_SUFFIX = re.compile(r"-\d{4}-\d{2}-\d{2}$")
_REASONING_MODEL = re.compile(r"^o\d")
_ARGUMENT_TOKEN = re.compile(r"\s*(?:\w+|[^\w\s]+)")


def _word_list(text: str) -> tuple[str, ...]:
    return tuple(text.split())


# Parts of speech for answers that read like sentences rather than word salad.
_WORDS: Mapping[str, tuple[str, ...]] = {
    "adj": _word_list(
        "recent relevant useful main key current previous detailed short simple important overall "
        "slow fast cached parallel final early late expensive cheap stable noisy"
    ),
    "noun": _word_list(
        "report summary answer agent tool step plan task request response latency cache model trace "
        "span service query search document source context memory forecast price market team project "
        "budget timeline meeting review update draft result estimate"
    ),
    "verb": _word_list(
        "shows suggests indicates returns includes covers explains compares confirms needs keeps "
        "reduces improves changes affects supports"
    ),
    "det": _word_list("the a this each every one"),
    "prep": _word_list("for from about across within after before during under over with"),
    "adv": ("First", "Next", "Then", "Finally", "Also", "However", "Overall", "Clearly", "In short"),
}
_TEMPLATES = (
    "det adj noun verb det noun prep det noun",
    "adv, det noun verb det adj noun",
    "det noun verb det adj noun prep det adj noun",
    "adv, det adj noun verb det noun",
    "det noun prep det noun verb det adj noun",
)
_VOCABULARY = tuple(word for kind in ("adj", "noun") for word in _WORDS[kind])
_CITIES = ("Paris", "Berlin", "Tokyo", "Lisbon", "Toronto", "Nairobi", "Oslo", "Seoul")
_NAMES = ("Ada Lovelace", "Alan Turing", "Grace Hopper", "Edsger Dijkstra", "Barbara Liskov")


class _Stopping(Exception):
    """The server is shutting down while a request was waiting."""


class _ClientGone(Exception):
    """The client closed the connection before the response was complete."""


class _RequestError(Exception):
    """A request the server answers with an OpenAI-shaped error."""

    def __init__(self, status: int, message: str, code: str | None, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.error_type = "invalid_request_error" if status < 500 else "server_error"


@dataclass
class _Plan:
    """What one chat completion answers: its streamed deltas, one per output token, and the totals."""

    deltas: list[dict[str, Any]]
    content: str | None
    tool_calls: list[dict[str, Any]] | None
    finish_reason: str
    reasoning_tokens: int
    tool_names: list[str] = field(default_factory=list)


def _stable_int(*parts: object) -> int:
    """A seed from the parts that is the same in every process (``hash()`` is salted per process)."""
    digest = hashlib.sha256("\x1f".join(repr(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big")


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _text_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def _content_text(content: Any) -> str:
    """The text of a message's ``content``: a string, or a list of parts of which the text ones count."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            part["text"] for part in content if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def _message_tokens(message: Mapping[str, Any]) -> int:
    # 3 tokens of chat-format overhead per message, as OpenAI's own accounting has.
    text = str(message.get("role", "")) + _content_text(message.get("content"))
    for call in message.get("tool_calls") or []:
        if isinstance(call, dict):
            function = call.get("function")
            if not isinstance(function, dict):
                function = {}
            text += str(call.get("id", "")) + str(function.get("name", "")) + str(function.get("arguments", ""))
    for key in ("name", "tool_call_id"):
        if isinstance(message.get(key), str):
            text += message[key]
    return 3 + _text_tokens(text)


def _base_model(model: str) -> str:
    return _DATED_SUFFIX.sub("", model)


def _is_reasoning_model(model: str) -> bool:
    return bool(_REASONING_MODEL.match(_base_model(model)))


class _PrefixCache:
    """Which prompt prefixes each model has prefilled, bounded so a long-running server stays small."""

    def __init__(self, capacity: int = _CACHE_CAPACITY) -> None:
        self._seen: OrderedDict[bytes, None] = OrderedDict()
        self._capacity = capacity
        self._lock = threading.Lock()

    @staticmethod
    def prefixes(model: str, tools: Any, messages: list[dict[str, Any]]) -> list[tuple[bytes, int]]:
        """(key, tokens) for each whole-message prefix, shortest first; tools come first in the prompt."""
        digest = hashlib.sha256(_canonical([_base_model(model), tools]).encode()).digest()
        tokens = _text_tokens(_canonical(tools)) if tools else 0
        out = []
        for message in messages:
            digest = hashlib.sha256(digest + _canonical(message).encode()).digest()
            tokens += _message_tokens(message)
            out.append((digest, tokens))
        return out

    def cached_tokens(self, prefixes: list[tuple[bytes, int]]) -> int:
        with self._lock:
            for key, tokens in reversed(prefixes):
                if key in self._seen:
                    self._seen.move_to_end(key)
                    if tokens < _CACHE_MIN_TOKENS:
                        return 0
                    return tokens - tokens % _CACHE_GRANULARITY
        return 0

    def remember(self, prefixes: list[tuple[bytes, int]]) -> None:
        with self._lock:
            for key, _ in prefixes:
                self._seen[key] = None
                self._seen.move_to_end(key)
            while len(self._seen) > self._capacity:
                self._seen.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()


# --- argument generation from JSON schema -------------------------------------------------------------


def _resolve_ref(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = schema.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return schema
    node: Any = root
    for part in ref[2:].split("/"):
        node = node.get(part) if isinstance(node, Mapping) else None
    return node if isinstance(node, Mapping) else {}


def _string_value(name: str, schema: Mapping[str, Any], rng: random.Random, topic: list[str]) -> str:
    key = name.lower()
    fmt = schema.get("format")
    if fmt == "date":
        return "2024-07-18"
    if fmt == "date-time":
        return "2024-07-18T09:30:00Z"
    if fmt in ("uri", "url") or "url" in key or "link" in key:
        return f"https://example.com/{rng.choice(_VOCABULARY)}"
    if fmt == "email" or "email" in key:
        return "ada@example.com"
    if any(word in key for word in ("city", "location", "place", "destination")):
        return rng.choice(_CITIES)
    if any(word in key for word in ("query", "question", "topic", "search", "prompt", "keyword", "text")) or key in (
        "q",
        "input",
    ):
        return " ".join(topic) if topic else " ".join(rng.choices(_VOCABULARY, k=3))
    if "name" in key or "author" in key:
        return rng.choice(_NAMES)
    if "path" in key or "file" in key:
        return f"notes/{rng.choice(_VOCABULARY)}.md"
    if key.endswith("id"):
        return f"id_{rng.getrandbits(32):08x}"
    if "lang" in key:
        return "en"
    if "unit" in key:
        return "celsius"
    return " ".join(rng.choices(_VOCABULARY, k=rng.randint(1, 3)))


def _number(value: Any, default: float) -> float:
    """A schema bound, or ``default`` when the schema gives none or nonsense (schemas come from clients)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return float(default)


def _schema_value(
    name: str, schema: Any, root: Mapping[str, Any], rng: random.Random, topic: list[str], depth: int = 0
) -> Any:
    """A plausible value for ``schema``: enums pick a member, strings look like their property name."""
    if not isinstance(schema, Mapping) or depth > 6:
        return None
    schema = _resolve_ref(schema, root)
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return rng.choice(schema["enum"])
    for combinator in ("anyOf", "oneOf", "allOf"):
        options = schema.get(combinator)
        if isinstance(options, list) and options:
            non_null = [o for o in options if not (isinstance(o, Mapping) and o.get("type") == "null")]
            return _schema_value(name, (non_null or options)[0], root, rng, topic, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else "string"
    if kind == "string":
        return _string_value(name, schema, rng, topic)
    if kind == "integer":
        low = int(_number(schema.get("minimum"), 1))
        high = max(low, int(_number(schema.get("maximum"), max(low, 10))))
        if any(word in name.lower() for word in ("limit", "count", "top", "max", "num")):
            return min(max(5, low), high)
        return rng.randint(low, high)
    if kind == "number":
        low_f = _number(schema.get("minimum"), 0.0)
        high_f = max(low_f, _number(schema.get("maximum"), low_f + 100))
        return round(rng.uniform(low_f, high_f), 2)
    if kind == "boolean":
        return True
    if kind == "array":
        count = min(max(1, int(_number(schema.get("minItems"), 1))), 5)
        return [_schema_value(name, schema.get("items", {}), root, rng, topic, depth + 1) for _ in range(count)]
    if kind == "object":
        return _object_value(schema, root, rng, topic, depth + 1)
    return None


def _object_value(
    schema: Mapping[str, Any], root: Mapping[str, Any], rng: random.Random, topic: list[str], depth: int = 0
) -> dict[str, Any]:
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return {}
    required = schema.get("required")
    # Models mostly fill in what is required and leave optional parameters out.
    names = [n for n in properties if n in required] if isinstance(required, list) else list(properties)
    return {n: _schema_value(n, properties[n], root, rng, topic, depth) for n in names}


def _tool_arguments(parameters: Any, rng: random.Random, topic: list[str] | None = None) -> dict[str, Any]:
    """Arguments for a tool with JSON-schema ``parameters``, as a model would write them."""
    if not isinstance(parameters, Mapping):
        return {}
    try:
        return _object_value(parameters, parameters, rng, topic or [])
    except (TypeError, ValueError, RecursionError):
        # A schema too odd to follow still gets a call; a real model would improvise too.
        return {}


# --- the "model" ----------------------------------------------------------------------------------------


def _answer_words(rng: random.Random, count: int, preamble: list[str]) -> list[str]:
    words = list(preamble)
    while len(words) < count:
        sentence: list[str] = []
        for slot in rng.choice(_TEMPLATES).split(" "):
            comma = slot.endswith(",")
            sentence.extend(rng.choice(_WORDS[slot.rstrip(",")]).split(" "))
            if comma:
                sentence[-1] += ","
        sentence[0] = sentence[0][0].upper() + sentence[0][1:]
        sentence[-1] += "."
        words.extend(sentence)
    words = words[:count]
    if words and words[-1][-1] not in ".,:;":
        words[-1] += "."
    return words


def _split_arguments(arguments: str) -> list[str]:
    """Argument JSON cut into token-sized fragments, the way OpenAI streams it."""
    parts = _ARGUMENT_TOKEN.findall(arguments)
    return parts if "".join(parts) == arguments else [arguments]


def _last_user_index(messages: list[dict[str, Any]]) -> int:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "user":
            return index
    return -1


class FakeOpenAIServer:
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

    @property
    def requests(self) -> list[dict[str, Any]]:
        """A snapshot of the request log, oldest first."""
        with self._lock:
            return [dict(entry) for entry in self._log]

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self._log)

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

    def _new_entry(self, method: str, path: str, traceparent: str | None) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "method": method,
            "path": path,
            "status": None,
            "model": None,
            "stream": False,
            "started": time.monotonic(),
            "first_token": None,
            "finished": None,
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "cached_tokens": 0,
            "reasoning_tokens": 0,
            "usage_sent": False,
            "finish_reason": None,
            "tool_calls": [],
            "inputs": 0,
            "traceparent": traceparent,
            "error": None,
            "aborted": False,
            "response_id": None,
        }
        with self._lock:
            self._log.append(entry)
        return entry

    def _update(self, entry: dict[str, Any], **values: Any) -> None:
        with self._lock:
            entry.update(values)

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

    def _plan_chat(self, body: Mapping[str, Any], messages: list[dict[str, Any]], ids: random.Random) -> _Plan:
        tools = [t for t in body.get("tools") or [] if isinstance(t, dict) and t.get("type", "function") == "function"]
        last_user = _last_user_index(messages)
        user_text = _content_text(messages[last_user].get("content")) if last_user >= 0 else ""
        after_user = messages[last_user + 1 :]
        content_rng = random.Random(_stable_int("content", self.seed, body.get("model"), _canonical(messages)))

        rounds_done = sum(1 for m in after_user if m.get("role") == "assistant" and m.get("tool_calls"))
        if not rounds_done and any(m.get("role") == "tool" for m in after_user):
            rounds_done = 1
        names = self._tools_to_call(body, tools, user_text, rounds_done)
        plan = (
            self._plan_tool_calls(names, tools, user_text, content_rng, ids)
            if names
            else self._plan_text(body, after_user, user_text, content_rng)
        )
        if _is_reasoning_model(body["model"]):
            # Hidden reasoning is about 30% of completion_tokens (which count it), as o-series usage shows.
            plan.reasoning_tokens = round(len(plan.deltas) * _REASONING_SHARE / (1 - _REASONING_SHARE))
        return plan

    def _plan_text(
        self, body: Mapping[str, Any], after_user: list[dict[str, Any]], user_text: str, content_rng: random.Random
    ) -> _Plan:
        match = _ANSWER_TOKENS_DIRECTIVE.search(user_text)
        count = int(match.group(1)) if match else self.default_answer_tokens
        count = max(1, count)
        finish_reason = "stop"
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        if isinstance(limit, int) and 0 < limit < count:
            count, finish_reason = limit, "length"
        used = [
            c["function"]["name"]
            for m in after_user
            for c in (m.get("tool_calls") or [])
            if isinstance(c, dict)
            and isinstance(c.get("function"), dict)
            and isinstance(c["function"].get("name"), str)
        ]
        preamble = []
        if used:
            # Answers after tool results say which tools they used, as agent transcripts do.
            preamble = ["I", "checked", *" and ".join(dict.fromkeys(used)).split(" ")]
            preamble[-1] += "."
        words = _answer_words(content_rng, count, preamble)
        tokens = [words[0]] + [" " + w for w in words[1:]]
        deltas = [{"content": token} for token in tokens]
        return _Plan(deltas, "".join(tokens), None, finish_reason, 0)

    def _tools_to_call(
        self, body: Mapping[str, Any], tools: list[dict[str, Any]], user_text: str, done: int
    ) -> list[str]:
        if not tools:
            return []
        choice = body.get("tool_choice")
        if choice == "none":
            return []
        if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
            forced = choice["function"].get("name")
            return [forced] if isinstance(forced, str) else []
        rounds = [
            [name.strip() for name in match.group(1).split(",") if name.strip()]
            for match in _CALL_DIRECTIVE.finditer(user_text)
        ]
        rounds = [r for r in rounds if r]
        default_name = str((tools[0].get("function") or {}).get("name", ""))
        if done < len(rounds):
            names = rounds[done]
        elif (not rounds and done == 0) or choice == "required":
            names = [default_name]
        else:
            return []
        if body.get("parallel_tool_calls") is False:
            names = names[:1]
        return names

    def _plan_tool_calls(
        self, names: list[str], tools: list[dict[str, Any]], user_text: str, rng: random.Random, ids: random.Random
    ) -> _Plan:
        schemas: dict[str, Any] = {}
        for tool in tools:
            function = tool.get("function")
            if isinstance(function, dict) and isinstance(function.get("name"), str):
                schemas.setdefault(function["name"], function.get("parameters"))
        topic = re.findall(r"[A-Za-z][A-Za-z'-]{2,}", _ANY_DIRECTIVE.sub(" ", user_text))[:5]
        calls: list[dict[str, Any]] = []
        deltas: list[dict[str, Any]] = []
        for index, name in enumerate(names):
            arguments = json.dumps(_tool_arguments(schemas.get(name), rng, topic))
            call_id = f"call_{ids.getrandbits(96):024x}"
            calls.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}})
            header: dict[str, Any] = {
                "index": index,
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": ""},
            }
            deltas.append({"tool_calls": [header]})
            deltas.extend(
                {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}
                for piece in _split_arguments(arguments)
            )
        return _Plan(deltas, None, calls, "tool_calls", 0, tool_names=list(names))

    def _ttft(self, model: str, uncached_prompt_tokens: int, reasoning_tokens: int) -> float:
        timing = self.timing_for(model)
        seconds = timing.ttft + uncached_prompt_tokens * timing.prefill_per_token
        return (seconds + reasoning_tokens * timing.decode_per_token) * self.time_scale

    def _decode(self, model: str) -> float:
        return self.timing_for(model).decode_per_token * self.time_scale


def _error_body(error: _RequestError) -> dict[str, Any]:
    return {"error": {"message": error.message, "type": error.error_type, "param": error.param, "code": error.code}}


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


class _Handler(BaseHTTPRequestHandler):
    """Routes one HTTP request to the fake model and writes the OpenAI-shaped answer."""

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

    # -- chat completions --

    def _chat_completions(self, entry: dict[str, Any]) -> None:
        fake = self.server.fake
        body = self._json_body()
        model, messages = body.get("model"), body.get("messages")
        stream = body.get("stream") is True
        fake._update(entry, model=model if isinstance(model, str) else None, stream=stream)
        if not isinstance(model, str) or not model:
            raise _RequestError(400, "you must provide a model parameter", "missing_required_parameter", "model")
        if messages is None:
            raise _RequestError(
                400, "Missing required parameter: 'messages'.", "missing_required_parameter", "messages"
            )
        if not isinstance(messages, list) or not messages:
            raise _RequestError(400, "'messages' must be a non-empty array.", "invalid_value", "messages")
        for index, message in enumerate(messages):
            self._check_message(index, message)
        tools = body.get("tools")
        if tools is not None and not isinstance(tools, list):
            raise _RequestError(400, "'tools' must be an array of objects.", "invalid_type", "tools")
        for index, tool in enumerate(tools or []):
            function = tool.get("function") if isinstance(tool, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str) or not function["name"]:
                raise _RequestError(
                    400,
                    f"Missing required parameter: 'tools[{index}].function.name'.",
                    "missing_required_parameter",
                    f"tools[{index}].function.name",
                )
        for key in ("max_tokens", "max_completion_tokens"):
            limit = body.get(key)
            if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
                raise _RequestError(400, f"Invalid '{key}': expected an integer >= 1.", "invalid_value", key)
        if fake.vllm_like is not None:
            self._serve_like_vllm(fake.vllm_like, entry, body, model, messages, tools)
        else:
            self._answer_chat(entry, body, model, messages, tools, entry["started"])

    def _serve_like_vllm(
        self,
        vllm: VllmLike,
        entry: dict[str, Any],
        body: dict[str, Any],
        model: str,
        messages: list[dict[str, Any]],
        tools: Any,
    ) -> None:
        """Queue for a slot in the batch, answer, then leave vLLM's span and metrics behind."""
        from .vllm_like import RequestTimes

        fake = self.server.fake
        times = RequestTimes(arrived=entry["started"], arrived_wall_ns=time.time_ns() - round(
            (time.monotonic() - entry["started"]) * 1e9
        ))  # fmt: skip
        prefixes = _PrefixCache.prefixes(model, tools, messages)
        prompt_tokens = prefixes[-1][1] + 3 if prefixes else 3
        try:
            times.admitted = vllm.admit(model, prompt_tokens, fake._stopping)
        except InterruptedError:
            raise _Stopping from None
        error: str | None = "aborted"
        try:
            self._answer_chat(entry, body, model, messages, tools, times.admitted)
            error = None
        finally:
            vllm.release(model, prompt_tokens)
            with fake._lock:
                times.first_token = entry["first_token"]
                times.finished = entry["finished"]
                times.prompt_tokens = entry["prompt_tokens"]
                times.cached_tokens = entry["cached_tokens"]
                times.completion_tokens = entry["completion_tokens"]
                if entry["aborted"]:
                    error = "aborted"
            vllm.record(
                model,
                times,
                traceparent=entry["traceparent"],
                request_id=entry["response_id"] or "",
                request=body,
                error=error,
            )

    def _answer_chat(
        self,
        entry: dict[str, Any],
        body: dict[str, Any],
        model: str,
        messages: list[dict[str, Any]],
        tools: Any,
        admitted: float,
    ) -> None:
        """Plan the answer and send it; prefill starts at ``admitted`` (later than arrival when queued)."""
        fake = self.server.fake
        stream = body.get("stream") is True
        ids = fake._next_id_rng()
        plan = fake._plan_chat(body, messages, ids)
        prefixes = _PrefixCache.prefixes(model, tools, messages)
        prompt_tokens = prefixes[-1][1] + 3 if prefixes else 3
        cached = fake._cache.cached_tokens(prefixes)
        completion_tokens = len(plan.deltas) + plan.reasoning_tokens
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": plan.reasoning_tokens,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }
        fake._update(
            entry,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cached_tokens=cached,
            reasoning_tokens=plan.reasoning_tokens,
            tool_calls=plan.tool_names,
            finish_reason=plan.finish_reason,
        )
        response_model = model if _DATED_SUFFIX.search(model) else _SNAPSHOTS.get(model, model)
        common = {
            "id": "chatcmpl-" + "".join(ids.choices(string.ascii_letters + string.digits, k=29)),
            "created": int(time.time()),
            "model": response_model,
            "service_tier": "default",
            "system_fingerprint": f"fp_{_stable_int('fp', response_model) % 16**10:010x}",
        }
        fake._update(entry, response_id=common["id"])
        first_token_at = admitted + fake._ttft(model, prompt_tokens - cached, plan.reasoning_tokens)
        decode = fake._decode(model)
        include_usage = isinstance(body.get("stream_options"), dict) and body["stream_options"].get("include_usage")
        fake._update(entry, usage_sent=bool(include_usage) or not stream)
        if stream:
            self._stream_chat(entry, plan, common, usage, prefixes, first_token_at, decode, bool(include_usage))
        else:
            self._complete_chat(entry, plan, common, usage, prefixes, first_token_at, decode)

    @staticmethod
    def _check_message(index: int, message: Any) -> None:
        where = f"messages[{index}]"
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise _RequestError(400, f"Invalid value for '{where}': expected an object with a 'role'.", "invalid_value")
        if not isinstance(message.get("content"), (str, list, type(None))):
            raise _RequestError(
                400, f"Invalid type for '{where}.content': expected a string or an array.", "invalid_type"
            )
        calls = message.get("tool_calls")
        if calls is None:
            return
        ok = isinstance(calls, list) and all(
            isinstance(call, dict)
            and isinstance(call.get("function"), dict)
            and isinstance(call["function"].get("name"), str)
            and isinstance(call["function"].get("arguments", ""), str)
            for call in calls
        )
        if not ok:
            raise _RequestError(
                400,
                f"Invalid value for '{where}.tool_calls': expected an array of function calls.",
                "invalid_value",
                f"{where}.tool_calls",
            )

    def _complete_chat(
        self,
        entry: dict[str, Any],
        plan: _Plan,
        common: dict[str, Any],
        usage: dict[str, Any],
        prefixes: list[tuple[bytes, int]],
        first_token_at: float,
        decode: float,
    ) -> None:
        fake = self.server.fake
        fake._sleep_until(first_token_at)
        fake._cache.remember(prefixes)
        # Decoding starts when the first token really came: a late start never makes the tokens faster.
        first_token = time.monotonic()
        fake._update(entry, first_token=first_token)
        fake._sleep_until(first_token + len(plan.deltas) * decode)
        message: dict[str, Any] = {"role": "assistant", "content": plan.content, "refusal": None, "annotations": []}
        if plan.tool_calls:
            message["tool_calls"] = plan.tool_calls
        payload = {
            **common,
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": plan.finish_reason}],
            "usage": usage,
        }
        elapsed_ms = round((time.monotonic() - entry["started"]) * 1000)
        # Logged before the bytes leave: a client that has its answer must find the request complete.
        fake._update(entry, status=200, finished=time.monotonic())
        self._send_json(200, payload, {"openai-processing-ms": str(elapsed_ms)})

    def _stream_chat(
        self,
        entry: dict[str, Any],
        plan: _Plan,
        common: dict[str, Any],
        usage: dict[str, Any],
        prefixes: list[tuple[bytes, int]],
        first_token_at: float,
        decode: float,
        include_usage: bool,
    ) -> None:
        fake = self.server.fake
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("x-request-id", f"req_{uuid.uuid4().hex}")
        self.end_headers()
        fake._update(entry, status=200)
        # With include_usage every chunk carries "usage": null until the last one, as OpenAI's do.
        base = {**common, "object": "chat.completion.chunk", **({"usage": None} if include_usage else {})}

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            return {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]}

        fake._sleep_until(first_token_at)
        fake._cache.remember(prefixes)
        # Decoding starts when the first token really came: a late start never makes the tokens faster.
        first_token = time.monotonic()
        fake._update(entry, first_token=first_token)
        for position, delta in enumerate(plan.deltas):
            if position == 0:
                if "content" in delta:
                    self._send_event(chunk({"role": "assistant", "content": "", "refusal": None}))
                else:
                    delta = {"role": "assistant", "content": None, **delta}
            else:
                fake._sleep_until(first_token + position * decode)
            self._send_event(chunk(delta))
        fake._sleep_until(first_token + len(plan.deltas) * decode)
        self._send_event(chunk({}, plan.finish_reason))
        if include_usage:
            self._send_event({**base, "choices": [], "usage": usage})
        fake._update(entry, finished=time.monotonic())
        self._write_chunk(b"data: [DONE]\n\n")
        self._write_chunk(b"")

    # -- embeddings --

    def _embeddings(self, entry: dict[str, Any]) -> None:
        fake = self.server.fake
        body = self._json_body()
        model, raw_input = body.get("model"), body.get("input")
        fake._update(entry, model=model if isinstance(model, str) else None)
        if not isinstance(model, str) or not model:
            raise _RequestError(400, "you must provide a model parameter", "missing_required_parameter", "model")
        inputs = self._embedding_inputs(raw_input)
        dimensions = body.get("dimensions", fake.embedding_dimensions)
        if not isinstance(dimensions, int) or isinstance(dimensions, bool) or not 1 <= dimensions <= 8192:
            raise _RequestError(400, "Invalid 'dimensions': expected an integer from 1 to 8192.", "invalid_value")
        encoding = body.get("encoding_format") or "float"
        if encoding not in ("float", "base64"):
            raise _RequestError(400, "Invalid 'encoding_format': use 'float' or 'base64'.", "invalid_value")
        tokens = sum(max(1, _text_tokens(text)) for text in inputs)
        fixed, per_token = _EMBEDDING_MODELS.get(_base_model(model), _EMBEDDING_MODELS["text-embedding-3-small"])
        fake._update(entry, prompt_tokens=tokens, inputs=len(inputs))
        fake._sleep_until(entry["started"] + (fixed + per_token * tokens) * fake.time_scale)
        data = []
        for index, text in enumerate(inputs):
            vector = _embedding(fake.seed, model, text, dimensions)
            embedding: Any = vector
            if encoding == "base64":
                embedding = base64.b64encode(struct.pack(f"<{dimensions}f", *vector)).decode()
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        payload = {
            "object": "list",
            "data": data,
            "model": model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
        fake._update(entry, status=200, finished=time.monotonic())
        self._send_json(200, payload)

    @staticmethod
    def _embedding_inputs(raw: Any) -> list[str]:
        if isinstance(raw, str):
            return [raw]
        if isinstance(raw, list) and raw:
            # Token arrays are accepted like OpenAI does; their text is just the numbers.
            if all(isinstance(x, int) for x in raw):
                return [" ".join(map(str, raw))]
            if all(isinstance(x, str) for x in raw):
                return list(raw)
            if all(isinstance(x, list) and all(isinstance(t, int) for t in x) for x in raw):
                return [" ".join(map(str, x)) for x in raw]
        raise _RequestError(
            400, "'input' must be a string, an array of strings, or token arrays.", "invalid_value", "input"
        )


def _embedding(seed: int, model: str, text: str, dimensions: int) -> list[float]:
    """A unit vector that depends only on (seed, model, text)."""
    rng = random.Random(_stable_int("embedding", seed, _base_model(model), text))
    vector = [rng.gauss(0.0, 1.0) for _ in range(dimensions)]
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


def main(argv: list[str] | None = None) -> int:
    """Serve until interrupted: ``python -m demo.fake_llm --port 0``."""
    parser = argparse.ArgumentParser(description="Fake OpenAI-compatible LLM server on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=0, help="port to bind on 127.0.0.1 (0: any free port)")
    parser.add_argument("--time-scale", type=float, default=1.0, help="multiply every delay by this")
    parser.add_argument("--seed", type=int, default=0, help="seed for generated text and arguments")
    parser.add_argument(
        "--vllm-like",
        action="store_true",
        help="behave like vLLM: a bounded batch (requests queue), llm_request server spans, GET /metrics",
    )
    parser.add_argument("--max-running", type=int, default=2, help="with --vllm-like: requests run at once")
    parser.add_argument(
        "--otlp-traces-endpoint",
        metavar="URL",
        help="with --vllm-like: export the server spans over OTLP/gRPC to URL (as vLLM's flag of that name)",
    )
    args = parser.parse_args(argv)
    vllm_like = None
    if args.vllm_like:
        from .vllm_like import VllmLike

        vllm_like = VllmLike(max_running=args.max_running, otlp_endpoint=args.otlp_traces_endpoint)
    server = FakeOpenAIServer(
        port=args.port, time_scale=args.time_scale, seed=args.seed, vllm_like=vllm_like
    ).start()
    # SIGTERM (what a test harness sends) should shut down as cleanly as Ctrl-C.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    print(server.base_url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        if vllm_like is not None:
            vllm_like.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

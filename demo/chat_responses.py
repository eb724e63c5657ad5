"""How the fake LLM server answers a chat completion: timing, usage, and the plain or streamed response.

``_ChatResponses._answer_chat`` plans the answer, counts prompt, cached and completion tokens, and then
either waits out the whole call and sends one ``chat.completion`` or streams ``chat.completion.chunk``
server-sent events token by token (with ``stream_options.include_usage`` a last chunk with the usage). The
first token comes after the model's time to first token (prefill of uncached tokens included), and it is
then that the prompt's prefixes enter the prefix cache.
"""

from __future__ import annotations

import string
import time
import uuid
from typing import Any

from .http_transport import _HTTPHandlerBase
from .model_catalog import _DATED_SUFFIX, _SNAPSHOTS
from .prefix_cache import _PrefixCache
from .prompt_tokens import _stable_int
from .scripted_chat import _Plan


class _ChatResponses(_HTTPHandlerBase):
    """Builds and sends chat completion responses, plain and streamed."""

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

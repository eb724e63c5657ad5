"""How the fake LLM server takes a chat completion request: validation, then (vLLM-like) queueing.

``_ChatRequests._chat_completions`` checks the body the way OpenAI does (model, messages and their tool calls,
tools, token limits) and answers with OpenAI's error messages and codes; a valid request goes to
``demo.chat_responses``, in the vLLM-like mode only after it was admitted to the batch, and then leaves
vLLM's server span and metrics behind (``demo.vllm_like``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from .chat_responses import _ChatResponses
from .prefix_cache import _PrefixCache
from .request_errors import _RequestError, _Stopping

if TYPE_CHECKING:
    from .vllm_like import VllmLike


class _ChatRequests(_ChatResponses):
    """The ``POST /v1/chat/completions`` endpoint: validates the request, then answers it."""

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

"""The fake LLM server's "model": what one chat completion answers, scripted by the request.

``_ScriptedChatModel._plan_chat`` decides between tool calls and text (the ``[[call: ...]]`` and
``[[answer_tokens: N]]`` directives, ``tool_choice``, ``parallel_tool_calls``, ``max_tokens``) and returns a
``_Plan``: the streamed deltas, one per output token, and the totals, including the hidden reasoning tokens
of ``o*`` models. The server class mixes it in; the plan is deterministic for a given request and seed.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .model_catalog import _is_reasoning_model
from .plausible_text import _answer_words
from .prompt_tokens import _canonical, _content_text, _stable_int
from .tool_arguments import _tool_arguments

_REASONING_SHARE = 0.3

_CALL_DIRECTIVE = re.compile(r"\[\[\s*call\s*:\s*([^\]]*)\]\]", re.IGNORECASE)
_ANSWER_TOKENS_DIRECTIVE = re.compile(r"\[\[\s*answer_tokens\s*:\s*(\d+)\s*\]\]", re.IGNORECASE)
_ANY_DIRECTIVE = re.compile(r"\[\[[^\]]*\]\]")
_ARGUMENT_TOKEN = re.compile(r"\s*(?:\w+|[^\w\s]+)")


@dataclass
class _Plan:
    """What one chat completion answers: its streamed deltas, one per output token, and the totals."""

    deltas: list[dict[str, Any]]
    content: str | None
    tool_calls: list[dict[str, Any]] | None
    finish_reason: str
    reasoning_tokens: int
    tool_names: list[str] = field(default_factory=list)


def _split_arguments(arguments: str) -> list[str]:
    """Argument JSON cut into token-sized fragments, the way OpenAI streams it."""
    parts = _ARGUMENT_TOKEN.findall(arguments)
    return parts if "".join(parts) == arguments else [arguments]


def _last_user_index(messages: list[dict[str, Any]]) -> int:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "user":
            return index
    return -1


class _ScriptedChatModel:
    """Plans chat completions for ``FakeOpenAIServer``, from its ``seed`` and ``default_answer_tokens``."""

    seed: int
    default_answer_tokens: int

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

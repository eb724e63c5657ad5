"""How the fake LLM server counts prompt tokens and derives stable seeds from a request.

Token counts are about a quarter of the characters (plus 3 per message for the chat format), computed on
the canonical JSON of messages and tools; the same canonical form and ``_stable_int`` make every generated
answer, id and embedding the same in every process for the same request and seed.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any


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

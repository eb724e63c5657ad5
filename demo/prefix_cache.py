"""The fake LLM server's prompt prefix cache, which behaves like OpenAI's.

``_PrefixCache`` remembers every prompt prefix (tools, then whole messages) a model has prefilled and
reports the longest remembered one as cached tokens, rounded down to 64 and 0 under 1024, so repeated long
system prompts get ``cached_tokens`` and a shorter time to first token. It is bounded (least recently used
prefixes go first) so a long-running server stays small.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any

from .model_catalog import _base_model
from .prompt_tokens import _canonical, _message_tokens, _text_tokens

_CACHE_MIN_TOKENS = 1024
_CACHE_GRANULARITY = 64
_CACHE_CAPACITY = 50_000


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

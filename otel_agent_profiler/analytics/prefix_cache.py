"""Prompt-prefix caching candidates: long prompt beginnings that several LLM calls share.

Providers cache a prompt's prefix (OpenAI from 1,024 tokens); calls that repeat a long shared
beginning (a system prompt, tool definitions, a document) pay for it once when it is cached.
This finds such shared prefixes per model, from the prompt content the instrumentation
captured, and says how many input tokens they would spare beyond what was already cached.

It runs only when asked for (prompt content is sensitive) and only on spans that carry
content: ``gen_ai.input.messages`` (GenAI), ``input.value`` (OpenInference) or the older
``gen_ai.prompt.N.content`` attributes. Nothing is computed for spans without them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ..core.categories import LLM
from ..core.profile import TraceProfile

#: Characters per token, for estimates (English text with the common tokenizers).
CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class PrefixCandidate:
    """A prompt beginning shared by several calls to one model."""

    model: str
    calls: int
    prefix_chars: int
    #: The shared text's first characters, to recognise it (never the whole prompt).
    preview: str
    #: Input tokens the calls sent that the shared prefix accounts for, after the first call.
    repeated_tokens: int
    #: Input tokens the provider reported as already cached for these calls.
    cached_tokens: int
    span_ids: tuple[str, ...]

    @property
    def prefix_tokens(self) -> int:
        return self.prefix_chars // CHARS_PER_TOKEN

    @property
    def uncached_repeated_tokens(self) -> int:
        """What caching this prefix could still spare."""
        return max(0, self.repeated_tokens - self.cached_tokens)

    def to_dict(self) -> dict[str, Any]:
        document = asdict(self)
        document["span_ids"] = list(self.span_ids)
        document["prefix_tokens"] = self.prefix_tokens
        document["uncached_repeated_tokens"] = self.uncached_repeated_tokens
        return document


def prompt_text(attributes: Mapping[str, Any]) -> str | None:
    """The prompt content a span captured, as one string, or None when it has none."""
    for key in ("gen_ai.input.messages", "input.value"):
        value = attributes.get(key)
        if isinstance(value, str) and value:
            return value
    parts = []
    index = 0
    while (content := attributes.get(f"gen_ai.prompt.{index}.content")) is not None:
        parts.append(f"{attributes.get(f'gen_ai.prompt.{index}.role', '')}:{content}")
        index += 1
    return "\n".join(parts) if parts else None


def _common_prefix_length(a: str, b: str) -> int:
    # Character-wise on purpose (these are prompts, not paths): commonprefix does it at C speed.
    return len(os.path.commonprefix([a, b]))  # noqa: RUF071


def prefix_cache_candidates(
    profiles: Iterable[TraceProfile], *, min_prefix_tokens: int = 1024, min_calls: int = 2
) -> list[PrefixCandidate]:
    """Shared prompt prefixes per model, largest uncached repetition first.

    Prompts of one model are sorted; neighbours' common prefixes then group the calls that share
    a beginning (the same result as a character trie, in O(n log n) comparisons). A group is a
    candidate when at least ``min_calls`` calls share at least ``min_prefix_tokens`` tokens.
    """
    min_chars = min_prefix_tokens * CHARS_PER_TOKEN
    by_model: dict[str, list[tuple[str, str, int, int]]] = {}
    for profile in profiles:
        for span in profile.spans:
            if span.category != LLM or not span.counted:
                continue
            text = prompt_text(span.record.attributes)
            if text is None or len(text) < min_chars:
                continue
            cached = span.tokens.cached_input if span.tokens is not None else 0
            inputs = span.tokens.input if span.tokens is not None else len(text) // CHARS_PER_TOKEN
            by_model.setdefault(span.model or span.operation, []).append((text, span.span_id, cached, inputs))

    candidates = []
    for model, calls in by_model.items():
        calls.sort()
        group = [calls[0]]
        shared: int | None = None
        for current in calls[1:]:
            common = _common_prefix_length(group[-1][0], current[0])
            if common >= min_chars:
                group.append(current)
                shared = common if shared is None else min(shared, common)
                continue
            if shared is not None and len(group) >= min_calls:
                candidates.append(_candidate(model, group, shared))
            group, shared = [current], None
        if shared is not None and len(group) >= min_calls:
            candidates.append(_candidate(model, group, shared))
    candidates.sort(key=lambda c: (-c.uncached_repeated_tokens, -c.calls, c.model))
    return candidates


def _candidate(model: str, group: list[tuple[str, str, int, int]], shared_chars: int) -> PrefixCandidate:
    prefix_tokens = shared_chars // CHARS_PER_TOKEN
    return PrefixCandidate(
        model=model,
        calls=len(group),
        prefix_chars=shared_chars,
        preview=group[0][0][:80],
        repeated_tokens=prefix_tokens * (len(group) - 1),
        cached_tokens=sum(min(cached, prefix_tokens) for _, _, cached, _ in group),
        span_ids=tuple(span_id for _, span_id, _, _ in group),
    )

"""What a finding may say about a call's model: its provider, whether its prompt is long enough for
the provider's prefix cache, and which cheaper models of its own line the price table knows.

Advice rests on these facts rather than on a guess: prefix caching is only discussed for prompts
the provider could cache, and a smaller model only suggested when one of the same line is priced.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache

from .models import model_family
from .pricing import BUILT_IN_PRICES, ModelPrice
from .records import AttributeValue

OPENAI = "openai"
ANTHROPIC = "anthropic"

#: Attributes naming the provider, in the GenAI (current and older), OpenInference and Traceloop conventions.
_PROVIDER_KEYS = ("gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system")

# OpenAI's model names: gpt-4o, gpt-4.1-mini, o1, o3-mini, chatgpt-4o-latest.
_OPENAI_MODEL = re.compile(r"^(gpt-|chatgpt-|o\d)")


def provider_of(attributes: Mapping[str, AttributeValue], model: str | None) -> str | None:
    """The provider that served a call: the one its span names, else the one its model's name
    tells (``gpt-*`` and ``o*`` are OpenAI's, ``claude*`` Anthropic's), else None."""
    for key in _PROVIDER_KEYS:
        value = attributes.get(key)
        if isinstance(value, str) and value:
            return value.lower()
    if model is None:
        return None
    name = model_family(model).lower()
    if "claude" in name:
        return ANTHROPIC
    if _OPENAI_MODEL.match(name):
        return OPENAI
    return None


# The shortest prompt each provider's prefix cache serves. OpenAI caches prompts of 1,024 tokens
# or more (https://platform.openai.com/docs/guides/prompt-caching). Anthropic's minimum depends on
# the model: 1,024 tokens for most, 2,048 for Claude Haiku 3 and 3.5 and Sonnet 4.6, 4,096 for
# Claude Haiku 4.5 and Opus 4.5 and 4.6
# (https://platform.claude.com/docs/en/build-with-claude/prompt-caching#cache-limitations).
OPENAI_CACHING_MINIMUM = 1024
ANTHROPIC_CACHING_MINIMUM = 1024
#: Anthropic models with a larger minimum, by a part of the model's name.
ANTHROPIC_CACHING_MINIMUMS: Mapping[str, int] = {
    "haiku-4-5": 4096,
    "opus-4-5": 4096,
    "opus-4-6": 4096,
    "sonnet-4-6": 2048,
    "3-5-haiku": 2048,
    "3-haiku": 2048,
}


def caching_minimum(model: str | None) -> int | None:
    """The fewest input tokens a prompt to ``model`` needs before the provider's prefix cache can
    serve any of it; None when the model's provider is not one whose minimum is known."""
    if model is None:
        return None
    name = model_family(model).lower()
    if "claude" in name:
        for part, minimum in ANTHROPIC_CACHING_MINIMUMS.items():
            if part in name:
                return minimum
        return ANTHROPIC_CACHING_MINIMUM
    if _OPENAI_MODEL.match(name):
        return OPENAI_CACHING_MINIMUM
    return None


# Claude's sizes are words inside the name (claude-haiku-4-5, claude-3-5-sonnet); OpenAI's smaller
# models add a suffix to their line's name (gpt-4o-mini, gpt-4.1-nano).
_CLAUDE_SIZES = frozenset({"haiku", "sonnet", "opus"})
_SMALLER_SUFFIXES = ("-mini", "-nano")


@lru_cache(maxsize=4096)
def model_line(model: str) -> str:
    """The line a model belongs to, whatever its size: ``gpt-4o`` for ``gpt-4o-mini``, ``claude-4-5``
    for ``claude-haiku-4-5`` and ``claude-sonnet-4-5``, the model's family otherwise."""
    name = model_family(model).lower()
    if name.startswith("claude"):
        return "-".join(part for part in name.split("-") if part not in _CLAUDE_SIZES)
    for suffix in _SMALLER_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def cheaper_models(model: str, prices: Mapping[str, ModelPrice] = BUILT_IN_PRICES) -> list[str]:
    """The models of ``model``'s own line that ``prices`` prices lower for input and output tokens
    alike, the closest in price first; none when ``model`` has no price or no cheaper sibling."""
    if prices is BUILT_IN_PRICES:
        # Asked for each bottleneck of every trace: the built-in table's answers are kept.
        return list(_cheaper_built_in(model))
    return _cheaper(model, prices)


@lru_cache(maxsize=4096)
def _cheaper_built_in(model: str) -> tuple[str, ...]:
    return tuple(_cheaper(model, BUILT_IN_PRICES))


def _cheaper(model: str, prices: Mapping[str, ModelPrice]) -> list[str]:
    family = model_family(model)
    own = prices.get(model) or prices.get(family)
    if own is None:
        return []
    line = model_line(model)
    cheaper = [
        (price.input, price.output, name)
        for name, price in prices.items()
        if model_family(name) != family
        and model_line(name) == line
        and price.input < own.input
        and price.output <= own.output
    ]
    return [name for _, _, name in sorted(cheaper, reverse=True)]

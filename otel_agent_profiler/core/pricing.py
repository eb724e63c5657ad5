"""Cost of LLM calls from a user's price table.

Prices are US dollars per million tokens, per model. Cached input tokens are priced at the
``cached_input`` rate (the ``input`` rate when none is given); reasoning tokens are output
tokens, as providers bill them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .genai import TokenUsage, strip_snapshot
from .json_tables import json_table
from .price_sources import (
    BUILT_IN_PRICES_AS_OF as BUILT_IN_PRICES_AS_OF,
    BUILT_IN_PRICES_SOURCES as BUILT_IN_PRICES_SOURCES,
)

_PER_TOKEN = 1e-6


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """US dollars per million tokens."""

    input: float
    output: float
    cached_input: float | None = None

    def cost_usd(self, usage: TokenUsage) -> float:
        cached = min(usage.cached_input, usage.input)
        cached_rate = self.input if self.cached_input is None else self.cached_input
        return ((usage.input - cached) * self.input + cached * cached_rate + usage.output * self.output) * _PER_TOKEN


class PriceTable:
    """Model prices, looked up by exact model name, then by the name without a snapshot date."""

    def __init__(self, prices: Mapping[str, ModelPrice]) -> None:
        self._prices = dict(prices)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, object]) -> PriceTable:
        """Build from ``{"model": {"input": 2.5, "output": 10, "cached_input": 1.25}}``.

        Raises ``ValueError`` naming the model and field when an entry is not usable.
        """
        prices: dict[str, ModelPrice] = {}
        for model, entry in raw.items():
            if not isinstance(entry, Mapping):
                raise ValueError(f"price of {model!r} must be an object with input and output prices per 1M tokens")
            unknown = set(entry) - {"input", "output", "cached_input"}
            if unknown:
                raise ValueError(f"price of {model!r} has unknown fields: {', '.join(sorted(unknown))}")
            values: dict[str, float | None] = {}
            for name in ("input", "output", "cached_input"):
                value = entry.get(name)
                if value is None:
                    if name != "cached_input":
                        raise ValueError(f"price of {model!r} lacks {name!r} (US dollars per 1M tokens)")
                    values[name] = None
                    continue
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                    raise ValueError(f"price {name!r} of {model!r} must be a number, got {value!r}")
                if value < 0:
                    raise ValueError(f"price {name!r} of {model!r} must not be negative, got {value!r}")
                values[name] = float(value)
            prices[model] = ModelPrice(values["input"] or 0.0, values["output"] or 0.0, values["cached_input"])
        return cls(prices)

    def __len__(self) -> int:
        return len(self._prices)

    def __eq__(self, other: object) -> bool:
        # By content: two configurations with the same prices are the same configuration.
        return isinstance(other, PriceTable) and self._prices == other._prices

    __hash__ = None  # type: ignore[assignment]  # mutable-looking content; equal tables must not differ in hash

    def price_of(self, model: str | None) -> ModelPrice | None:
        if model is None:
            return None
        price = self._prices.get(model)
        if price is None:
            price = self._prices.get(strip_snapshot(model))
        return price

    def cost_usd(self, model: str | None, usage: TokenUsage) -> float | None:
        """The cost of ``usage`` on ``model``, or None when the model has no price."""
        price = self.price_of(model)
        return None if price is None else price.cost_usd(usage)


def parse_prices(value: object) -> PriceTable:
    """A price table from a mapping, JSON text (starting with ``{``) or the path of a JSON file.

    The format of ``OTEL_AGENT_PROFILER_PRICES`` and of the command line's ``--prices``:
    ``{"gpt-4o": {"input": 2.5, "output": 10, "cached_input": 1.25}}``, US dollars per million
    tokens. Raises ``ValueError`` saying what is wrong (an unreadable file, bad JSON, a bad entry).
    """
    if isinstance(value, PriceTable):
        return value
    if isinstance(value, Mapping):
        return PriceTable.from_mapping(value)
    if isinstance(value, (str, Path)):
        return PriceTable.from_mapping(json_table(value, "price table", "prices"))
    raise ValueError(f"expected a price table (mapping, JSON text or file path), got {type(value).__name__}")


#: List prices (standard tier, no batch discount) of common models, US dollars per million tokens,
#: as of :data:`BUILT_IN_PRICES_AS_OF`. The commands, ``serve`` and the in-process profiler use them
#: unless ``--prices``, ``OTEL_AGENT_PROFILER_PRICES`` or the ``prices`` option prices the model; a
#: dated snapshot ("gpt-4o-2024-08-06") gets its alias's price. Anthropic's cache writes cost more
#: than plain input; that surcharge is not modelled (cached input here is the cache-read rate).
BUILT_IN_PRICES: Mapping[str, ModelPrice] = {
    "gpt-4o": ModelPrice(2.50, 10.00, 1.25),
    "gpt-4o-mini": ModelPrice(0.15, 0.60, 0.075),
    "gpt-4.1": ModelPrice(2.00, 8.00, 0.50),
    "gpt-4.1-mini": ModelPrice(0.40, 1.60, 0.10),
    "gpt-4.1-nano": ModelPrice(0.10, 0.40, 0.025),
    "gpt-5": ModelPrice(1.25, 10.00, 0.125),
    "gpt-5-mini": ModelPrice(0.25, 2.00, 0.025),
    "text-embedding-3-small": ModelPrice(0.02, 0.0),
    "text-embedding-3-large": ModelPrice(0.13, 0.0),
    "claude-opus-4-1": ModelPrice(15.00, 75.00, 1.50),
    "claude-opus-4-5": ModelPrice(5.00, 25.00, 0.50),
    "claude-sonnet-4": ModelPrice(3.00, 15.00, 0.30),
    "claude-sonnet-4-5": ModelPrice(3.00, 15.00, 0.30),
    "claude-haiku-4-5": ModelPrice(1.00, 5.00, 0.10),
    "claude-3-5-haiku": ModelPrice(0.80, 4.00, 0.08),
}


def with_built_in_prices(user: PriceTable | None) -> PriceTable:
    """The built-in prices with ``user``'s on top: a model ``user`` prices gets the user's price.

    What every command, ``serve`` and the in-process profiler price with. An empty ``user`` table
    (``{}``) prices nothing: the one way to turn pricing off, since leaving prices out means the
    built-in ones.
    """
    if user is None:
        return PriceTable(BUILT_IN_PRICES)
    if not len(user):
        return user
    return PriceTable({**BUILT_IN_PRICES, **user._prices})

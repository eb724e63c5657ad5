"""What decides a live profile, besides the spans: category overrides, prices and context windows.

The plugin (``plugin/config.py``, from arguments and ``OTEL_AGENT_PROFILER_*`` variables) and
``serve`` (from its command line and the same variables) both build a ``ProfileOptions``, so the
same settings give the same profile wherever the spans are profiled.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.analyze import Classifier
from ..core.categories import CATEGORIES, CATEGORY_OVERRIDE_ATTRIBUTE, classify
from ..core.findings.base import DEFAULT_CONTEXT_WINDOWS
from ..core.key_value_text import split_pairs
from ..core.pricing import PriceTable
from ..core.records import AttributeValue

#: ``(span-name pattern, category)`` pairs, first match wins.
CategoryOverrides = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ProfileOptions:
    """The settings of the analysis the live profiling step runs.

    Attributes:
        classifier: decides each span's category (``make_classifier`` applies overrides).
        prices: the price table for the cost of LLM and embedding calls; None prices nothing.
        context_windows: model -> context window in tokens, for ``agent_profiler.context_window_use``.
    """

    classifier: Classifier = classify
    prices: PriceTable | None = None
    context_windows: Mapping[str, int] = field(default_factory=lambda: DEFAULT_CONTEXT_WINDOWS)


def make_classifier(overrides: CategoryOverrides) -> Classifier:
    """A classifier that applies span-name patterns before the conventions."""
    if not overrides:
        return classify
    matchers = [(re.compile(fnmatch.translate(pattern)).match, category) for pattern, category in overrides]

    def classify_with_overrides(name: str, attributes: Mapping[str, AttributeValue]) -> str:
        explicit = attributes.get(CATEGORY_OVERRIDE_ATTRIBUTE)
        if isinstance(explicit, str) and explicit in CATEGORIES:
            return explicit
        for match, category in matchers:
            if match(name):
                return category
        return classify(name, attributes)

    return classify_with_overrides


def parse_category_overrides(value: Any) -> CategoryOverrides:
    """``pattern=category,...`` text (the format of ``OTEL_AGENT_PROFILER_CATEGORY_OVERRIDES``), a
    mapping or pairs, as overrides; raises ``ValueError`` saying what is wrong."""
    if isinstance(value, str):
        pairs = split_pairs(value, "pattern=category items", split_at_last_equals=True)
    elif isinstance(value, Mapping):
        pairs = [(str(k), str(v)) for k, v in value.items()]
    else:
        try:
            pairs = [(str(pattern), str(category)) for pattern, category in value]
        except (TypeError, ValueError):
            raise ValueError(f"expected a mapping of span-name patterns to categories, got {value!r}") from None
    for pattern, category in pairs:
        if category not in CATEGORIES:
            raise ValueError(f"category {category!r} for {pattern!r} is not one of {', '.join(CATEGORIES)}")
    return tuple(pairs)

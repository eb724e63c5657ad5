"""Profile results as span attributes, and the enriched span copies that carry them.

The copies keep every original attribute, event, link and dropped count; an original
attribute is never overwritten, even one in the ``agent_profiler.`` namespace.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from ..core.categories import CATEGORIES
from ..core.profile import SpanProfile, TraceProfile
from . import attributes as attr

_NS_PER_MS = 1e6
_CATEGORY_KEYS = {category: f"{attr.TRACE_CATEGORY_CRITICAL_PATH_PREFIX}{category}" for category in CATEGORIES}
_TOKEN_KEYS = tuple(
    (kind, f"{attr.TRACE_TOKENS_PREFIX}{kind}", f"{attr.TRACE_CRITICAL_PATH_TOKENS_PREFIX}{kind}")
    for kind in attr.TOKEN_TYPES
)


def span_attributes(span: SpanProfile) -> dict[str, Any]:
    """The ``agent_profiler.*`` attributes of one profiled span."""
    values: dict[str, Any] = {
        attr.CATEGORY: span.category,
        attr.OPERATION: span.operation,
        attr.SELF_TIME_MS: span.self_time_ns / _NS_PER_MS,
        attr.CRITICAL_PATH_MS: span.critical_path_ns / _NS_PER_MS,
        attr.ON_CRITICAL_PATH: span.on_critical_path,
    }
    if span.time_to_first_token_ns is not None:
        values[attr.TIME_TO_FIRST_TOKEN_MS] = span.time_to_first_token_ns / _NS_PER_MS
    if span.cost_usd is not None:
        values[attr.COST_USD] = span.cost_usd
    return values


def trace_attributes(profile: TraceProfile, *, complete: bool) -> dict[str, Any]:
    """The trace totals carried by each root span."""
    critical = profile.critical_path_ns
    values: dict[str, Any] = {
        attr.TRACE_DURATION_MS: profile.duration_ns / _NS_PER_MS,
        attr.TRACE_CRITICAL_PATH_MS: critical / _NS_PER_MS,
        attr.TRACE_SPAN_COUNT: profile.span_count,
        attr.TRACE_LLM_CALLS: profile.llm_calls,
        attr.TRACE_COMPLETE: complete,
        attr.TRACE_ANOMALIES: len(profile.anomalies),
    }
    # Sparse: only the categories that occur and the token counts that are not zero. Every
    # attribute costs the exporter an encoding per trace, and most traces touch few categories.
    categories = profile.categories
    present = {category for category, _ in profile.operations}
    for category in CATEGORIES:
        if category in present:
            values[_CATEGORY_KEYS[category]] = categories[category].critical_path_ns / _NS_PER_MS
    for kind, total_key, critical_key in _TOKEN_KEYS:
        total = getattr(profile.tokens, kind)
        if total:
            values[total_key] = total
            values[critical_key] = getattr(profile.critical_path_tokens, kind)
    if profile.cost_usd is not None:
        values[attr.TRACE_COST_USD] = profile.cost_usd
        values[attr.TRACE_CRITICAL_PATH_COST_USD] = profile.critical_path_cost_usd or 0.0
    bottleneck = max(
        profile.operations.values(),
        key=lambda op: (op.critical_path_ns, op.category != "agent", op.operation),
        default=None,
    )
    if bottleneck is not None and bottleneck.critical_path_ns > 0:
        values[attr.BOTTLENECK_OPERATION] = bottleneck.operation
        values[attr.BOTTLENECK_CATEGORY] = bottleneck.category
        values[attr.BOTTLENECK_CRITICAL_PATH_MS] = bottleneck.critical_path_ns / _NS_PER_MS
        values[attr.BOTTLENECK_SHARE] = bottleneck.critical_path_ns / critical if critical else 0.0
    return values


class EnrichedSpan(ReadableSpan):
    """A copy of an ended span with extra attributes; everything else is the original's."""

    def __init__(self, original: ReadableSpan, extra: Mapping[str, Any]) -> None:
        merged = {**extra, **(original.attributes or {})}  # originals win: they are never changed
        super().__init__(
            name=original.name,
            context=original.context,
            parent=original.parent,
            resource=original.resource,
            attributes=merged,
            events=original.events,
            links=original.links,
            kind=original.kind,
            status=original.status,
            start_time=original.start_time,
            end_time=original.end_time,
            instrumentation_scope=original.instrumentation_scope,
        )
        self._dropped = (original.dropped_attributes, original.dropped_events, original.dropped_links)

    @classmethod
    def of(cls, original: ReadableSpan, extra: Mapping[str, Any]) -> EnrichedSpan:
        """Same as ``EnrichedSpan(original, extra)``, several times faster.

        It copies the original's fields instead of running ``ReadableSpan.__init__``; a span
        without the SDK's usual layout takes the constructor.
        """
        state = getattr(original, "__dict__", None)
        bounded = getattr(original, "_attributes", None)
        inner = getattr(bounded, "_dict", None)
        if state is None or type(inner) is not dict or "_attributes" not in state:
            return cls(original, extra)
        span = object.__new__(cls)
        # Field by field rather than through ``__dict__``: CPython then keeps the values inline
        # in the object, with no separate dict for the garbage collector to track and free.
        for name, value in state.items():
            setattr(span, name, value)
        span._attributes = {**extra, **inner}  # originals win: they are never changed
        # Events and links are the original's bounded lists, which keep their own dropped counts.
        span._dropped = (original.dropped_attributes, -1, -1)
        return span

    # Exporters report what the SDK dropped; the copy must not hide it. The counts are kept
    # rather than the original span, which can then be freed before the copy is exported.
    @property
    def dropped_attributes(self) -> int:
        return self._dropped[0]

    @property
    def dropped_events(self) -> int:
        dropped = self._dropped[1]
        return super().dropped_events if dropped < 0 else dropped

    @property
    def dropped_links(self) -> int:
        dropped = self._dropped[2]
        return super().dropped_links if dropped < 0 else dropped

"""Profile results as span attributes: the values both the plugin and ``serve`` add to spans."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.categories import CATEGORIES
from ..core.context_window import context_window_use
from ..core.findings.base import DEFAULT_CONTEXT_WINDOWS
from ..core.profile import BackendLoad, SpanProfile, TraceProfile
from ..core.units import NS_PER_MS
from . import attributes as attr

_CATEGORY_KEYS = {category: f"{attr.TRACE_CATEGORY_CRITICAL_PATH_PREFIX}{category}" for category in CATEGORIES}
_TOKEN_KEYS = tuple(
    (kind, f"{attr.TRACE_TOKENS_PREFIX}{kind}", f"{attr.TRACE_CRITICAL_PATH_TOKENS_PREFIX}{kind}")
    for kind in attr.TOKEN_TYPES
)


def essential_span_attributes(span: SpanProfile) -> dict[str, Any]:
    """The attributes of ``attr.ESSENTIAL_SPAN_ATTRIBUTES`` that one profiled span has."""
    values: dict[str, Any] = {
        attr.CATEGORY: span.category,
        attr.SELF_TIME_MS: span.self_time_ns / NS_PER_MS,
        attr.CRITICAL_PATH_MS: span.critical_path_ns / NS_PER_MS,
        attr.ON_CRITICAL_PATH: span.on_critical_path,
    }
    if span.cost_usd is not None:
        values[attr.COST_USD] = span.cost_usd
    load = span.backend_load
    if load is not None:
        values.update(_load_attributes(load))
    return values


def span_attributes(span: SpanProfile, context_windows: Mapping[str, int] = DEFAULT_CONTEXT_WINDOWS) -> dict[str, Any]:
    """All the ``agent_profiler.*`` attributes of one profiled span (``context_windows``: model -> tokens)."""
    values: dict[str, Any] = {
        attr.CATEGORY: span.category,
        attr.OPERATION: span.operation,
        attr.SELF_TIME_MS: span.self_time_ns / NS_PER_MS,
        attr.CRITICAL_PATH_MS: span.critical_path_ns / NS_PER_MS,
        attr.ON_CRITICAL_PATH: span.on_critical_path,
    }
    if span.time_to_first_token_ns is not None:
        values[attr.TIME_TO_FIRST_TOKEN_MS] = span.time_to_first_token_ns / NS_PER_MS
    if span.cost_usd is not None:
        values[attr.COST_USD] = span.cost_usd
    window_use = context_window_use(span, context_windows)
    if window_use is not None:
        values[attr.CONTEXT_WINDOW_USE] = window_use
    phases = span.llm_phases
    if phases is not None:
        values[attr.LLM_QUEUE_MS] = phases.queue_ns / NS_PER_MS
        values[attr.LLM_PREFILL_MS] = phases.prefill_ns / NS_PER_MS
        values[attr.LLM_DECODE_MS] = phases.decode_ns / NS_PER_MS
        values[attr.LLM_OTHER_MS] = phases.other_ns / NS_PER_MS
    load = span.backend_load
    if load is not None:
        values.update(_load_attributes(load))
    return values


def _load_attributes(load: BackendLoad) -> dict[str, Any]:
    """The server load an LLM call met; metrics the server does not publish are left out."""
    values: dict[str, Any] = {attr.BACKEND_SOURCE: load.source, attr.BACKEND_SAMPLES: load.samples}
    for key, value in (
        (attr.BACKEND_RUNNING, load.running_mean),
        (attr.BACKEND_RUNNING_MAX, load.running_max),
        (attr.BACKEND_WAITING, load.waiting_mean),
        (attr.BACKEND_WAITING_MAX, load.waiting_max),
        (attr.BACKEND_KV_CACHE_USAGE_MAX, load.kv_cache_usage_max),
        (attr.BACKEND_PREFIX_CACHE_HIT_RATE, load.prefix_cache_hit_rate),
    ):
        if value is not None:
            values[key] = float(value)
    if load.preemptions is not None:
        values[attr.BACKEND_PREEMPTIONS] = load.preemptions
    return values


def trace_attributes(profile: TraceProfile, *, complete: bool) -> dict[str, Any]:
    """The trace totals carried by each root span."""
    critical = profile.critical_path_ns
    values: dict[str, Any] = {
        attr.TRACE_DURATION_MS: profile.duration_ns / NS_PER_MS,
        attr.TRACE_CRITICAL_PATH_MS: critical / NS_PER_MS,
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
            values[_CATEGORY_KEYS[category]] = categories[category].critical_path_ns / NS_PER_MS
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
        values[attr.BOTTLENECK_CRITICAL_PATH_MS] = bottleneck.critical_path_ns / NS_PER_MS
        values[attr.BOTTLENECK_SHARE] = bottleneck.critical_path_ns / critical if critical else 0.0
    return values

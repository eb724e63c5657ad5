"""The ``agent_profiler.*`` attributes the documentation promises for a profiled trace, computed
independently of ``enrichment.py`` from the core's profile: the reference the enrichment and
processor tests compare exported spans with."""

from __future__ import annotations

from typing import Any

from otel_agent_profiler.core import CATEGORIES, TraceProfile
from otel_agent_profiler.core.findings import DEFAULT_CONTEXT_WINDOWS
from otel_agent_profiler.core.genai import strip_snapshot
from otel_agent_profiler.live import attributes as attr


def expected_of(profile: TraceProfile, complete: bool) -> dict[str, dict[str, Any]]:
    """The attributes the documentation promises, computed from the core's profile."""
    roots = {root.span_id for root in profile.roots}
    critical = profile.critical_path_ns
    result: dict[str, dict[str, Any]] = {}
    for span in profile.spans:
        values: dict[str, Any] = {
            attr.CATEGORY: span.category,
            attr.OPERATION: span.operation,
            attr.SELF_TIME_MS: span.self_time_ns / 1e6,
            attr.CRITICAL_PATH_MS: span.critical_path_ns / 1e6,
            attr.ON_CRITICAL_PATH: span.on_critical_path,
        }
        if span.time_to_first_token_ns is not None:
            values[attr.TIME_TO_FIRST_TOKEN_MS] = span.time_to_first_token_ns / 1e6
        if span.cost_usd is not None:
            values[attr.COST_USD] = span.cost_usd
        window = DEFAULT_CONTEXT_WINDOWS.get(strip_snapshot(span.model or span.operation))
        if span.category == "llm" and span.tokens is not None and span.tokens.input > 0 and window:
            values[attr.CONTEXT_WINDOW_USE] = round(span.tokens.input / window, 4)
        if span.span_id in roots:
            values[attr.TRACE_DURATION_MS] = profile.duration_ns / 1e6
            values[attr.TRACE_CRITICAL_PATH_MS] = critical / 1e6
            values[attr.TRACE_SPAN_COUNT] = profile.span_count
            values[attr.TRACE_LLM_CALLS] = profile.llm_calls
            values[attr.TRACE_COMPLETE] = complete
            values[attr.TRACE_ANOMALIES] = len(profile.anomalies)
            for category in CATEGORIES:
                if any(s.category == category for s in profile.spans):
                    values[attr.TRACE_CATEGORY_CRITICAL_PATH_PREFIX + category] = (
                        profile.categories[category].critical_path_ns / 1e6
                    )
            for kind in attr.TOKEN_TYPES:
                if getattr(profile.tokens, kind):
                    values[attr.TRACE_TOKENS_PREFIX + kind] = getattr(profile.tokens, kind)
                    values[attr.TRACE_CRITICAL_PATH_TOKENS_PREFIX + kind] = getattr(profile.critical_path_tokens, kind)
            if profile.cost_usd is not None:
                values[attr.TRACE_COST_USD] = profile.cost_usd
                values[attr.TRACE_CRITICAL_PATH_COST_USD] = profile.critical_path_cost_usd or 0.0
            ops = sorted(profile.operations.values(), key=lambda op: -op.critical_path_ns)
            if (
                ops
                and ops[0].critical_path_ns > 0
                and (len(ops) == 1 or ops[1].critical_path_ns < ops[0].critical_path_ns)
            ):
                values[attr.BOTTLENECK_OPERATION] = ops[0].operation
                values[attr.BOTTLENECK_CATEGORY] = ops[0].category
                values[attr.BOTTLENECK_CRITICAL_PATH_MS] = ops[0].critical_path_ns / 1e6
                values[attr.BOTTLENECK_SHARE] = ops[0].critical_path_ns / critical
        result[span.span_id] = values
    return result

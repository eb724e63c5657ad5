"""The profile as plain JSON-ready data: the schema the CLI, service and reports share.

Times are float milliseconds. Every trace lists all categories, so consumers never have to
guess whether a missing key means zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .backend_load import summarize_loads
from .categories import CATEGORIES
from .context_window import context_window_use
from .findings.base import DEFAULT_CONTEXT_WINDOWS
from .profile import SpanProfile, TraceProfile
from .units import NS_PER_MS


def _ms(ns: int) -> float:
    return ns / NS_PER_MS


def span_to_dict(
    span: SpanProfile, trace_start_ns: int, context_windows: Mapping[str, int] = DEFAULT_CONTEXT_WINDOWS
) -> dict[str, Any]:
    record = span.record
    parent = span.parent
    return {
        "span_id": record.span_id,
        # The recorded parent, even when it is missing from the data (the span is then a root).
        "parent_span_id": record.parent_span_id if parent is not None or record.parent_span_id else None,
        "name": record.name,
        "kind": record.kind.value,
        "status": record.status.value,
        "category": span.category,
        "operation": span.operation,
        "depth": span.depth,
        "start_offset_ms": _ms(span.start_ns - trace_start_ns),
        "duration_ms": _ms(span.end_ns - span.start_ns),
        "self_time_ms": _ms(span.self_time_ns),
        "critical_path_ms": _ms(span.critical_path_ns),
        "on_critical_path": span.on_critical_path,
        "ended": span.ended,
        "counted": span.counted,
        # Times laid out by the trace's adapter (ATIF), not measured.
        "timing_estimated": span.timing_estimated,
        # The span counted for the call this span is part of (a copy, its HTTP request, a server's or a
        # wrapper's span): which spans make one call.
        "same_call_as": span.same_call_as.record.span_id if span.same_call_as is not None else None,
        "model": span.model,
        "model_snapshot": span.model_snapshot,
        "tokens": span.tokens.to_dict() if span.tokens is not None else None,
        "streaming": span.streaming,
        "time_to_first_token_ms": (
            _ms(span.time_to_first_token_ns) if span.time_to_first_token_ns is not None else None
        ),
        "cost_usd": span.cost_usd,
        "context_window_use": context_window_use(span, context_windows),
        "llm_phases_ms": span.llm_phases.to_dict() if span.llm_phases is not None else None,
        "backend_load": span.backend_load.to_dict() if span.backend_load is not None else None,
    }


def trace_to_dict(
    profile: TraceProfile,
    *,
    include_spans: bool = True,
    context_windows: Mapping[str, int] = DEFAULT_CONTEXT_WINDOWS,
) -> dict[str, Any]:
    """The trace as JSON-ready data; ``context_windows`` (model -> tokens) gives each LLM call's
    ``context_window_use``."""
    critical_path_ns = profile.critical_path_ns
    categories = {}
    for name in CATEGORIES:
        stats = profile.categories[name]
        categories[name] = {
            "count": stats.count,
            "duration_ms": _ms(stats.duration_ns),
            "self_time_ms": _ms(stats.self_time_ns),
            "critical_path_ms": _ms(stats.critical_path_ns),
            "critical_path_share": stats.critical_path_ns / critical_path_ns if critical_path_ns else 0.0,
        }
    operations = [
        {
            "category": op.category,
            "operation": op.operation,
            "count": op.count,
            "duration_ms": _ms(op.duration_ns),
            "self_time_ms": _ms(op.self_time_ns),
            "critical_path_ms": _ms(op.critical_path_ns),
            "tokens": op.tokens.to_dict(),
        }
        for op in sorted(profile.operations.values(), key=lambda o: (-o.critical_path_ns, o.category, o.operation))
    ]
    ttfts = [s.time_to_first_token_ns for s in profile.spans if s.time_to_first_token_ns is not None and s.counted]
    result: dict[str, Any] = {
        "trace_id": profile.trace_id,
        "duration_ms": _ms(profile.duration_ns),
        "critical_path_ms": _ms(critical_path_ns),
        "span_count": profile.span_count,
        "timing_estimated_spans": sum(1 for span in profile.spans if span.timing_estimated),
        "root_span_ids": [root.span_id for root in profile.roots],
        "llm_calls": profile.llm_calls,
        "categories": categories,
        "operations": operations,
        "tokens": profile.tokens.to_dict(),
        "tokens_by_model": {model: usage.to_dict() for model, usage in sorted(profile.tokens_by_model.items())},
        "critical_path_tokens": profile.critical_path_tokens.to_dict(),
        "cost_usd": profile.cost_usd,
        "critical_path_cost_usd": profile.critical_path_cost_usd,
        "cost_by_model": dict(sorted(profile.cost_by_model.items())),
        "time_to_first_token_ms": {
            "count": len(ttfts),
            "min": _ms(min(ttfts)) if ttfts else None,
            "mean": _ms(sum(ttfts)) / len(ttfts) if ttfts else None,
            "max": _ms(max(ttfts)) if ttfts else None,
        },
        "critical_path_llm_phases_ms": (
            profile.critical_path_llm_phases.to_dict() if profile.critical_path_llm_phases is not None else None
        ),
        "backend_load": load.to_dict() if (load := summarize_loads(profile.spans)) is not None else None,
        "anomalies": [anomaly.to_dict() for anomaly in profile.anomalies],
    }
    if include_spans:
        start = profile.start_ns
        result["spans"] = [span_to_dict(span, start, context_windows) for span in profile.spans]
    return result


def profiles_to_dict(profiles: list[TraceProfile]) -> dict[str, Any]:
    return {"traces": [trace_to_dict(profile) for profile in profiles]}

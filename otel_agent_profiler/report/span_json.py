"""The spans of a trace's JSON as msgspec structs, for the writers of large documents.

``core.schema.span_to_dict`` builds a dict per span, which msgspec then encodes: over 200,000
spans building those dicts took about as long as profiling them. A ``SpanJson`` holds the same
fields in the same order and is built from positional arguments, with no keys to hash, and
msgspec encodes it to the same bytes (a test holds the two to the same document). The span kind
and status stay enum members: msgspec writes their values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from ..core.context_window import context_window_use
from ..core.profile import TraceProfile
from ..core.records import SpanKind, StatusCode
from ..core.schema import trace_to_dict
from ..core.units import NS_PER_MS


class SpanJson(msgspec.Struct, gc=False):
    """One span of a trace's JSON: the fields of ``core.schema.span_to_dict``, in its order."""

    span_id: str
    parent_span_id: str | None
    name: str
    kind: SpanKind
    status: StatusCode
    category: str
    operation: str
    depth: int
    start_offset_ms: float
    duration_ms: float
    self_time_ms: float
    critical_path_ms: float
    on_critical_path: bool
    ended: bool
    counted: bool
    timing_estimated: bool
    same_call_as: str | None
    model: str | None
    model_snapshot: str | None
    tokens: dict[str, int] | None
    streaming: bool
    time_to_first_token_ms: float | None
    cost_usd: float | None
    context_window_use: float | None
    llm_phases_ms: dict[str, Any] | None
    backend_load: dict[str, Any] | None


def span_structs(profile: TraceProfile, context_windows: Mapping[str, int]) -> list[SpanJson]:
    """The spans of ``profile`` as ``trace_to_dict`` lists them, as structs."""
    start = profile.start_ns
    structs: list[SpanJson] = []
    append = structs.append
    for span in profile.spans:
        record = span.record
        same_call_as = span.same_call_as
        tokens = span.tokens
        ttft = span.time_to_first_token_ns
        phases = span.llm_phases
        load = span.backend_load
        span_start = span.start_ns
        append(
            SpanJson(
                record.span_id,
                # The recorded parent, even when it is missing from the data (the span is then a root).
                record.parent_span_id if span.parent is not None or record.parent_span_id else None,
                record.name,
                record.kind,
                record.status,
                span.category,
                span.operation,
                span.depth,
                (span_start - start) / NS_PER_MS,
                (span.end_ns - span_start) / NS_PER_MS,
                span.self_time_ns / NS_PER_MS,
                span.critical_path_ns / NS_PER_MS,
                span.on_critical_path,
                span.ended,
                span.counted,
                span.timing_estimated,
                same_call_as.record.span_id if same_call_as is not None else None,
                span.model,
                span.model_snapshot,
                tokens.to_dict() if tokens is not None else None,
                span.streaming,
                ttft / NS_PER_MS if ttft is not None else None,
                span.cost_usd,
                context_window_use(span, context_windows) if tokens is not None else None,
                phases.to_dict() if phases is not None else None,
                load.to_dict() if load is not None else None,
            )
        )
    return structs


def trace_document(
    profile: TraceProfile, context_windows: Mapping[str, int], *, include_spans: bool = True
) -> dict[str, Any]:
    """``core.schema.trace_to_dict(profile, ...)`` with its spans as structs: encoded by msgspec,
    the same bytes."""
    document = trace_to_dict(profile, include_spans=False, context_windows=context_windows)
    if include_spans:
        # Last, where trace_to_dict puts them.
        document["spans"] = span_structs(profile, context_windows)
    return document

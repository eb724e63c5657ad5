"""The analysis pipeline: span records in, one ``TraceProfile`` per trace out."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from .aggregate import aggregate, mark_nested_llm_duplicates, mark_nested_tool_duplicates
from .call_anatomy import assign_call_anatomy, is_server_span
from .call_parts import adopt_wrapped_calls, link_parts_to_calls, mark_transport_spans
from .categories import EMBEDDING, LLM, classify
from .critical_path import assign_critical_path
from .genai import is_streaming, model_of, operation_of, time_to_first_token_ns, token_usage_of
from .models import model_family, snapshot_of
from .overrunning_children import find_overrunning_children
from .pricing import PriceTable
from .profile import Anomaly, TraceProfile
from .recorded import RecordedValues
from .records import AttributeValue, SpanKind, SpanRecord
from .same_call import mark_non_calls, mark_side_by_side_duplicates
from .self_time import assign_self_times
from .span_tree import build_tree, group_by_trace

#: Decides a span's category from its name and attributes.
Classifier = Callable[[str, Mapping[str, AttributeValue]], str]

# An enum member read as a module global: ``SpanKind.X`` goes through the enum's class each time, several
# times slower, and this is read for every span.
_SERVER = SpanKind.SERVER


def profile_trace(
    records: list[SpanRecord],
    classifier: Classifier = classify,
    prices: PriceTable | None = None,
    *,
    recorded: RecordedValues | None = None,
) -> TraceProfile:
    """Profile the spans of one trace (all records must share one trace id).

    ``classifier`` decides categories (default: the conventions in ``categories.classify``);
    ``prices``, when given, adds the cost of LLM and embedding calls. ``recorded`` reads the
    values an earlier profiler recorded on the spans, a call's cost and its server's load
    (``core.recorded``; None: nothing recorded is read, every cost comes from ``prices``).
    """
    if not records:
        raise ValueError("a trace needs at least one span")
    recorded_backend_load = recorded.backend_load if recorded is not None else None
    timing_estimated = recorded.timing_estimated if recorded is not None else None
    spans, roots, anomalies = build_tree(records)
    unusable_counts: list[str] = []
    server_spans = False
    for span in spans:
        record = span.record
        attributes = record.attributes
        if record.kind is _SERVER and not server_spans:
            server_spans = is_server_span(record)
        category = classifier(record.name, attributes)
        span.category = category
        if timing_estimated is not None and timing_estimated(attributes):
            span.timing_estimated = True
        if category == LLM or category == EMBEDDING:
            # For model calls the operation is the model, by family: a dated snapshot is a detail.
            requested = model_of(attributes)
            if requested is not None:
                span.model_snapshot = snapshot_of(attributes, requested)
                requested = model_family(requested)
            span.model = requested
            span.operation = requested or record.name
            span.tokens = token_usage_of(attributes, unusable_counts)
            if unusable_counts:
                detail = f"{', '.join(unusable_counts)}: not a finite 64-bit token count, treated as absent"
                anomalies.append(Anomaly("unusable_token_count", record.span_id, detail))
                unusable_counts.clear()
            if category == LLM:
                ttft = time_to_first_token_ns(span.start_ns, attributes, record.events, span.end_ns)
                span.time_to_first_token_ns = ttft
                span.streaming = ttft is not None or is_streaming(attributes)
                if recorded_backend_load is not None:
                    # Enriched by a live profiler that polled the server: the load it met.
                    span.backend_load = recorded_backend_load(attributes)
        else:
            span.operation = operation_of(category, record.name, attributes)
    # In build_tree's order, whatever was added since.
    if anomalies:
        anomalies.sort(key=lambda anomaly: (anomaly.kind, anomaly.span_id))
    if len(spans) > 2:
        # A framework's step span written beside the call it wraps (LangGraph's call_model) holds it.
        spans = adopt_wrapped_calls(spans)
    assign_self_times(spans)
    assign_critical_path(roots)
    if len(spans) > 1:
        overrunning = find_overrunning_children(spans)
        if overrunning:
            anomalies.extend(overrunning)
            anomalies.sort(key=lambda anomaly: (anomaly.kind, anomaly.span_id))
    mark_nested_llm_duplicates(spans)
    mark_nested_tool_duplicates(spans)
    mark_non_calls(spans)
    mark_side_by_side_duplicates(spans)
    mark_transport_spans(spans)
    link_parts_to_calls(spans)
    profile = TraceProfile(
        trace_id=records[0].trace_id,
        spans=spans,
        roots=roots,
        start_ns=min(span.start_ns for span in spans),
        end_ns=max(span.end_ns for span in spans),
        anomalies=anomalies,
    )
    if server_spans:
        assign_call_anatomy(profile)
    aggregate(profile, prices, recorded)
    return profile


def profile_records(
    records: Iterable[SpanRecord],
    classifier: Classifier = classify,
    prices: PriceTable | None = None,
    *,
    recorded: RecordedValues | None = None,
) -> list[TraceProfile]:
    """Profile every trace found in ``records``, ordered by start time, then trace id (arguments:
    see ``profile_trace``)."""
    profiles = [
        profile_trace(spans, classifier, prices, recorded=recorded) for spans in group_by_trace(records).values()
    ]
    profiles.sort(key=lambda p: (p.start_ns, p.trace_id))
    return profiles

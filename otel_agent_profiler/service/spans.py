"""Spans as the service holds them, their enrichment, and regrouping them into OTLP requests.

A received span keeps the resource and scope it came with (``Origin``): when spans leave, those
of one origin are put back under one ``ResourceSpans``/``ScopeSpans``. Enrichment adds the
``agent_profiler.*`` attributes (those ``live.profiling`` computed for the span) to a *copy* of
each protobuf span; an attribute the span already has keeps its value, and the received span is
never changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from ..adapters.otlp_proto import check_span, record_of, resource_attributes, set_any_value
from ..core.records import AttributeValue, SpanRecord
from ..errors import SpanDataError


class Origin:
    """The resource and instrumentation scope of received spans (without the spans)."""

    __slots__ = ("resource_spans", "scope_spans")

    def __init__(self, resource_spans: ResourceSpans, scope_spans: ScopeSpans) -> None:
        self.resource_spans = resource_spans
        self.scope_spans = scope_spans


class HeldSpan:
    """One received span: its origin, message, trace id (None when it cannot be profiled), record and
    estimated size in bytes (its share of the received request's serialized size).

    The record is built on first use (when its trace is profiled), not when the span is received:
    receiving only checks that the record can be built (``check_span``).
    """

    __slots__ = ("_record", "_resource", "origin", "size", "span", "trace_id")

    def __init__(
        self,
        record: SpanRecord | None,
        origin: Origin,
        span: Span,
        *,
        trace_id: str | None = None,
        resource: dict[str, AttributeValue] | None = None,
        size: int = 0,
    ) -> None:
        self._record = record
        self.origin = origin
        self.span = span
        self.size = size
        if record is not None:
            self.trace_id: str | None = record.trace_id
            self._resource: dict[str, AttributeValue] | None = None
        else:
            self.trace_id = trace_id
            self._resource = resource if trace_id is not None else None

    @property
    def record(self) -> SpanRecord | None:
        """The span as a record, or None when it cannot be profiled."""
        if self._record is None and self._resource is not None:
            self._record = record_of(self.span, self._resource, self.origin.scope_spans.scope.name)
            self._resource = None
        return self._record


def held_spans_of(request: ExportTraceServiceRequest, problems: list[str], size_bytes: int = 0) -> list[HeldSpan]:
    """The spans of a received request, each with its trace id and origin (records are built later).

    ``size_bytes`` (the request's serialized size) is shared equally by the spans as their ``size``.
    """
    count = span_count(request)
    size = size_bytes // count if count else 0
    held: list[HeldSpan] = []
    append = held.append
    for r, resource_spans in enumerate(request.resource_spans):
        resource = resource_attributes(resource_spans.resource)
        bare_resource = ResourceSpans(resource=resource_spans.resource, schema_url=resource_spans.schema_url)
        for s, scope_spans in enumerate(resource_spans.scope_spans):
            bare_scope = ScopeSpans(scope=scope_spans.scope, schema_url=scope_spans.schema_url)
            origin = Origin(bare_resource, bare_scope)
            for i, span in enumerate(scope_spans.spans):
                trace_id: str | None
                try:
                    trace_id = check_span(span)
                except SpanDataError as exc:
                    problems.append(f"resource_spans[{r}].scope_spans[{s}].spans[{i}]: {exc}")
                    trace_id = None
                append(HeldSpan(None, origin, span, trace_id=trace_id, resource=resource, size=size))
    return held


def with_attributes(span: Span, extra: Mapping[str, Any]) -> Span:
    """A copy of ``span`` with the attributes of ``extra`` it does not have yet."""
    copy = Span()
    copy.CopyFrom(span)
    present = {kv.key for kv in span.attributes}
    for key, value in extra.items():
        if key not in present:
            set_any_value(copy.attributes.add(key=key).value, value)
    return copy


def enrich(held: Iterable[HeldSpan], attributes: Iterable[Mapping[str, Any] | None]) -> list[tuple[Origin, Span]]:
    """The spans of one profiled trace, each with its ``agent_profiler.*`` attributes added (those
    the live profiling step computed, in the same order; None leaves a span as received)."""
    return [
        (item.origin, item.span if extra is None else with_attributes(item.span, extra))
        for item, extra in zip(held, attributes, strict=True)
    ]


def build_request(spans: Iterable[tuple[Origin, Span]]) -> ExportTraceServiceRequest:
    """One request holding ``spans``, grouped back by resource and scope."""
    request = ExportTraceServiceRequest()
    resources: dict[int, ResourceSpans] = {}
    scopes: dict[int, ScopeSpans] = {}
    for origin, span in spans:
        scope = scopes.get(id(origin))
        if scope is None:
            resource = resources.get(id(origin.resource_spans))
            if resource is None:
                resource = request.resource_spans.add()
                resource.resource.CopyFrom(origin.resource_spans.resource)
                resource.schema_url = origin.resource_spans.schema_url
                resources[id(origin.resource_spans)] = resource
            scope = resource.scope_spans.add()
            scope.scope.CopyFrom(origin.scope_spans.scope)
            scope.schema_url = origin.scope_spans.schema_url
            scopes[id(origin)] = scope
        scope.spans.append(span)
    return request


def span_count(request: ExportTraceServiceRequest) -> int:
    return sum(len(scope.spans) for resource in request.resource_spans for scope in resource.scope_spans)

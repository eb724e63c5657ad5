"""OpenTelemetry SDK ``ReadableSpan`` to span records: the live pipeline's adapter.

An ended SDK span's attributes cannot change any more (the SDK ignores writes after the end), so
its attribute dict is referenced, not copied; a span that has not ended gets a copy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, cast

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind as OtelSpanKind, StatusCode as OtelStatusCode

from .._sdk_internals import (
    ATTRIBUTES_FIELD,
    BOUNDED_ATTRIBUTES_DICT,
    EVENTS_FIELD,
    LINKS_FIELD,
    PLAIN_LAYOUT_SPAN_TYPES,
    span_fields,
)
from ..core.records import Attributes, SpanEvent, SpanKind, SpanLink, SpanRecord, StatusCode

_KINDS = {
    OtelSpanKind.INTERNAL: SpanKind.INTERNAL,
    OtelSpanKind.SERVER: SpanKind.SERVER,
    OtelSpanKind.CLIENT: SpanKind.CLIENT,
    OtelSpanKind.PRODUCER: SpanKind.PRODUCER,
    OtelSpanKind.CONSUMER: SpanKind.CONSUMER,
}
_STATUSES = {
    OtelStatusCode.UNSET: StatusCode.UNSET,
    OtelStatusCode.OK: StatusCode.OK,
    OtelStatusCode.ERROR: StatusCode.ERROR,
}
# Enum members hash through Python code; their ids are a C-level lookup away. Keyed by id, the
# tables are only consulted with the members themselves (never with equal-valued stand-ins).
_KINDS_BY_ID = {id(kind): ours for kind, ours in _KINDS.items()}
_STATUSES_BY_ID = {id(code): ours for code, ours in _STATUSES.items()}
_EMPTY: Attributes = {}


def _attributes(mapping: Mapping[str, Any] | None) -> Attributes:
    # A plain dict copy: the SDK's read-only views answer each lookup through several Python
    # calls, and the analysis looks up many keys per span. Its value types are a subset of ours.
    return cast(Attributes, dict(mapping)) if mapping else _EMPTY


def _own_attributes(bounded: Any, ended: bool) -> Attributes | None:
    """The plain dict the SDK keeps inside a span's BoundedAttributes, or None for another layout.

    Using it directly is an order of magnitude faster than going through the public view. An
    ended span's attributes cannot change any more, so they are referenced; an open span's are
    copied.
    """
    inner = getattr(bounded, BOUNDED_ATTRIBUTES_DICT, None)
    if type(inner) is not dict:
        return None
    return cast(Attributes, inner if ended else inner.copy())


class _ResourceAttributes:
    """The attributes of the last resource seen: a process has one, shared by every span."""

    def __init__(self) -> None:
        # One tuple, replaced whole, so a reader on another thread never sees a mismatched pair.
        self._cached: tuple[object, Attributes] = (None, _EMPTY)

    def __call__(self, resource: Any) -> Attributes:
        if resource is None:
            return _EMPTY
        cached = self._cached
        if cached[0] is resource:
            return cached[1]
        attributes = _attributes(resource.attributes)
        self._cached = (resource, attributes)
        return attributes


_resource_attributes = _ResourceAttributes()


def trace_id_hex(trace_id: int) -> str:
    return f"{trace_id:032x}"


def _has_items(span: ReadableSpan, field: str) -> bool:
    # The public ``events``/``links`` properties copy the SDK's locked bounded list on every
    # read, which costs more than the rest of a span's conversion; most spans have neither.
    raw = getattr(span, field, None)
    try:
        return raw is None or len(raw) > 0
    except TypeError:
        return True


def record_from_span(span: ReadableSpan, trace_id_hex: str | None = None) -> SpanRecord:
    """The span record of one SDK span (ended or not).

    ``trace_id_hex``, when given, is the span's trace id in hex, already formatted by the caller.
    """
    if type(span) in PLAIN_LAYOUT_SPAN_TYPES:
        try:
            return _record_from_fields(span.__dict__, trace_id_hex)
        except (KeyError, AttributeError, TypeError):
            pass  # a field missing or of an unexpected type: the public road below handles it
    return _record_from_properties(span, trace_id_hex)


def _record_from_fields(state: dict[str, Any], trace_id_hex: str | None) -> SpanRecord:
    # The SDK span's fields read straight from its dict: each property read is a Python call,
    # and this runs once per exported span.
    end, bounded, context, parent, name, start, kind, status, events, links, resource, scope = span_fields(state)
    attributes = _own_attributes(bounded, end is not None)
    return _record(
        trace_id_hex,
        context,
        parent,
        name,
        start,
        end,
        kind,
        status,
        _attributes(bounded) if attributes is None else attributes,
        events,
        links,
        resource,
        scope,
    )


def _record_from_properties(span: ReadableSpan, trace_id_hex: str | None) -> SpanRecord:
    attributes = _own_attributes(getattr(span, ATTRIBUTES_FIELD, None), span.end_time is not None)
    return _record(
        trace_id_hex,
        span.context,
        span.parent,
        span.name,
        span.start_time,
        span.end_time,
        span.kind,
        span.status,
        _attributes(span.attributes) if attributes is None else attributes,
        span.events if _has_items(span, EVENTS_FIELD) else (),
        span.links if _has_items(span, LINKS_FIELD) else (),
        span.resource,
        span.instrumentation_scope,
    )


def _record(
    trace_id_hex: str | None,
    context: Any,
    parent: Any,
    name: str,
    start: int | None,
    end: int | None,
    kind: Any,
    status: Any,
    attributes: Attributes,
    events: Any,
    links: Any,
    resource: Any,
    scope: Any,
) -> SpanRecord:
    # Positional arguments, in SpanRecord's field order: this runs once per exported span.
    code = status.status_code
    return SpanRecord(
        trace_id_hex or f"{context.trace_id:032x}",
        f"{context.span_id:016x}",
        f"{parent.span_id:016x}" if parent is not None else None,
        name,
        start or 0,
        end,
        _KINDS_BY_ID.get(id(kind)) or _KINDS.get(kind, SpanKind.INTERNAL),
        _STATUSES_BY_ID.get(id(code)) or _STATUSES.get(code, StatusCode.UNSET),
        status.description or "",
        attributes,
        _events(events) if events else (),
        _links(links) if links else (),
        _resource_attributes(resource),
        scope.name if scope is not None else "",
    )


def _events(events: Iterable[Any]) -> tuple[SpanEvent, ...]:
    return tuple(SpanEvent(e.name, e.timestamp, _attributes(e.attributes)) for e in events)


def _links(links: Iterable[Any]) -> tuple[SpanLink, ...]:
    return tuple(
        SpanLink(f"{link.context.trace_id:032x}", f"{link.context.span_id:016x}", _attributes(link.attributes))
        for link in links
    )


def records_from_spans(spans: Iterable[ReadableSpan]) -> list[SpanRecord]:
    records = []
    trace_id, trace_hex = None, ""
    for span in spans:
        span_trace_id = span.context.trace_id
        if span_trace_id != trace_id:
            trace_id, trace_hex = span_trace_id, f"{span_trace_id:032x}"
        records.append(record_from_span(span, trace_hex))
    return records

"""The fast path for OTLP JSON: decode straight into typed structs with msgspec.

Decoding into structs skips building a dict for every span, attribute and value, which is
most of the cost of reading a large export. A document that does not fit the schema raises
``msgspec.ValidationError``; the caller then falls back to the tolerant dict-based reader
in ``otlp_json``, which reports each unusable span and keeps the rest.
"""

from __future__ import annotations

import base64

import msgspec

from ..core.records import AttributeValue, SpanRecord
from ..errors import BadIdError, SpanDataError
from .ids import KnownIds, normalize_id, normalize_parent_id
from .otlp_json import kind_of, status_of
from .otlp_records import LinkFields, span_record, timestamp_ns


class ArrayValue(msgspec.Struct, frozen=True):
    values: list[AnyValue] = []


class KeyValueList(msgspec.Struct, frozen=True):
    values: list[KeyValue] = []


class AnyValue(msgspec.Struct, frozen=True):
    stringValue: str | None = None
    intValue: int | str | None = None
    doubleValue: float | str | None = None
    boolValue: bool | None = None
    arrayValue: ArrayValue | None = None
    kvlistValue: KeyValueList | None = None
    bytesValue: str | None = None


_EMPTY_VALUE = AnyValue()


class KeyValue(msgspec.Struct, frozen=True):
    key: str
    value: AnyValue = _EMPTY_VALUE


class Event(msgspec.Struct, frozen=True):
    timeUnixNano: int | str = 0
    name: str = ""
    attributes: list[KeyValue] = []


class Link(msgspec.Struct, frozen=True):
    traceId: str
    spanId: str
    attributes: list[KeyValue] = []


class Status(msgspec.Struct, frozen=True):
    code: int | str = 0
    message: str = ""


class Span(msgspec.Struct, frozen=True):
    traceId: str
    spanId: str
    startTimeUnixNano: int | str
    endTimeUnixNano: int | str | None = None
    parentSpanId: str | None = None
    name: str = ""
    kind: int | str | None = None
    attributes: list[KeyValue] = []
    events: list[Event] = []
    links: list[Link] = []
    status: Status | None = None


class Scope(msgspec.Struct, frozen=True):
    name: str = ""


class ScopeSpans(msgspec.Struct, frozen=True):
    spans: list[Span] = []
    scope: Scope | None = None
    instrumentationLibrary: Scope | None = None


class Resource(msgspec.Struct, frozen=True):
    attributes: list[KeyValue] = []


_EMPTY_RESOURCE = Resource()


class ResourceSpans(msgspec.Struct, frozen=True):
    resource: Resource = _EMPTY_RESOURCE
    scopeSpans: list[ScopeSpans] = []
    instrumentationLibrarySpans: list[ScopeSpans] = []


class TracesData(msgspec.Struct, frozen=True):
    resourceSpans: list[ResourceSpans]


DECODER = msgspec.json.Decoder(TracesData)


def _value(value: AnyValue) -> AttributeValue:
    if value.stringValue is not None:
        return value.stringValue
    if value.intValue is not None:
        return int(value.intValue)
    if value.boolValue is not None:
        return value.boolValue
    if value.doubleValue is not None:
        return float(value.doubleValue)
    if value.arrayValue is not None:
        return [_value(item) for item in value.arrayValue.values]
    if value.kvlistValue is not None:
        return _attributes(value.kvlistValue.values)
    if value.bytesValue is not None:
        return base64.b64decode(value.bytesValue).hex()
    return None


def _attributes(key_values: list[KeyValue]) -> dict[str, AttributeValue]:
    if not key_values:
        return {}
    return {kv.key: string if (string := kv.value.stringValue) is not None else _value(kv.value) for kv in key_values}


def _record(span: Span, resource: dict[str, AttributeValue], known: KnownIds, scope: str) -> SpanRecord:
    raw = span.traceId
    trace_id = known.traces.get(raw) or known.traces.setdefault(raw, normalize_id(raw, 16, "traceId"))
    raw = span.spanId
    span_id = known.spans.get(raw) or known.spans.setdefault(raw, normalize_id(raw, 8, "spanId"))
    raw_parent = span.parentSpanId
    parent = (known.spans.get(raw_parent) or normalize_parent_id(raw_parent)) if raw_parent else None
    end = timestamp_ns(span.endTimeUnixNano, "endTimeUnixNano") if span.endTimeUnixNano else None
    status = span.status
    return span_record(
        (trace_id, span_id, parent),
        span.name,
        timestamp_ns(span.startTimeUnixNano, "startTimeUnixNano"),
        end,
        kind_of(span.kind),
        status_of(0, "") if status is None else status_of(status.code, status.message),
        _attributes(span.attributes),
        resource,
        ((e.name, _event_time(e), _attributes(e.attributes)) for e in span.events) if span.events else (),
        map(_link_fields, span.links) if span.links else (),
        scope,
    )


def _event_time(event: Event) -> int:
    return timestamp_ns(event.timeUnixNano, "an event's timeUnixNano")


def _link_fields(link: Link) -> LinkFields:
    trace_id = normalize_id(link.traceId, 16, "link traceId")
    return trace_id, normalize_id(link.spanId, 8, "link spanId"), _attributes(link.attributes)


def records_from_typed(data: TracesData) -> list[SpanRecord]:
    """Span records of a decoded document.

    Raises ``SpanDataError`` when any span is unusable (a bad id, an unknown enum, a
    timestamp that is not a number or out of range, values nested too deeply), so the caller
    can rerun the tolerant reader, which says which spans and why.
    """
    records: list[SpanRecord] = []
    append = records.append
    known = KnownIds()
    try:
        for resource_spans in data.resourceSpans:
            resource = _attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scopeSpans or resource_spans.instrumentationLibrarySpans:
                named = scope_spans.scope or scope_spans.instrumentationLibrary
                scope = named.name if named is not None else ""
                spans = scope_spans.spans
                # Each decoded span is dropped as soon as its record is made: the document and
                # the records are never both whole in memory.
                for index, span in enumerate(spans):
                    spans[index] = None  # type: ignore[call-overload]
                    append(_record(span, resource, known, scope))
    except (BadIdError, ValueError, TypeError, RecursionError) as exc:
        raise SpanDataError(str(exc)) from exc
    return records

"""Span records to an OTLP JSON document (``{"resourceSpans": [...]}``), the inverse of ``otlp_json``.

What traces fetched from a store are saved as (``--save``), so that a run can be repeated
offline: reading the document back with :func:`otlp_json.records_from_otlp` gives records
equal to the ones written. Each record's instrumentation scope is written by its name (records
keep no scope version or attributes).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..core.records import AttributeValue, SpanKind, SpanRecord, StatusCode

_KIND_NUMBERS = {
    SpanKind.INTERNAL: 1,
    SpanKind.SERVER: 2,
    SpanKind.CLIENT: 3,
    SpanKind.PRODUCER: 4,
    SpanKind.CONSUMER: 5,
}
_STATUS_NUMBERS = {StatusCode.UNSET: 0, StatusCode.OK: 1, StatusCode.ERROR: 2}


def any_value_json(value: AttributeValue) -> dict[str, Any]:
    """One attribute value as an OTLP JSON ``AnyValue`` (``None`` is the empty value)."""
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        # OTLP JSON writes 64-bit integers as decimal strings: JSON numbers lose precision past 2**53.
        return {"intValue": str(value)}
    if isinstance(value, float):
        # Non-finite numbers are not JSON; proto3's JSON mapping spells them as these strings.
        if math.isnan(value):
            return {"doubleValue": "NaN"}
        if math.isinf(value):
            return {"doubleValue": "Infinity" if value > 0 else "-Infinity"}
        return {"doubleValue": value}
    if isinstance(value, Mapping):
        return {"kvlistValue": {"values": attributes_json(value)}}
    if isinstance(value, Sequence):
        return {"arrayValue": {"values": [any_value_json(item) for item in value]}}
    return {}


def attributes_json(attributes: Mapping[str, AttributeValue]) -> list[dict[str, Any]]:
    """Attributes as a list of OTLP JSON ``KeyValue`` objects."""
    return [{"key": key, "value": any_value_json(value)} for key, value in attributes.items()]


def _span_json(record: SpanRecord) -> dict[str, Any]:
    span: dict[str, Any] = {"traceId": record.trace_id, "spanId": record.span_id}
    if record.parent_span_id:
        span["parentSpanId"] = record.parent_span_id
    span["name"] = record.name
    span["kind"] = _KIND_NUMBERS[record.kind]
    span["startTimeUnixNano"] = str(record.start_ns)
    # A span that never ended is written with no end, as exporters write one.
    span["endTimeUnixNano"] = str(record.end_ns or 0)
    if record.attributes:
        span["attributes"] = attributes_json(record.attributes)
    if record.events:
        span["events"] = [
            {"timeUnixNano": str(event.time_ns), "name": event.name, "attributes": attributes_json(event.attributes)}
            for event in record.events
        ]
    if record.links:
        span["links"] = [
            {"traceId": link.trace_id, "spanId": link.span_id, "attributes": attributes_json(link.attributes)}
            for link in record.links
        ]
    if record.status is not StatusCode.UNSET or record.status_message:
        span["status"] = {"code": _STATUS_NUMBERS[record.status], "message": record.status_message}
    return span


def otlp_json_document(records: Iterable[SpanRecord]) -> dict[str, Any]:
    """The OTLP JSON document of ``records``, in their order: a ``resourceSpans`` entry per run of records
    sharing a resource (records of one process share their resource object, so identity tells them),
    and in it a ``scopeSpans`` entry per run of records of one instrumentation scope."""
    groups: list[tuple[Mapping[str, AttributeValue], list[tuple[str, list[dict[str, Any]]]]]] = []
    for record in records:
        if not groups or groups[-1][0] is not record.resource:
            groups.append((record.resource, []))
        scopes = groups[-1][1]
        if not scopes or scopes[-1][0] != record.scope:
            scopes.append((record.scope, []))
        scopes[-1][1].append(_span_json(record))
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": attributes_json(resource)},
                "scopeSpans": [{"scope": {"name": name} if name else {}, "spans": spans} for name, spans in scopes],
            }
            for resource, scopes in groups
        ]
    }

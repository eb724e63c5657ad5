"""Jaeger's JSON export (``{"data": [{"traceID", "spans", "processes"}]}``) to span records.

Jaeger keeps microseconds, tags and logs; OpenTelemetry's own translation puts the span
kind in the ``span.kind`` tag, the status in ``otel.status_code`` and links in
``FOLLOWS_FROM`` references. Only the first ``CHILD_OF`` reference is a parent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.records import AttributeValue, SpanEvent, SpanKind, SpanLink, SpanRecord, StatusCode
from ..errors import BadIdError, SpanDataError
from .ids import normalize_id

_NS_PER_US = 1000
_KINDS = {
    "internal": SpanKind.INTERNAL,
    "server": SpanKind.SERVER,
    "client": SpanKind.CLIENT,
    "producer": SpanKind.PRODUCER,
    "consumer": SpanKind.CONSUMER,
}
# Tags Jaeger adds when translating from OpenTelemetry; they become fields of the record.
_TRANSLATION_TAGS = frozenset({"span.kind", "otel.status_code", "otel.status_description"})


def _tag_value(tag: Mapping[str, Any]) -> AttributeValue:
    value = tag.get("value")
    kind = tag.get("type")
    if kind == "int64" and isinstance(value, str):
        return int(value)
    if kind == "float64" and isinstance(value, str):
        return float(value)
    if kind == "bool" and isinstance(value, str):
        return value.lower() == "true"
    return value


def _tags(tags: Any) -> dict[str, AttributeValue]:
    return {tag["key"]: _tag_value(tag) for tag in tags} if tags else {}


def _resource_of(process: Mapping[str, Any] | None) -> dict[str, AttributeValue]:
    if not process:
        return {}
    resource = _tags(process.get("tags"))
    if process.get("serviceName"):
        resource["service.name"] = process["serviceName"]
    return resource


def _span_record(span: Mapping[str, Any], resources: Mapping[str, dict[str, AttributeValue]]) -> SpanRecord:
    try:
        trace_id = normalize_id(span.get("traceID"), 16, "traceID")
        span_id = normalize_id(span.get("spanID"), 8, "spanID")
        parent: str | None = None
        links: list[SpanLink] = []
        for ref in span.get("references") or ():
            ref_trace = normalize_id(ref.get("traceID"), 16, "reference traceID")
            ref_span = normalize_id(ref.get("spanID"), 8, "reference spanID")
            if parent is None and ref.get("refType", "CHILD_OF") == "CHILD_OF" and ref_trace == trace_id:
                parent = ref_span
            else:
                links.append(SpanLink(ref_trace, ref_span))
        if parent is None and span.get("parentSpanID"):
            parent = normalize_id(span["parentSpanID"], 8, "parentSpanID")
    except BadIdError as exc:
        raise SpanDataError(str(exc)) from None
    try:
        start = int(span["startTime"]) * _NS_PER_US
        end = start + int(span["duration"]) * _NS_PER_US
    except (KeyError, TypeError, ValueError):
        raise SpanDataError("startTime and duration must be integers of microseconds") from None

    attributes = _tags(span.get("tags"))
    kind = _KINDS.get(str(attributes.get("span.kind", "internal")).lower(), SpanKind.INTERNAL)
    status_tag = str(attributes.get("otel.status_code", "")).upper()
    if status_tag == "ERROR" or attributes.get("error") is True:
        status = StatusCode.ERROR
    elif status_tag == "OK":
        status = StatusCode.OK
    else:
        status = StatusCode.UNSET
    message = str(attributes.get("otel.status_description", "") or "")
    for key in _TRANSLATION_TAGS:
        attributes.pop(key, None)

    events = []
    for log in span.get("logs") or ():
        fields = _tags(log.get("fields"))
        name = fields.pop("event", "log")
        events.append(SpanEvent(str(name), int(log.get("timestamp", 0)) * _NS_PER_US, fields))

    return SpanRecord(
        trace_id,
        span_id,
        parent,
        span.get("operationName", ""),
        start,
        end,
        kind,
        status,
        message,
        attributes,
        tuple(events),
        tuple(links),
        resources.get(span.get("processID", ""), {}),
    )


def is_jaeger_document(document: Any) -> bool:
    data = document.get("data") if isinstance(document, dict) else None
    return isinstance(data, list) and all(isinstance(t, dict) and "spans" in t for t in data)


def records_from_jaeger(document: Mapping[str, Any], problems: list[str]) -> list[SpanRecord]:
    """Span records of a Jaeger JSON export; unusable spans are described in ``problems``."""
    records: list[SpanRecord] = []
    for t, trace in enumerate(document["data"]):
        processes = trace.get("processes") or {}
        try:
            resources = {key: _resource_of(process) for key, process in processes.items()}
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            problems.append(f"data[{t}].processes: unreadable ({exc!r})")
            resources = {}
        for i, span in enumerate(trace.get("spans") or ()):
            try:
                records.append(_span_record(span, resources))
            except SpanDataError as exc:
                problems.append(f"data[{t}].spans[{i}]: {exc}")
            except (AttributeError, KeyError, TypeError, ValueError) as exc:
                problems.append(f"data[{t}].spans[{i}]: malformed span ({exc!r})")
    return records

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
from .otlp_records import timestamp_ns

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


def _scope_name(attributes: Mapping[str, AttributeValue]) -> str:
    """The instrumentation scope, kept as a tag the way non-OTLP exporters write it (``otel.scope.name``;
    before that, the specification's Jaeger mapping named it ``otel.library.name``)."""
    for key in ("otel.scope.name", "otel.library.name"):
        name = attributes.get(key)
        if isinstance(name, str):
            return name
    return ""


def _tags(tags: Any) -> dict[str, AttributeValue]:
    if not tags:
        return {}
    if not isinstance(tags, list) or not all(isinstance(tag, Mapping) and type(tag.get("key")) is str for tag in tags):
        raise SpanDataError("tags/fields must be a list of {key, value} objects with string keys")
    return {tag["key"]: _tag_value(tag) for tag in tags}


def _resource_of(process: Mapping[str, Any] | None) -> dict[str, AttributeValue]:
    if not process:
        return {}
    if not isinstance(process, Mapping):
        raise SpanDataError("a process is not an object")
    resource = _tags(process.get("tags"))
    if process.get("serviceName"):
        resource["service.name"] = process["serviceName"]
    return resource


def _span_record(span: Mapping[str, Any], resources: Mapping[str, dict[str, AttributeValue]]) -> SpanRecord:
    if not isinstance(span, Mapping):
        raise SpanDataError("not a span object")
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
        start_us, duration_us = int(span["startTime"]), int(span["duration"])
    except (KeyError, TypeError, ValueError, OverflowError):
        raise SpanDataError("startTime and duration must be integers of microseconds") from None
    start = timestamp_ns(start_us * _NS_PER_US, "startTime")
    end = timestamp_ns(start + duration_us * _NS_PER_US, "startTime + duration")
    name = span.get("operationName", "")
    if not isinstance(name, str):
        raise SpanDataError("operationName is not a string")

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
        if not isinstance(log, Mapping):
            raise SpanDataError("a log is not an object")
        fields = _tags(log.get("fields"))
        event_name = fields.pop("event", "log")
        try:
            time_us = int(log.get("timestamp", 0))
        except (TypeError, ValueError, OverflowError):
            raise SpanDataError("a log's timestamp is not an integer of microseconds") from None
        events.append(SpanEvent(str(event_name), timestamp_ns(time_us * _NS_PER_US, "a log's timestamp"), fields))

    process_id = span.get("processID", "")
    return SpanRecord(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent,
        name=name,
        start_ns=start,
        end_ns=end,
        kind=kind,
        status=status,
        status_message=message,
        attributes=attributes,
        events=tuple(events),
        links=tuple(links),
        resource=resources.get(process_id, {}) if isinstance(process_id, str) else {},
        scope=_scope_name(attributes),
    )


def is_jaeger_document(document: Any) -> bool:
    data = document.get("data") if isinstance(document, dict) else None
    return isinstance(data, list) and all(isinstance(t, dict) and "spans" in t for t in data)


def records_from_jaeger(document: Mapping[str, Any], problems: list[str]) -> list[SpanRecord]:
    """Span records of a Jaeger JSON export; unusable spans, and parts of the document that do not
    have the shape of one (spans that are not a list, ...), are described in ``problems``."""
    records: list[SpanRecord] = []
    for t, trace in enumerate(document["data"]):
        processes = trace.get("processes") or {}
        try:
            if not isinstance(processes, Mapping):
                raise SpanDataError("not an object")
            resources = {key: _resource_of(process) for key, process in processes.items()}
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            problems.append(f"data[{t}].processes: unreadable ({exc})")
            resources = {}
        spans = trace.get("spans") or []
        if not isinstance(spans, list):
            problems.append(f"data[{t}].spans is not a list")
            continue
        for i, span in enumerate(spans):
            try:
                records.append(_span_record(span, resources))
            except SpanDataError as exc:
                problems.append(f"data[{t}].spans[{i}]: {exc}")
            except (AttributeError, KeyError, TypeError, ValueError, OverflowError, RecursionError) as exc:
                problems.append(f"data[{t}].spans[{i}]: malformed span ({exc!r})")
    return records

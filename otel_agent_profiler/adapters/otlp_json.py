"""OTLP JSON (``{"resourceSpans": [...]}``) to span records.

Follows the OTLP/JSON encoding: hex ids, 64-bit integers as decimal strings, enums as
integers; also accepts enum names, integer timestamps, base64 ids and the pre-1.0
``instrumentationLibrarySpans`` key, all of which real exporters have written.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from ..core.records import AttributeValue, SpanKind, SpanRecord, StatusCode
from ..errors import BadIdError, SpanDataError
from .ids import KnownIds, normalize_id, normalize_parent_id
from .otlp_records import KINDS_BY_NUMBER, STATUS_BY_NUMBER, EventFields, LinkFields, span_record

_KINDS_BY_NAME = {
    "SPAN_KIND_UNSPECIFIED": SpanKind.INTERNAL,
    "SPAN_KIND_INTERNAL": SpanKind.INTERNAL,
    "SPAN_KIND_SERVER": SpanKind.SERVER,
    "SPAN_KIND_CLIENT": SpanKind.CLIENT,
    "SPAN_KIND_PRODUCER": SpanKind.PRODUCER,
    "SPAN_KIND_CONSUMER": SpanKind.CONSUMER,
}
_STATUS_BY_NAME = {
    "STATUS_CODE_UNSET": StatusCode.UNSET,
    "STATUS_CODE_OK": StatusCode.OK,
    "STATUS_CODE_ERROR": StatusCode.ERROR,
}


def any_value(value: Mapping[str, Any]) -> AttributeValue:
    """Decode an OTLP ``AnyValue`` object."""
    if "stringValue" in value:
        return value["stringValue"]  # type: ignore[no-any-return]
    if "intValue" in value:
        return int(value["intValue"])
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "arrayValue" in value:
        return [any_value(item) for item in value["arrayValue"].get("values", ())]
    if "kvlistValue" in value:
        return attributes_of(value["kvlistValue"].get("values", ()))
    if "bytesValue" in value:
        return base64.b64decode(value["bytesValue"]).hex()
    return None


def attributes_of(key_values: Any) -> dict[str, AttributeValue]:
    """Decode a list of OTLP ``KeyValue`` objects."""
    if not key_values:
        return {}
    # Strings are most attribute values, so they skip the general decoder.
    return {
        kv["key"]: value["stringValue"] if "stringValue" in value else any_value(value)
        for kv in key_values
        for value in (kv.get("value") or _NO_VALUE,)
    }


_NO_VALUE: Mapping[str, Any] = {}


def kind_of(raw: Any) -> SpanKind:
    """A span kind from its OTLP number or enum name."""
    if raw is None:
        return SpanKind.INTERNAL
    kind = KINDS_BY_NUMBER.get(raw) if isinstance(raw, int) else _KINDS_BY_NAME.get(raw)
    if kind is None:
        raise SpanDataError(f"unknown span kind {raw!r}")
    return kind


def status_of(code: Any, message: Any) -> tuple[StatusCode, str]:
    """A status code from its OTLP number or enum name, and its message."""
    status = STATUS_BY_NUMBER.get(code) if isinstance(code, int) else _STATUS_BY_NAME.get(code)
    if status is None:
        raise SpanDataError(f"unknown status code {code!r}")
    return status, message or ""


def _status_of(raw: Any) -> tuple[StatusCode, str]:
    if not raw:
        return StatusCode.UNSET, ""
    return status_of(raw.get("code", 0), raw.get("message", ""))


def _span_record(span: Mapping[str, Any], resource: dict[str, AttributeValue], known: KnownIds) -> SpanRecord:
    try:
        raw = span["traceId"]
        trace_id = known.traces.get(raw) or known.traces.setdefault(raw, normalize_id(raw, 16, "traceId"))
        raw = span["spanId"]
        span_id = known.spans.get(raw) or known.spans.setdefault(raw, normalize_id(raw, 8, "spanId"))
        raw = span.get("parentSpanId")
        parent = (known.spans.get(raw) or normalize_parent_id(raw)) if raw else None
    except KeyError as exc:
        raise SpanDataError(f"{exc.args[0]} is missing") from None
    except BadIdError as exc:
        raise SpanDataError(str(exc)) from None
    try:
        start = int(span["startTimeUnixNano"])
        raw_end = span.get("endTimeUnixNano")
        # An end of 0 (or none) is how exporters write a span that never ended.
        end = int(raw_end) if raw_end else None
        if end == 0:
            end = None
    except (KeyError, TypeError, ValueError):
        raise SpanDataError(
            f"startTimeUnixNano/endTimeUnixNano must be integers of nanoseconds, got "
            f"{span.get('startTimeUnixNano')!r}/{span.get('endTimeUnixNano')!r}"
        ) from None
    status = _status_of(span.get("status"))
    raw_events = span.get("events")
    # Decoded here rather than in span_record, so that a bad value is reported as this span's problem.
    events: list[EventFields] = []
    if raw_events:
        try:
            for event in raw_events:
                time_ns = int(event.get("timeUnixNano") or 0)
                events.append((event.get("name", ""), time_ns, attributes_of(event.get("attributes"))))
        except (TypeError, ValueError):
            raise SpanDataError("an event's timeUnixNano is not an integer of nanoseconds") from None
    raw_links = span.get("links")
    links: list[LinkFields] = []
    if raw_links:
        try:
            for link in raw_links:
                linked_trace = normalize_id(link.get("traceId"), 16, "link traceId")
                linked_span = normalize_id(link.get("spanId"), 8, "link spanId")
                links.append((linked_trace, linked_span, attributes_of(link.get("attributes"))))
        except BadIdError as exc:
            raise SpanDataError(str(exc)) from None
    kind = kind_of(span.get("kind"))
    attributes = attributes_of(span.get("attributes"))
    return span_record(
        (trace_id, span_id, parent), span.get("name", ""), start, end, kind, status, attributes, resource, events, links
    )


def records_from_otlp(document: Mapping[str, Any], problems: list[str], where: str = "") -> list[SpanRecord]:
    """Span records of one ``{"resourceSpans": ...}`` document.

    Spans that cannot be used are skipped and described in ``problems`` (one entry each,
    with their position); the others are still returned.
    """
    records: list[SpanRecord] = []
    append = records.append
    # Ids repeat (every span of a trace has its trace id, every parent is someone's span id),
    # so each distinct id is validated once.
    known = KnownIds()
    resource_spans = document.get("resourceSpans")
    if not isinstance(resource_spans, list):
        problems.append(f"{where}resourceSpans is not a list")
        return records
    for r, resource_span in enumerate(resource_spans):
        try:
            resource = attributes_of((resource_span.get("resource") or {}).get("attributes"))
            scope_spans = resource_span.get("scopeSpans")
            if scope_spans is None:
                scope_spans = resource_span.get("instrumentationLibrarySpans") or ()
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            problems.append(f"{where}resourceSpans[{r}]: unreadable resource ({exc!r})")
            continue
        for s, scope_span in enumerate(scope_spans):
            spans = scope_span.get("spans") if isinstance(scope_span, dict) else None
            if not spans:
                continue
            for i, span in enumerate(spans):
                try:
                    append(_span_record(span, resource, known))
                except SpanDataError as exc:
                    problems.append(f"{where}resourceSpans[{r}].scopeSpans[{s}].spans[{i}]: {exc}")
                except (AttributeError, KeyError, TypeError, ValueError) as exc:
                    problems.append(f"{where}resourceSpans[{r}].scopeSpans[{s}].spans[{i}]: malformed span ({exc!r})")
    return records

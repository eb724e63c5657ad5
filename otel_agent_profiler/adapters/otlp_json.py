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
from .otlp_records import (
    KINDS_BY_NAME,
    KINDS_BY_NUMBER,
    STATUS_BY_NAME,
    STATUS_BY_NUMBER,
    EventFields,
    LinkFields,
    span_record,
    timestamp_ns,
)


def any_value(value: Mapping[str, Any]) -> AttributeValue:
    """Decode an OTLP ``AnyValue`` object.

    Raises ``TypeError`` or ``ValueError`` for a value that is not an ``AnyValue``.
    """
    if not isinstance(value, Mapping):
        raise TypeError(f"an attribute value is a JSON {type(value).__name__}, not an object")
    if "stringValue" in value:
        return value["stringValue"]  # type: ignore[no-any-return]
    if "intValue" in value:
        return int(value["intValue"])
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "arrayValue" in value:
        return [any_value(item) for item in _values_of(value["arrayValue"])]
    if "kvlistValue" in value:
        return attributes_of(_values_of(value["kvlistValue"]))
    if "bytesValue" in value:
        return base64.b64decode(value["bytesValue"]).hex()
    return None


def _values_of(holder: Any) -> Any:
    # The ``values`` of an ArrayValue or KeyValueList object.
    if not isinstance(holder, Mapping):
        raise TypeError(f"arrayValue/kvlistValue is a JSON {type(holder).__name__}, not an object")
    return holder.get("values") or ()


def attributes_of(key_values: Any) -> dict[str, AttributeValue]:
    """Decode a list of OTLP ``KeyValue`` objects.

    Raises ``TypeError`` or ``ValueError`` for anything that is not such a list.
    """
    if not key_values:
        return {}
    if not isinstance(key_values, list):
        raise TypeError(f"attributes are a JSON {type(key_values).__name__}, not a list")
    try:
        # Strings are most attribute values, so they skip the general decoder.
        attributes = {
            kv["key"]: value["stringValue"] if "stringValue" in value else any_value(value)
            for kv in key_values
            for value in (kv.get("value") or _NO_VALUE,)
        }
    except RecursionError:
        raise ValueError("attribute values nested too deeply") from None
    except (AttributeError, KeyError):
        raise TypeError("an attribute is not a {key, value} object") from None
    if not all(type(key) is str for key in attributes):
        raise TypeError("an attribute key is not a string")
    return attributes


_NO_VALUE: Mapping[str, Any] = {}


def kind_of(raw: Any) -> SpanKind:
    """A span kind from its OTLP number or enum name."""
    if raw is None:
        return SpanKind.INTERNAL
    kind = KINDS_BY_NUMBER.get(raw) if isinstance(raw, int) else KINDS_BY_NAME.get(raw)
    if kind is None:
        raise SpanDataError(f"unknown span kind {raw!r}")
    return kind


def status_of(code: Any, message: Any) -> tuple[StatusCode, str]:
    """A status code from its OTLP number or enum name, and its message."""
    status = STATUS_BY_NUMBER.get(code) if isinstance(code, int) else STATUS_BY_NAME.get(code)
    if status is None:
        raise SpanDataError(f"unknown status code {code!r}")
    return status, message or ""


def _status_of(raw: Any) -> tuple[StatusCode, str]:
    if not raw:
        return StatusCode.UNSET, ""
    if not isinstance(raw, Mapping):
        raise SpanDataError(f"status is a JSON {type(raw).__name__}, not an object")
    code, message = status_of(raw.get("code", 0), raw.get("message", ""))
    if not isinstance(message, str):
        raise SpanDataError("status message is not a string")
    return code, message


def _span_record(
    span: Mapping[str, Any], resource: dict[str, AttributeValue], known: KnownIds, scope: str = ""
) -> SpanRecord:
    if not isinstance(span, Mapping):
        raise SpanDataError(f"a JSON {type(span).__name__}, not a span object")
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
    except TypeError:
        raise SpanDataError("an id is not a string") from None
    if "startTimeUnixNano" not in span:
        raise SpanDataError("startTimeUnixNano is missing")
    start = timestamp_ns(span["startTimeUnixNano"], "startTimeUnixNano")
    raw_end = span.get("endTimeUnixNano")
    # An end of 0 (or none) is how exporters write a span that never ended.
    end = timestamp_ns(raw_end, "endTimeUnixNano") if raw_end else None
    name = span.get("name", "")
    if not isinstance(name, str):
        raise SpanDataError(f"name is a JSON {type(name).__name__}, not a string")
    status = _status_of(span.get("status"))
    raw_events = span.get("events")
    # Decoded here rather than in span_record, so that a bad value is reported as this span's problem.
    events: list[EventFields] = []
    if raw_events:
        for event in _list_of(raw_events, "events"):
            if not isinstance(event, Mapping):
                raise SpanDataError("an event is not an object")
            time_ns = timestamp_ns(event.get("timeUnixNano") or 0, "an event's timeUnixNano")
            event_name = event.get("name", "")
            if not isinstance(event_name, str):
                raise SpanDataError("an event's name is not a string")
            events.append((event_name, time_ns, attributes_of(event.get("attributes"))))
    raw_links = span.get("links")
    links: list[LinkFields] = []
    if raw_links:
        try:
            for link in _list_of(raw_links, "links"):
                if not isinstance(link, Mapping):
                    raise SpanDataError("a link is not an object")
                linked_trace = normalize_id(link.get("traceId"), 16, "link traceId")
                linked_span = normalize_id(link.get("spanId"), 8, "link spanId")
                links.append((linked_trace, linked_span, attributes_of(link.get("attributes"))))
        except BadIdError as exc:
            raise SpanDataError(str(exc)) from None
    try:
        kind = kind_of(span.get("kind"))
    except TypeError:  # an unhashable kind: a list or an object
        raise SpanDataError(f"unknown span kind {span.get('kind')!r}") from None
    attributes = attributes_of(span.get("attributes"))
    return span_record(
        (trace_id, span_id, parent), name, start, end, kind, status, attributes, resource, events, links, scope
    )


def _scope_name(scope_span: Mapping[str, Any]) -> str:
    """The name of a scopeSpans' instrumentation scope (instrumentationLibrary in old files); "" if none."""
    scope = scope_span.get("scope") or scope_span.get("instrumentationLibrary")
    name = scope.get("name") if isinstance(scope, Mapping) else None
    return name if isinstance(name, str) else ""


def _list_of(raw: Any, what: str) -> list[Any]:
    if not isinstance(raw, list):
        raise SpanDataError(f"{what} is a JSON {type(raw).__name__}, not a list")
    return raw


def _where_list(raw: Any, where: str, problems: list[str]) -> list[Any]:
    """``raw`` if it is a list; otherwise an empty one, and a problem saying what ``where`` is instead."""
    if isinstance(raw, list):
        return raw
    problems.append(f"{where} is a JSON {_json_type(raw)}, not a list")
    return []


def _json_type(raw: Any) -> str:
    if isinstance(raw, Mapping):
        return "object"
    if isinstance(raw, str):
        return "string"
    if isinstance(raw, bool):
        return "boolean"
    if isinstance(raw, (int, float)):
        return "number"
    return "null" if raw is None else type(raw).__name__


def records_from_otlp(document: Mapping[str, Any], problems: list[str], where: str = "") -> list[SpanRecord]:
    """Span records of one ``{"resourceSpans": ...}`` document.

    Spans that cannot be used are skipped and described in ``problems`` (one entry each,
    with their position); the others are still returned. So is any part of the document
    that does not have the shape OTLP gives it (a list that is a number, ...).
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
        at = f"{where}resourceSpans[{r}]"
        if not isinstance(resource_span, Mapping):
            problems.append(f"{at} is a JSON {_json_type(resource_span)}, not an object")
            continue
        try:
            raw_resource = resource_span.get("resource") or {}
            if not isinstance(raw_resource, Mapping):
                raise TypeError(f"resource is a JSON {_json_type(raw_resource)}, not an object")
            resource = attributes_of(raw_resource.get("attributes"))
        except (TypeError, ValueError) as exc:
            problems.append(f"{at}: unreadable resource ({exc})")
            continue
        key = "scopeSpans"
        scope_spans = resource_span.get(key)
        if scope_spans is None:
            key = "instrumentationLibrarySpans"
            scope_spans = resource_span.get(key) or []
        for s, scope_span in enumerate(_where_list(scope_spans, f"{at}.{key}", problems)):
            if not isinstance(scope_span, Mapping):
                problems.append(f"{at}.{key}[{s}] is a JSON {_json_type(scope_span)}, not an object")
                continue
            spans = scope_span.get("spans")
            if not spans:
                continue
            scope = _scope_name(scope_span)
            for i, span in enumerate(_where_list(spans, f"{at}.{key}[{s}].spans", problems)):
                try:
                    append(_span_record(span, resource, known, scope))
                except SpanDataError as exc:
                    problems.append(f"{at}.{key}[{s}].spans[{i}]: {exc}")
                except (AttributeError, KeyError, TypeError, ValueError, RecursionError) as exc:
                    problems.append(f"{at}.{key}[{s}].spans[{i}]: malformed span ({_reason(exc)})")
    return records


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc) or type(exc).__name__

"""OTLP protobuf (``ExportTraceServiceRequest``) to span records.

The receiver of ``otel-agent-profiler serve`` gets spans as protobuf messages; this turns them
into the core's ``SpanRecord`` objects. Like the JSON reader it is tolerant: a span that cannot
be used (bad ids, unknown enum values) is skipped and described in ``problems``, the others are
still returned. Ids become lowercase hex, bytes values hex strings.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from google.protobuf import json_format  # type: ignore[import-untyped]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from ..core.records import AttributeValue, SpanRecord
from ..errors import SpanDataError
from .otlp_records import LinkFields, kind_from_number, span_record, status_from_number

_NO_SPAN = b"\x00" * 8


def any_value(value: AnyValue) -> AttributeValue:
    """Decode a protobuf ``AnyValue`` (an unset one is ``None``)."""
    which = value.WhichOneof("value")
    if which == "string_value":
        return value.string_value
    if which == "int_value":
        return value.int_value
    if which == "bool_value":
        return value.bool_value
    if which == "double_value":
        return value.double_value
    if which == "array_value":
        return [any_value(item) for item in value.array_value.values]
    if which == "kvlist_value":
        return attributes_of(value.kvlist_value.values)
    if which == "bytes_value":
        return value.bytes_value.hex()
    return None


def attributes_of(key_values: Sequence[KeyValue]) -> dict[str, AttributeValue]:
    """Decode repeated ``KeyValue`` messages."""
    out: dict[str, AttributeValue] = {}
    for kv in key_values:
        value = kv.value
        # Strings and ints are most attributes: decoded here without a call to ``any_value``.
        which = value.WhichOneof("value")
        if which == "string_value":
            out[kv.key] = value.string_value
        elif which == "int_value":
            out[kv.key] = value.int_value
        else:
            out[kv.key] = any_value(value)
    return out


def _id(raw: bytes, size: int, what: str) -> str:
    if len(raw) != size:
        raise SpanDataError(f"{what} must be {size} bytes, got {len(raw)}")
    if raw.count(0) == size:
        raise SpanDataError(f"{what} is all zeros")
    return raw.hex()


def check_span(span: Span) -> str:
    """The hex trace id of a span ``record_of`` can turn into a record; otherwise raises the
    ``SpanDataError`` it would raise, without decoding attributes, events or links."""
    trace_id = _id(span.trace_id, 16, "trace_id")
    _id(span.span_id, 8, "span_id")
    parent = span.parent_span_id
    if parent and parent != _NO_SPAN:
        _id(parent, 8, "parent_span_id")
    kind_from_number(span.kind)
    status_from_number(span.status.code)
    for link in span.links:
        _id(link.trace_id, 16, "link trace_id")
        _id(link.span_id, 8, "link span_id")
    return trace_id


def record_of(span: Span, resource: dict[str, AttributeValue], scope: str = "") -> SpanRecord:
    """One span as a record; raises ``SpanDataError`` for a span that cannot be used."""
    trace_id = _id(span.trace_id, 16, "trace_id")
    span_id = _id(span.span_id, 8, "span_id")
    parent: str | None = None
    if span.parent_span_id and span.parent_span_id != _NO_SPAN:
        parent = _id(span.parent_span_id, 8, "parent_span_id")
    kind = kind_from_number(span.kind)
    status = (status_from_number(span.status.code), span.status.message)
    return span_record(
        (trace_id, span_id, parent),
        span.name,
        span.start_time_unix_nano,
        span.end_time_unix_nano,
        kind,
        status,
        attributes_of(span.attributes),
        resource,
        ((e.name, e.time_unix_nano, attributes_of(e.attributes)) for e in span.events) if span.events else (),
        map(_link_fields, span.links) if span.links else (),
        scope,
    )


def _link_fields(link: Span.Link) -> LinkFields:
    trace_id = _id(link.trace_id, 16, "link trace_id")
    return trace_id, _id(link.span_id, 8, "link span_id"), attributes_of(link.attributes)


def resource_attributes(resource: Resource) -> dict[str, AttributeValue]:
    return attributes_of(resource.attributes)


def records_from_request(
    request: ExportTraceServiceRequest, problems: list[str]
) -> list[tuple[SpanRecord | None, ResourceSpans, ScopeSpans, Span]]:
    """Each span of ``request`` with its record, or ``None`` when it cannot be profiled.

    Unusable spans are described in ``problems`` (with their position) but still returned,
    so a caller forwarding spans can forward them unprofiled.
    """
    result: list[tuple[SpanRecord | None, ResourceSpans, ScopeSpans, Span]] = []
    for r, resource_spans in enumerate(request.resource_spans):
        resource = resource_attributes(resource_spans.resource)
        for s, scope_spans in enumerate(resource_spans.scope_spans):
            scope = scope_spans.scope.name
            for i, span in enumerate(scope_spans.spans):
                record: SpanRecord | None
                try:
                    record = record_of(span, resource, scope)
                except SpanDataError as exc:
                    problems.append(f"resource_spans[{r}].scope_spans[{s}].spans[{i}]: {exc}")
                    record = None
                result.append((record, resource_spans, scope_spans, span))
    return result


def records_from_proto(
    request: ExportTraceServiceRequest | bytes, problems: list[str] | None = None
) -> list[SpanRecord]:
    """The usable span records of a request (or of its serialized bytes)."""
    if isinstance(request, bytes):
        message = ExportTraceServiceRequest()
        message.ParseFromString(request)
        request = message
    found: list[str] = [] if problems is None else problems
    return [record for record, *_ in records_from_request(request, found) if record is not None]


def to_any_value(value: Any) -> AnyValue:
    """A Python attribute value as a protobuf ``AnyValue`` (bool, int, float, str, sequences)."""
    out = AnyValue()
    set_any_value(out, value)
    return out


def set_any_value(out: AnyValue, value: Any) -> None:
    """Set the empty ``AnyValue`` ``out`` to a Python attribute value, as ``to_any_value`` would."""
    if isinstance(value, str):
        out.string_value = value
    elif isinstance(value, bool):
        out.bool_value = value
    elif isinstance(value, int):
        out.int_value = value
    elif isinstance(value, float):
        out.double_value = value
    elif isinstance(value, (list, tuple)):
        out.array_value.SetInParent()  # an empty sequence is an empty array, not an unset value
        values = out.array_value.values
        for item in value:
            set_any_value(values.add(), item)
    elif value is not None:
        out.string_value = str(value)


_ID_KEYS = ("traceId", "spanId", "parentSpanId")


def _hex_ids_to_base64(holder: dict[str, Any]) -> None:
    for key in _ID_KEYS:
        raw = holder.get(key)
        if isinstance(raw, str) and raw:
            try:
                holder[key] = base64.b64encode(bytes.fromhex(raw)).decode("ascii")
            except ValueError:
                raise SpanDataError(f"{key} is not hex") from None


def request_from_otlp_json(data: bytes | str) -> ExportTraceServiceRequest:
    """An OTLP/JSON ``ExportTraceServiceRequest`` body as the protobuf message.

    OTLP/JSON writes ids as hex where protobuf's generic JSON mapping expects base64; they are
    converted first. Unknown fields are ignored, as OTLP receivers must. Raises ``ValueError``
    (``json.JSONDecodeError``, ``SpanDataError`` or protobuf's ``ParseError``) for a bad body.
    """
    try:
        document = json.loads(data)
    except RecursionError:
        raise SpanDataError("the body is nested too deeply") from None
    if not isinstance(document, dict):
        raise SpanDataError("the body is not a JSON object")
    try:
        for resource_spans in document.get("resourceSpans") or ():
            for scope_spans in resource_spans.get("scopeSpans") or ():
                for span in scope_spans.get("spans") or ():
                    _hex_ids_to_base64(span)
                    for link in span.get("links") or ():
                        _hex_ids_to_base64(link)
    except (AttributeError, TypeError):
        raise SpanDataError("the body does not have the shape of an ExportTraceServiceRequest") from None
    message = ExportTraceServiceRequest()
    try:
        json_format.ParseDict(document, message, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise SpanDataError(str(exc)) from None
    except RecursionError:
        raise SpanDataError("the body is nested too deeply") from None
    return message

"""The fast path for OTLP JSON: decode straight into typed structs with msgspec.

Decoding into structs skips building a dict for every span, attribute and value, which is
most of the cost of reading a large export. A document that does not fit the schema raises
``msgspec.ValidationError``; the caller then falls back to the tolerant dict-based reader
in ``otlp_json``, which reports each unusable span and keeps the rest.

The document is decoded with its spans left as raw JSON, then ``SPAN_BATCH`` spans at a time, each
batch turned into records before the next is decoded. Decoded whole, the spans' structs of a
200,000-span export took about 150 MB more at the peak, and the memory they left behind stayed
with the process, scattered between the strings the records keep.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from contextlib import contextmanager
from sys import intern

import msgspec

from ..core.records import AttributeValue, SpanEvent, SpanKind, SpanLink, SpanRecord, StatusCode
from ..errors import BadIdError, SpanDataError
from .ids import KnownIds, normalize_id, normalize_parent_id
from .otlp_records import (
    KINDS_BY_NAME,
    KINDS_BY_NUMBER,
    STATUS_BY_NAME,
    STATUS_BY_NUMBER,
    TIMESTAMP_LIMIT_NS,
    timestamp_ns,
)


class ArrayValue(msgspec.Struct, frozen=True, gc=False):
    values: list[AnyValue] = []


class KeyValueList(msgspec.Struct, frozen=True, gc=False):
    values: list[KeyValue] = []


class AnyValue(msgspec.Struct, frozen=True, gc=False):
    stringValue: str | None = None
    intValue: int | str | None = None
    doubleValue: float | str | None = None
    boolValue: bool | None = None
    arrayValue: ArrayValue | None = None
    kvlistValue: KeyValueList | None = None
    bytesValue: str | None = None


_EMPTY_VALUE = AnyValue()


class KeyValue(msgspec.Struct, frozen=True, gc=False):
    key: str
    value: AnyValue = _EMPTY_VALUE


class Event(msgspec.Struct, frozen=True, gc=False):
    timeUnixNano: int | str = 0
    name: str = ""
    attributes: list[KeyValue] = []


class Link(msgspec.Struct, frozen=True, gc=False):
    traceId: str
    spanId: str
    attributes: list[KeyValue] = []


class Status(msgspec.Struct, frozen=True, gc=False):
    code: int | str = 0
    message: str = ""


class Span(msgspec.Struct, frozen=True, gc=False):
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


class Scope(msgspec.Struct, frozen=True, gc=False):
    name: str = ""


class ScopeSpans(msgspec.Struct, frozen=True, gc=False):
    #: Each span's JSON, decoded a batch at a time (``records_from_json``).
    spans: list[msgspec.Raw] = []
    scope: Scope | None = None
    instrumentationLibrary: Scope | None = None


class Resource(msgspec.Struct, frozen=True, gc=False):
    attributes: list[KeyValue] = []


_EMPTY_RESOURCE = Resource()


class ResourceSpans(msgspec.Struct, frozen=True, gc=False):
    resource: Resource = _EMPTY_RESOURCE
    scopeSpans: list[ScopeSpans] = []
    instrumentationLibrarySpans: list[ScopeSpans] = []


class TracesData(msgspec.Struct, frozen=True, gc=False):
    resourceSpans: list[ResourceSpans]


_DOCUMENT = msgspec.json.Decoder(TracesData)
_SPANS = msgspec.json.Decoder(list[Span])
#: Spans decoded at a time: large enough that a decoder call per batch costs nothing measurable,
#: small enough that a batch's structs (about a megabyte) are reused by the next one.
SPAN_BATCH = 2000


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
    # Keys repeat from span to span: one shared string each rather than a copy per span (33 MB
    # less over the lean 200,000-span export, 120 MB over the content-heavy one). Values are kept
    # as decoded: sharing the short ones saved a little more memory and cost a tenth more time.
    return {
        intern(kv.key): string if (string := kv.value.stringValue) is not None else _value(kv.value)
        for kv in key_values
    }


def _span_events(events: list[Event]) -> tuple[SpanEvent, ...]:
    return tuple(
        SpanEvent(e.name, timestamp_ns(e.timeUnixNano, "an event's timeUnixNano"), _attributes(e.attributes))
        for e in events
    )


def _span_links(links: list[Link]) -> tuple[SpanLink, ...]:
    return tuple(
        SpanLink(
            normalize_id(link.traceId, 16, "link traceId"),
            normalize_id(link.spanId, 8, "link spanId"),
            _attributes(link.attributes),
        )
        for link in links
    )


#: Span kinds by OTLP number or enum name, and None (no kind) as the SDK reads it.
_KINDS: dict[int | str | None, SpanKind] = {None: SpanKind.INTERNAL}
_KINDS.update(KINDS_BY_NUMBER.items())
_KINDS.update(KINDS_BY_NAME.items())
#: Status codes by OTLP number or enum name.
_STATUS: dict[int | str, StatusCode] = {}
_STATUS.update(STATUS_BY_NUMBER.items())
_STATUS.update(STATUS_BY_NAME.items())


#: The spans of one scope still to be decoded: its resource's attributes (the same list for every
#: scope of one resource), the scope's name and each span's JSON.
ScopeSlice = tuple[list[KeyValue], str, list[msgspec.Raw]]


def records_from_json(data: bytes) -> list[SpanRecord]:
    """Span records of an OTLP JSON document.

    Raises ``msgspec.ValidationError`` when the document does not fit the schema and
    ``SpanDataError`` when any span is unusable (a bad id, an unknown enum, a timestamp that is
    not a number or out of range, values nested too deeply), so the caller can rerun the
    tolerant reader, which says which spans and why; ``msgspec.DecodeError`` when ``data`` is not
    one JSON document.
    """
    return records_of(scanned(data))


def scanned(data: bytes) -> list[ScopeSlice]:
    """The spans of an OTLP JSON document, found but not decoded, scope by scope in document order.

    Raises ``msgspec.DecodeError`` when ``data`` is not one JSON document and
    ``msgspec.ValidationError`` when its outline does not fit the schema.
    """
    document = _DOCUMENT.decode(data)
    slices: list[ScopeSlice] = []
    for resource_spans in document.resourceSpans:
        resource = resource_spans.resource.attributes
        for scope_spans in resource_spans.scopeSpans or resource_spans.instrumentationLibrarySpans:
            named = scope_spans.scope or scope_spans.instrumentationLibrary
            slices.append((resource, named.name if named is not None else "", scope_spans.spans))
    return slices


def records_of(slices: list[ScopeSlice]) -> list[SpanRecord]:
    """The records of the spans of ``slices`` (``scanned``), in order; raises as ``records_from_json``."""
    records: list[SpanRecord] = []
    known = KnownIds()
    # One dict per resource, shared by the records of all its scopes.
    resources: dict[int, dict[str, AttributeValue]] = {}
    with _unusable_spans():
        for key_values, scope, raw in slices:
            resource = resources.get(id(key_values))
            if resource is None:
                resource = resources[id(key_values)] = _attributes(key_values)
            for batch in _batches(raw):
                _add_records(_SPANS.decode(batch), resource, scope, known, records)
    return records


def _batches(raw: list[msgspec.Raw]) -> Iterator[bytes]:
    """The spans' JSON as arrays of ``SPAN_BATCH`` spans, to be decoded a batch at a time."""
    for start in range(0, len(raw), SPAN_BATCH):
        yield b"[" + b",".join(raw[start : start + SPAN_BATCH]) + b"]"


@contextmanager
def _unusable_spans() -> Iterator[None]:
    """A span's unusable value raised in the block as ``SpanDataError`` (``records_from_json``)."""
    try:
        yield
    except (msgspec.DecodeError, UnicodeDecodeError):
        raise  # a batch the schema does not fit, as the whole document would have raised
    except (BadIdError, ValueError, TypeError, RecursionError) as exc:
        raise SpanDataError(str(exc)) from exc


class _TraceOfSpan(msgspec.Struct, frozen=True, gc=False):
    traceId: str


_TRACE_IDS = msgspec.json.Decoder(list[_TraceOfSpan])


def trace_ids_of(slices: list[ScopeSlice]) -> list[str]:
    """The trace id of each span of ``slices``, in order, as its record will have it, read without
    decoding the rest of the span: to split the spans by trace before they are decoded. Raises as
    ``records_of`` (a span with no trace id, or one that is not an id)."""
    trace_ids: list[str] = []
    known: dict[str, str] = {}
    with _unusable_spans():
        for _, _, raw in slices:
            for batch in _batches(raw):
                for span in _TRACE_IDS.decode(batch):
                    value = span.traceId
                    trace_id = known.get(value) or known.setdefault(value, normalize_id(value, 16, "traceId"))
                    trace_ids.append(trace_id)
    return trace_ids


def _add_records(
    spans: list[Span], resource: dict[str, AttributeValue], scope: str, known: KnownIds, records: list[SpanRecord]
) -> None:
    """Append the records of ``spans``, decoded spans of one scope."""
    append = records.append
    traces = known.traces
    span_ids = known.spans
    kinds = _KINDS
    statuses = _STATUS
    unset = StatusCode.UNSET
    # Each decoded span is dropped as soon as its record is made. The loop is written out, with
    # no call per span that it can do without: it turns every span of the file into a record.
    for index, span in enumerate(spans):
        spans[index] = None  # type: ignore[call-overload]
        raw = span.traceId
        trace_id = traces.get(raw) or traces.setdefault(raw, normalize_id(raw, 16, "traceId"))
        raw = span.spanId
        span_id = span_ids.get(raw) or span_ids.setdefault(raw, normalize_id(raw, 8, "spanId"))
        raw_parent = span.parentSpanId
        parent = (span_ids.get(raw_parent) or normalize_parent_id(raw_parent)) if raw_parent else None
        # int() of what msgspec decoded (an int, or a str of digits) is timestamp_ns's
        # conversion; anything else makes the tolerant reader say what is wrong.
        start = int(span.startTimeUnixNano)
        raw_end = span.endTimeUnixNano
        # An end of 0 (or none) is how exporters write a span that never ended.
        end = int(raw_end) or None if raw_end else None
        if not 0 <= start < TIMESTAMP_LIMIT_NS or (end is not None and not 0 < end < TIMESTAMP_LIMIT_NS):
            raise SpanDataError("a timestamp is out of range")
        kind = kinds.get(span.kind)
        if kind is None:
            raise SpanDataError(f"unknown span kind {span.kind!r}")
        status = span.status
        if status is None:
            code, message = unset, ""
        else:
            code = statuses.get(status.code)  # type: ignore[assignment]
            if code is None:
                raise SpanDataError(f"unknown status code {status.code!r}")
            message = status.message
        append(
            SpanRecord(
                trace_id,
                span_id,
                parent,
                intern(span.name),
                start,
                end,
                kind,
                code,
                message,
                _attributes(span.attributes),
                _span_events(span.events) if span.events else (),
                _span_links(span.links) if span.links else (),
                resource,
                scope,
            )
        )

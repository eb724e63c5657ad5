"""Span records from decoded OTLP spans: what the three OTLP readers share.

``otlp_json`` (dicts), ``otlp_json_typed`` (msgspec structs) and ``otlp_proto`` (protobuf
messages) each decode ids and attribute values their own way; the enum numbers, the shape of a
record with its events and links, and the span that never ended are dealt with here, once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import starmap

from ..core.records import AttributeValue, SpanEvent, SpanKind, SpanLink, SpanRecord, StatusCode
from ..errors import SpanDataError

#: OTLP span kinds by number. UNSPECIFIED (0) is treated as INTERNAL, as the SDK does.
KINDS_BY_NUMBER: Mapping[int, SpanKind] = {
    0: SpanKind.INTERNAL,
    1: SpanKind.INTERNAL,
    2: SpanKind.SERVER,
    3: SpanKind.CLIENT,
    4: SpanKind.PRODUCER,
    5: SpanKind.CONSUMER,
}
#: OTLP span kinds by enum name, as OTLP JSON may write them.
KINDS_BY_NAME: Mapping[str, SpanKind] = {
    "SPAN_KIND_UNSPECIFIED": SpanKind.INTERNAL,
    "SPAN_KIND_INTERNAL": SpanKind.INTERNAL,
    "SPAN_KIND_SERVER": SpanKind.SERVER,
    "SPAN_KIND_CLIENT": SpanKind.CLIENT,
    "SPAN_KIND_PRODUCER": SpanKind.PRODUCER,
    "SPAN_KIND_CONSUMER": SpanKind.CONSUMER,
}
#: OTLP status codes by number.
STATUS_BY_NUMBER: Mapping[int, StatusCode] = {0: StatusCode.UNSET, 1: StatusCode.OK, 2: StatusCode.ERROR}
#: OTLP status codes by enum name.
STATUS_BY_NAME: Mapping[str, StatusCode] = {
    "STATUS_CODE_UNSET": StatusCode.UNSET,
    "STATUS_CODE_OK": StatusCode.OK,
    "STATUS_CODE_ERROR": StatusCode.ERROR,
}

#: An event as a reader decoded it: name, time (ns since the epoch), attributes.
EventFields = tuple[str, int, dict[str, AttributeValue]]
#: A link as a reader decoded it: trace id, span id (lowercase hex), attributes.
LinkFields = tuple[str, str, dict[str, AttributeValue]]


#: Timestamps are unsigned 64-bit nanoseconds since the epoch (OTLP's fixed64): anything outside
#: is no time at all, and would overflow the float milliseconds of the reports.
TIMESTAMP_LIMIT_NS = 2**64


def timestamp_ns(raw: object, what: str) -> int:
    """A timestamp in ns since the epoch from an integer or a decimal string.

    Raises ``SpanDataError`` naming ``what`` for anything else: not a number, negative, or
    beyond 64 bits (a float in range is truncated to whole nanoseconds).
    """
    try:
        value: int = int(raw)  # type: ignore[call-overload]
    except (TypeError, ValueError, OverflowError):
        raise SpanDataError(f"{what} must be an integer of nanoseconds, got {_short(raw)}") from None
    if 0 <= value < TIMESTAMP_LIMIT_NS and raw is not True:
        return value
    if isinstance(raw, bool):
        raise SpanDataError(f"{what} must be an integer of nanoseconds, got {raw!r}")
    raise SpanDataError(f"{what} is out of range (not 0 to 2^64 ns since 1970): {_short(raw)}")


def _short(raw: object) -> str:
    try:
        text = repr(raw)
    except ValueError:  # an int too long for Python to print
        return "a number of thousands of digits"
    return text if len(text) <= 40 else f"{text[:30]}... ({len(text)} characters)"


def kind_from_number(number: int) -> SpanKind:
    """The span kind of an OTLP kind number; raises ``SpanDataError`` for an unknown one."""
    kind = KINDS_BY_NUMBER.get(number)
    if kind is None:
        raise SpanDataError(f"unknown span kind {number!r}")
    return kind


def status_from_number(number: int) -> StatusCode:
    """The status code of an OTLP status number; raises ``SpanDataError`` for an unknown one."""
    status = STATUS_BY_NUMBER.get(number)
    if status is None:
        raise SpanDataError(f"unknown status code {number!r}")
    return status


def span_record(
    ids: tuple[str, str, str | None],
    name: str,
    start_ns: int,
    end_ns: int | None,
    kind: SpanKind,
    status: tuple[StatusCode, str],
    attributes: dict[str, AttributeValue],
    resource: dict[str, AttributeValue],
    events: Iterable[EventFields] = (),
    links: Iterable[LinkFields] = (),
    scope: str = "",
) -> SpanRecord:
    """One span's record from its decoded fields.

    Args:
        ids: trace id, span id and parent span id (None for a root), lowercase hex.
        name: the span's name.
        start_ns: start time, ns since the epoch.
        end_ns: end time; 0 or None for a span that never ended (how exporters write one).
        kind: the span kind.
        status: status code and message.
        attributes: the span's attributes.
        resource: the attributes of the resource that emitted the span, shared by its spans.
        events: the span's events; consumed here, so a reader may pass a generator (for none,
            an empty sequence rather than an empty generator: it is cheaper).
        links: the span's links, likewise.
        scope: the name of the instrumentation scope that wrote the span.
    """
    trace_id, span_id, parent_id = ids
    code, message = status
    return SpanRecord(
        trace_id,
        span_id,
        parent_id,
        name,
        start_ns,
        end_ns or None,
        kind,
        code,
        message,
        attributes,
        # Most spans have neither: an empty list or tuple costs nothing to skip.
        tuple(starmap(SpanEvent, events)) if events else (),
        tuple(starmap(SpanLink, links)) if links else (),
        resource,
        scope,
    )

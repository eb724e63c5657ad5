"""The span record: the one input shape the analysis core understands.

Every source (a live ``ReadableSpan``, OTLP JSON, Jaeger JSON, ...) is turned into
``SpanRecord`` objects by an adapter; nothing in the core knows where a record came from.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Union

AttributeValue = Union[str, bool, int, float, None, Sequence["AttributeValue"], Mapping[str, "AttributeValue"]]  # noqa: UP007


def non_negative_number(value: object) -> float | None:
    """An attribute's value as a float when it is a finite number of at least 0 (a bool is not), else None.

    Attributes come from other people's instrumentations and files: a string, NaN, a negative or
    an integer too large for a float is no amount of anything.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


def seconds_as_ns(value: object) -> int | None:
    """An attribute's value in seconds as whole nanoseconds, when it is a usable amount (see
    ``non_negative_number``) whose nanoseconds are finite too; else None."""
    seconds = non_negative_number(value)
    if seconds is None:
        return None
    nanoseconds = seconds * 1e9
    return round(nanoseconds) if math.isfinite(nanoseconds) else None


Attributes = Mapping[str, AttributeValue]


class SpanKind(str, enum.Enum):
    """OpenTelemetry span kinds, named as the specification names them."""

    INTERNAL = "INTERNAL"
    SERVER = "SERVER"
    CLIENT = "CLIENT"
    PRODUCER = "PRODUCER"
    CONSUMER = "CONSUMER"


class StatusCode(str, enum.Enum):
    """OpenTelemetry span status codes."""

    UNSET = "UNSET"
    OK = "OK"
    ERROR = "ERROR"


@dataclass(slots=True, frozen=True)
class SpanEvent:
    """A timestamped event recorded on a span (e.g. one streamed completion chunk)."""

    name: str
    time_ns: int
    attributes: Attributes = field(default_factory=dict)


@dataclass(slots=True, frozen=True)
class SpanLink:
    """A link from one span to another, possibly in another trace."""

    trace_id: str
    span_id: str
    attributes: Attributes = field(default_factory=dict)


@dataclass(slots=True)
class SpanRecord:
    """One finished (or still open) span, as the analysis core sees it.

    Ids are lowercase hex: 32 characters for trace ids, 16 for span ids. ``end_ns`` is
    ``None`` for a span that never ended. ``resource`` is usually shared between the
    records of one process, so it must be treated as read-only. ``scope`` is the name of the
    instrumentation scope that wrote the span (``openinference.instrumentation.openai``), empty
    when the source does not say.
    """

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    start_ns: int
    end_ns: int | None
    kind: SpanKind = SpanKind.INTERNAL
    status: StatusCode = StatusCode.UNSET
    status_message: str = ""
    attributes: Attributes = field(default_factory=dict)
    events: Sequence[SpanEvent] = ()
    links: Sequence[SpanLink] = ()
    resource: Attributes = field(default_factory=dict)
    scope: str = ""

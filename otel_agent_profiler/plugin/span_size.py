"""An estimate of the memory an ended SDK span holds, for the profiler's limit in bytes.

Measured with tracemalloc on SDK 1.45: an ended span with a dozen short attributes holds about
3 KB (the span, its context, its bounded attribute dict, the copied strings); each 10 kB string
adds its length. The estimate is a base, a share per attribute and event, and the length of every
string value, which is where prompts and completions make spans large. It runs on the
application's thread once per span, so it reads the SDK's fields directly (about half a
microsecond for a handful of attributes).
"""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan

from .._sdk_internals import ATTRIBUTES_FIELD, BOUNDED_ATTRIBUTES_DICT, EVENTS_FIELD

SPAN_BASE_BYTES = 2000
ATTRIBUTE_BYTES = 100
EVENT_BYTES = 400


def span_size(span: ReadableSpan) -> int:
    """Estimated bytes ``span`` holds while the profiler keeps it."""
    try:
        fields = span.__dict__
        values = getattr(fields[ATTRIBUTES_FIELD], BOUNDED_ATTRIBUTES_DICT).values()
        events = fields[EVENTS_FIELD]
    except (AttributeError, KeyError, TypeError):
        # Not the SDK's own layout (an enriched copy, a subclass, a test double): the public road.
        values = (span.attributes or {}).values()
        events = span.events
    total = SPAN_BASE_BYTES + ATTRIBUTE_BYTES * len(values)
    if events:
        total += EVENT_BYTES * len(events)
    for value in values:
        if value.__class__ is str:
            total += len(value)
    return total

"""The enriched copy of an SDK span that the processor hands downstream.

The copy keeps every original attribute, event, link and dropped count; an original
attribute is never overwritten, even one in the ``agent_profiler.`` namespace.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from .._sdk_internals import ATTRIBUTES_FIELD, BOUNDED_ATTRIBUTES_DICT


class EnrichedSpan(ReadableSpan):
    """A copy of an ended span with extra attributes; everything else is the original's."""

    def __init__(self, original: ReadableSpan, extra: Mapping[str, Any]) -> None:
        merged = {**extra, **(original.attributes or {})}  # originals win: they are never changed
        super().__init__(
            name=original.name,
            context=original.context,
            parent=original.parent,
            resource=original.resource,
            attributes=merged,
            events=original.events,
            links=original.links,
            kind=original.kind,
            status=original.status,
            start_time=original.start_time,
            end_time=original.end_time,
            instrumentation_scope=original.instrumentation_scope,
        )
        self._dropped = (original.dropped_attributes, original.dropped_events, original.dropped_links)

    @classmethod
    def of(cls, original: ReadableSpan, extra: Mapping[str, Any]) -> EnrichedSpan:
        """Same as ``EnrichedSpan(original, extra)``, several times faster.

        It copies the original's fields instead of running ``ReadableSpan.__init__``; a span
        without the SDK's usual layout takes the constructor.
        """
        state = getattr(original, "__dict__", None)
        bounded = getattr(original, ATTRIBUTES_FIELD, None)
        inner = getattr(bounded, BOUNDED_ATTRIBUTES_DICT, None)
        if state is None or type(inner) is not dict or ATTRIBUTES_FIELD not in state:
            return cls(original, extra)
        span = object.__new__(cls)
        # One copy of the instance dict, in C, is about twice as fast as setting the fields one
        # by one; the worker makes a copy of every span it exports.
        fields = state.copy()
        fields[ATTRIBUTES_FIELD] = {**extra, **inner}  # originals win: they are never changed
        # Events and links are the original's bounded lists, which keep their own dropped counts.
        fields["_dropped"] = (original.dropped_attributes, -1, -1)
        span.__dict__ = fields
        return span

    # Exporters report what the SDK dropped; the copy must not hide it. The counts are kept
    # rather than the original span, which can then be freed before the copy is exported.
    @property
    def dropped_attributes(self) -> int:
        return self._dropped[0]

    @property
    def dropped_events(self) -> int:
        dropped = self._dropped[1]
        return super().dropped_events if dropped < 0 else dropped

    @property
    def dropped_links(self) -> int:
        dropped = self._dropped[2]
        return super().dropped_links if dropped < 0 else dropped

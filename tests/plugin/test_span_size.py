"""The estimate of a held span's bytes: the documented base, shares and lengths, for SDK spans and others."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider

from otel_agent_profiler.plugin.enriched_span import EnrichedSpan
from otel_agent_profiler.plugin.span_size import (
    ARRAY_ITEM_BYTES,
    ATTRIBUTE_BYTES,
    EVENT_BYTES,
    SPAN_BASE_BYTES,
    span_size,
)


def _ended_span():  # type: ignore[no-untyped-def]
    tracer = TracerProvider().get_tracer("test")
    span = tracer.start_span(
        "chat gpt-4o",
        attributes={
            "gen_ai.request.model": "gpt-4o",  # 6 characters
            "gen_ai.usage.input_tokens": 1200,
            "gen_ai.request.temperature": 0.2,
            "gen_ai.is_streaming": True,
            "gen_ai.response.finish_reasons": ("stop", "length"),  # 2 items, 4 + 6 characters
            "payload": b"12345678",  # 8 bytes
        },
    )
    span.add_event("chunk", {"gen_ai.content": "hello"})  # 5 characters
    span.end()
    return span


def test_the_estimate_is_the_base_plus_a_share_per_attribute_and_event_plus_every_string_length() -> None:
    span = _ended_span()
    expected = (
        SPAN_BASE_BYTES + 6 * ATTRIBUTE_BYTES + 6 + 2 * ARRAY_ITEM_BYTES + 4 + 6 + 8 + EVENT_BYTES + ATTRIBUTE_BYTES + 5
    )
    assert span_size(span) == expected


def test_a_span_without_the_sdk_layout_is_estimated_the_same_through_its_public_properties() -> None:
    span = _ended_span()
    # A copy made by the constructor is a ReadableSpan with a plain attribute mapping: the public road.
    copy = EnrichedSpan(span, {})
    assert span_size(copy) == span_size(span)

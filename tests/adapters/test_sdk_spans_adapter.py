"""The SDK adapter: every field of a span record, by the fast road (an SDK span's own fields)
and by the public one (properties), which must agree."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.trace import Link, SpanKind, Status, StatusCode, set_span_in_context

from otel_agent_profiler._sdk_internals import PLAIN_LAYOUT_SPAN_TYPES
from otel_agent_profiler.adapters.sdk_spans import record_from_span, records_from_spans
from otel_agent_profiler.core.records import (
    SpanEvent,
    SpanKind as OurKind,
    SpanLink,
    SpanRecord,
    StatusCode as OurStatus,
)


class _Collected(ReadableSpan):
    """A ReadableSpan subclass: it may override properties, so it takes the public road."""


def _copy_as(cls: type[ReadableSpan], span: ReadableSpan, **changes: Any) -> ReadableSpan:
    fields: dict[str, Any] = {
        "name": span.name,
        "context": span.context,
        "parent": span.parent,
        "resource": span.resource,
        "attributes": span.attributes,
        "events": span.events,
        "links": span.links,
        "kind": span.kind,
        "status": span.status,
        "start_time": span.start_time,
        "end_time": span.end_time,
        "instrumentation_scope": span.instrumentation_scope,
    }
    fields.update(changes)
    return cls(**fields)


def _spans() -> tuple[ReadableSpan, ReadableSpan, Any]:
    provider = TracerProvider(resource=Resource.create({"service.name": "adapter-test"}))
    tracer = provider.get_tracer("test")
    parent = tracer.start_span("invoke_agent planner", start_time=1_000)
    linked = tracer.start_span("other", start_time=1_000)
    linked.end(end_time=1_500)
    child = tracer.start_span(
        "chat gpt-4o",
        context=set_span_in_context(parent),
        kind=SpanKind.CLIENT,
        attributes={"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 12, "tags": ("a", "b")},
        links=[Link(linked.get_span_context(), {"link.kind": "follows"})],
        start_time=2_000,
    )
    child.add_event("gen_ai.content.completion.chunk", {"index": 0}, timestamp=2_500)
    child.set_status(Status(StatusCode.ERROR, "rate limited"))
    child.end(end_time=3_000)
    return child, parent, linked


def test_an_sdk_span_becomes_a_record_with_every_field() -> None:
    child, parent, linked = _spans()
    # The tracer's own spans take the fast road (their fields read directly), which this checks.
    assert type(child) in PLAIN_LAYOUT_SPAN_TYPES
    record = record_from_span(child)
    context = child.context
    assert record == SpanRecord(
        trace_id=f"{context.trace_id:032x}",
        span_id=f"{context.span_id:016x}",
        parent_span_id=f"{parent.context.span_id:016x}",
        name="chat gpt-4o",
        start_ns=2_000,
        end_ns=3_000,
        kind=OurKind.CLIENT,
        status=OurStatus.ERROR,
        status_message="rate limited",
        attributes={"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 12, "tags": ("a", "b")},
        events=(SpanEvent("gen_ai.content.completion.chunk", 2_500, {"index": 0}),),
        links=(
            SpanLink(f"{linked.context.trace_id:032x}", f"{linked.context.span_id:016x}", {"link.kind": "follows"}),
        ),
        resource=dict(child.resource.attributes),
        scope="test",
    )
    assert record.resource["service.name"] == "adapter-test"


def test_the_public_road_gives_the_same_record() -> None:
    child, _, _ = _spans()
    # A subclass, and a plain ReadableSpan whose attributes are a plain mapping rather than the
    # SDK's bounded one: neither has the layout the fast road reads.
    for other in (_copy_as(_Collected, child), _copy_as(ReadableSpan, child, attributes=dict(child.attributes or {}))):
        assert record_from_span(other) == record_from_span(child)


def test_a_root_without_events_or_links_gets_empty_tuples() -> None:
    _, parent, _ = _spans()
    parent.end(end_time=4_000)
    record = record_from_span(parent)
    assert record.parent_span_id is None
    assert record.events == () and record.links == ()
    assert record.kind is OurKind.INTERNAL and record.status is OurStatus.UNSET and record.status_message == ""


def test_an_open_span_is_copied_and_an_ended_one_is_not_changed_after() -> None:
    _, parent, _ = _spans()
    parent.set_attribute("step", 1)
    open_record = record_from_span(parent)
    assert open_record.end_ns is None
    parent.set_attribute("step", 2)  # the span is still open, so this lands on it
    assert open_record.attributes["step"] == 1
    parent.end(end_time=4_000)
    ended = record_from_span(parent)
    parent.set_attribute("step", 3)  # ignored by the SDK: the span has ended
    assert ended.attributes["step"] == 2 and ended.end_ns == 4_000


def test_records_of_one_trace_share_its_hex_id() -> None:
    child, parent, linked = _spans()
    parent.end(end_time=4_000)
    records = records_from_spans([child, parent, linked])
    assert {record.trace_id for record in records[:2]} == {f"{child.context.trace_id:032x}"}
    assert records[2].trace_id == f"{linked.context.trace_id:032x}"
    assert [record.name for record in records] == ["chat gpt-4o", "invoke_agent planner", "other"]

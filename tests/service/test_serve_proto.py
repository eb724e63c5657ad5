"""OTLP protobuf to span records, OTLP/JSON to protobuf, and the enrichment of protobuf spans."""

from __future__ import annotations

import json

import pytest
from google.protobuf import json_format  # type: ignore[import-untyped]
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from otel_agent_profiler.adapters.otlp_json import records_from_otlp
from otel_agent_profiler.adapters.otlp_proto import (
    any_value,
    records_from_proto,
    request_from_otlp_json,
    to_any_value,
)
from otel_agent_profiler.adapters.sdk_spans import records_from_spans
from otel_agent_profiler.errors import report_internal_error
from otel_agent_profiler.live.enrichment import span_attributes, trace_attributes
from otel_agent_profiler.live.profile_options import ProfileOptions
from otel_agent_profiler.live.profiling import ProfilingStep
from otel_agent_profiler.service.spans import build_request, enrich, held_spans_of, span_count


def _sdk_spans() -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "svc", "deployment": "test"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("scope-a", "1.0")
    with tracer.start_as_current_span("invoke_agent planner", attributes={"gen_ai.operation.name": "invoke_agent"}):
        with tracer.start_as_current_span(
            "chat gpt-4o",
            kind=SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.input_tokens": 12,
                "list": [1, 2],
                "ratio": 0.5,
                "flag": True,
            },
        ) as chat:
            chat.add_event("gen_ai.content.completion.chunk", {"n": 1})
        other = provider.get_tracer("scope-b").start_span(
            "execute_tool search",
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"},
            links=[Link(chat.get_span_context(), {"why": "follows"})],
        )
        other.set_status(Status(StatusCode.ERROR, "boom"))
        other.end()
    provider.shutdown()
    return list(exporter.get_finished_spans())


def test_protobuf_records_equal_the_sdk_records_of_the_same_spans() -> None:
    spans = _sdk_spans()
    request = encode_spans(spans)
    problems: list[str] = []
    records = records_from_proto(request.SerializeToString(), problems)
    assert problems == []
    expected = {r.span_id: r for r in records_from_spans(spans)}
    assert len(records) == 3
    for record in records:
        want = expected[record.span_id]
        assert record.trace_id == want.trace_id and len(record.trace_id) == 32
        assert record.parent_span_id == want.parent_span_id
        assert (record.name, record.start_ns, record.end_ns) == (want.name, want.start_ns, want.end_ns)
        assert (record.kind, record.status, record.status_message) == (want.kind, want.status, want.status_message)
        assert dict(record.attributes) == {
            k: list(v) if isinstance(v, tuple) else v for k, v in want.attributes.items()
        }
        assert [(e.name, e.time_ns, dict(e.attributes)) for e in record.events] == [
            (e.name, e.time_ns, dict(e.attributes)) for e in want.events
        ]
        assert [(lk.trace_id, lk.span_id, dict(lk.attributes)) for lk in record.links] == [
            (lk.trace_id, lk.span_id, dict(lk.attributes)) for lk in want.links
        ]
        assert record.resource["service.name"] == "svc" and record.resource["deployment"] == "test"
        assert record.scope == want.scope
    assert sorted(r.scope for r in records) == ["scope-a", "scope-a", "scope-b"]


def test_bad_spans_are_skipped_and_described_the_rest_kept() -> None:
    request = encode_spans(_sdk_spans())
    spans = request.resource_spans[0].scope_spans[0].spans
    spans[0].trace_id = b"\x01\x02"
    spans.add().CopyFrom(spans[1])
    spans[-1].span_id = b"\x00" * 8
    problems: list[str] = []
    records = records_from_proto(request, problems)
    assert len(records) == 2
    assert len(problems) == 2
    assert "trace_id must be 16 bytes" in problems[0] and "scope_spans[0].spans[0]" in problems[0]
    assert "span_id is all zeros" in problems[1]


def test_any_value_round_trip() -> None:
    for value in ["s", 3, -(2**40), 1.25, True, False, [1, "a", [2.5]]]:
        assert any_value(to_any_value(value)) == value


def test_otlp_json_request_gives_the_same_records_as_the_json_reader() -> None:
    request = encode_spans(_sdk_spans())
    document = json_format.MessageToDict(request)
    # OTLP/JSON: hex ids instead of protobuf JSON's base64.
    import base64

    for rs in document["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for holder in [span, *span.get("links", [])]:
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in holder:
                            holder[key] = base64.b64decode(holder[key]).hex()
    body = json.dumps(document)
    from_json_reader = {r.span_id: r for r in records_from_otlp(json.loads(body), [])}
    records = records_from_proto(request_from_otlp_json(body))
    assert {r.span_id for r in records} == set(from_json_reader)
    for record in records:
        assert record == from_json_reader[record.span_id]


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[1, 2]",
        b'{"resourceSpans": 3}',
        b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}',
    ],
)
def test_malformed_otlp_json_raises_value_error(body: bytes) -> None:
    with pytest.raises(ValueError):
        request_from_otlp_json(body)


def _raise(where: str, trace_id: str) -> None:
    report_internal_error(where)  # re-raises under the test suite


def test_enrichment_adds_the_profile_attributes_to_copies_and_keeps_originals() -> None:
    request = encode_spans(_sdk_spans())
    # An original attribute in our namespace keeps its value.
    kv = request.resource_spans[0].scope_spans[0].spans[0].attributes.add()
    kv.key = "agent_profiler.category"
    kv.value.string_value = "mine"
    before = request.SerializeToString()
    held = held_spans_of(request, [])
    # serve's records, built from a held span, name its scope as the readers do
    assert sorted(h.record.scope for h in held if h.record is not None) == ["scope-a", "scope-a", "scope-b"]
    records = [h.record for h in held if h.record is not None]
    profiled = ProfilingStep(ProfileOptions(), _raise).profile(records, complete=True, outcome="complete")
    out = enrich(held, profiled.attributes)
    assert request.SerializeToString() == before  # received spans are never changed
    profile = profiled.profile
    assert profile is not None
    by_id = {s.span_id: s for s in profile.spans}
    roots = {r.span_id for r in profile.roots}
    first_id = request.resource_spans[0].scope_spans[0].spans[0].span_id.hex()
    for _origin, span in out:
        span_id = span.span_id.hex()
        expected = span_attributes(by_id[span_id])
        if span_id in roots:
            expected.update(trace_attributes(profile, complete=True))
        got = {kv.key: any_value(kv.value) for kv in span.attributes}
        for key, value in expected.items():
            if key == "agent_profiler.category" and span_id == first_id:
                assert got[key] == "mine"
            else:
                assert got[key] == value, key
    rebuilt = build_request(out)
    assert span_count(rebuilt) == 3
    # Regrouped by resource and scope as received: one resource, two scopes.
    assert len(rebuilt.resource_spans) == 1
    assert sorted(s.scope.name for s in rebuilt.resource_spans[0].scope_spans) == ["scope-a", "scope-b"]
    assert rebuilt.resource_spans[0].resource == request.resource_spans[0].resource
    assert isinstance(rebuilt, ExportTraceServiceRequest)

"""Offline commands and span conversion under bad numbers and bad shapes.

Whatever a trace file holds, ``analyze`` prints no traceback: a file it cannot use gets one line on
standard error naming it, the exit code is 2, and the other files on the command line are still
reported. A NaN or infinite token count is not a reason to reject anything: it is treated as
absent, on every input road (SDK spans, OTLP JSON and protobuf, Jaeger JSON, ATIF), and recorded
as an ``unusable_token_count`` anomaly.
"""

from __future__ import annotations

import copy
import json
import math
import random
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_agent_profiler import AgentProfilerSpanProcessor, SpanRecord, profile_records
from otel_agent_profiler.adapters.otlp_proto import records_from_proto, request_from_otlp_json
from otel_agent_profiler.adapters.sdk_spans import records_from_spans
from otel_agent_profiler.cli import main

pytestmark = pytest.mark.faults

TRACE = "5b8efff798038103d269b633813fc60c"
GOOD_TRACE = "11111111111111111111111111111111"
MS = 1_000_000
T0 = 1_700_000_000_000_000_000


def sid(n: int) -> str:
    return f"{n:016x}"


def _kv(key: str, value: dict[str, Any]) -> dict[str, Any]:
    return {"key": key, "value": value}


def otlp_span(span_id: str, parent: str | None = None, trace_id: str = TRACE, **fields: Any) -> dict[str, Any]:
    span: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": span_id,
        "name": "chat gpt-4o",
        "kind": 3,
        "startTimeUnixNano": str(T0),
        "endTimeUnixNano": str(T0 + 5 * MS),
        "attributes": [
            _kv("gen_ai.operation.name", {"stringValue": "chat"}),
            _kv("gen_ai.request.model", {"stringValue": "gpt-4o"}),
            _kv("gen_ai.usage.output_tokens", {"intValue": "7"}),
        ],
        "events": [{"name": "gen_ai.chunk", "timeUnixNano": str(T0 + MS)}],
        "status": {"code": 0},
    }
    if parent:
        span["parentSpanId"] = parent
    span.update(fields)
    return span


def otlp_doc(*spans: dict[str, Any]) -> dict[str, Any]:
    resource = {"attributes": [_kv("service.name", {"stringValue": "svc"})]}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": {"name": "t"}, "spans": list(spans)}]}]}


def otlp_with_tokens(value: dict[str, Any]) -> dict[str, Any]:
    span = otlp_span(sid(1))
    span["attributes"].append(_kv("gen_ai.usage.input_tokens", value))
    return otlp_doc(span, otlp_span(sid(2), sid(1), name="execute_tool search"))


def good_otlp() -> dict[str, Any]:
    return otlp_doc(otlp_span(sid(1), trace_id=GOOD_TRACE), otlp_span(sid(2), sid(1), trace_id=GOOD_TRACE))


def jaeger_doc() -> dict[str, Any]:
    def span(n: int, parent: int | None) -> dict[str, Any]:
        return {
            "traceID": "d269b633813fc60c",
            "spanID": sid(n),
            "operationName": "chat gpt-4o",
            "references": [{"refType": "CHILD_OF", "traceID": "d269b633813fc60c", "spanID": sid(parent)}]
            if parent
            else [],
            "startTime": T0 // 1000 + n,
            "duration": 3000,
            "tags": [
                {"key": "gen_ai.operation.name", "type": "string", "value": "chat"},
                {"key": "gen_ai.usage.input_tokens", "type": "int64", "value": 12},
                {"key": "gen_ai.usage.output_tokens", "type": "int64", "value": "4"},
                {"key": "span.kind", "type": "string", "value": "client"},
            ],
            "logs": [{"timestamp": T0 // 1000 + 10, "fields": [{"key": "event", "type": "string", "value": "x"}]}],
            "processID": "p1",
        }

    return {
        "data": [
            {
                "traceID": "d269b633813fc60c",
                "spans": [span(1, None), span(2, 1)],
                "processes": {"p1": {"serviceName": "svc", "tags": [{"key": "k", "type": "string", "value": "v"}]}},
            }
        ]
    }


def atif_doc() -> dict[str, Any]:
    return {
        "schema_version": "ATIF-v1.4",
        "session_id": "s-1",
        "agent": {"name": "bot", "version": "1", "model_name": "gpt-4o"},
        "steps": [
            {"step_id": 1, "timestamp": "2025-01-01T00:00:00Z", "source": "user", "message": "hi"},
            {
                "step_id": 2,
                "timestamp": "2025-01-01T00:00:02Z",
                "source": "agent",
                "message": "calling",
                "metrics": {"prompt_tokens": 100, "completion_tokens": 5},
                "tool_calls": [{"tool_call_id": "c1", "function_name": "search", "arguments": {"q": "x"}}],
                "observation": {"results": [{"source_call_id": "c1", "content": "ok"}]},
            },
            {"step_id": 3, "timestamp": "2025-01-01T00:00:03Z", "source": "agent", "message": "done"},
        ],
    }


def proto_bytes(document: dict[str, Any]) -> bytes:
    return request_from_otlp_json(json.dumps(document)).SerializeToString()  # type: ignore[no-any-return]


@pytest.fixture
def good_file(tmp_path: Path) -> Path:
    path = tmp_path / "good.json"
    path.write_text(json.dumps(good_otlp()))
    return path


def write(tmp_path: Path, name: str, document: Any) -> Path:
    path = tmp_path / name
    text = document if isinstance(document, str) else json.dumps(document)
    path.write_text(text.replace(json.dumps(DEEP), DEEP_TEXT))
    return path


def analyze(capsys: pytest.CaptureFixture[str], *paths: Path) -> tuple[int, dict[str, Any], list[str]]:
    """Run ``analyze --format json`` in process: exit code, report, standard error lines."""
    code = main(["analyze", "--format", "json", *map(str, paths)])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, json.loads(out), [line for line in err.splitlines() if line.strip()]


def trace(report: dict[str, Any], trace_id: str) -> dict[str, Any]:
    found = [t for t in report["traces"] if t["trace_id"] == trace_id]
    assert len(found) == 1, [t["trace_id"] for t in report["traces"]]
    return found[0]


# --------------------------------------------------------------------------- non-finite token counts


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity"])
def test_a_non_finite_token_count_is_absent_and_the_file_still_reported(
    number: str, tmp_path: Path, good_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "nan.json", otlp_with_tokens({"doubleValue": number}))
    code, report, errors = analyze(capsys, path, good_file)
    assert (code, errors) == (0, [])
    profile = trace(report, TRACE)
    assert profile["tokens"]["input"] == 0
    assert profile["tokens"]["output"] == 7  # the other counts of the span are kept
    assert [a["kind"] for a in profile["anomalies"]] == ["unusable_token_count"]
    assert "gen_ai.usage.input_tokens" in profile["anomalies"][0]["detail"]
    trace(report, GOOD_TRACE)


@pytest.mark.parametrize(
    "value",
    [{"intValue": "9" * 400}, {"stringValue": "-" + "9" * 30}, {"doubleValue": 1e300}],
    ids=["400-digit-int", "huge-negative-string", "1e300"],
)
def test_a_token_count_beyond_64_bits_is_absent(
    value: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report, errors = analyze(capsys, write(tmp_path, "huge.json", otlp_with_tokens(value)))
    assert (code, errors) == (0, [])
    profile = trace(report, TRACE)
    assert profile["tokens"]["input"] == 0
    assert [a["kind"] for a in profile["anomalies"]] == ["unusable_token_count"]


def test_a_non_finite_time_to_first_chunk_is_no_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    span = otlp_span(sid(1), events=[])
    span["attributes"].append(_kv("gen_ai.response.time_to_first_chunk", {"doubleValue": "Infinity"}))
    code, report, errors = analyze(capsys, write(tmp_path, "ttfc.json", otlp_doc(span)))
    assert (code, errors) == (0, [])
    assert trace(report, TRACE)["tokens"]["output"] == 7


def test_the_live_processor_profiles_a_trace_with_a_nan_token_count() -> None:
    exporter = InMemorySpanExporter()
    profiler = AgentProfilerSpanProcessor(downstream=[SimpleSpanProcessor(exporter)])
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(profiler)
    tracer = provider.get_tracer("test")
    try:
        llm_call = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.usage.input_tokens": float("nan"),
            "gen_ai.usage.output_tokens": 9,
        }
        with (
            tracer.start_as_current_span("invoke_agent bot", attributes={"gen_ai.operation.name": "invoke_agent"}),
            tracer.start_as_current_span("chat gpt-4o", attributes=llm_call),
        ):
            pass
        assert profiler.force_flush(5000)
    finally:
        provider.shutdown()
    spans = {span.name: span for span in exporter.get_finished_spans()}
    assert set(spans) == {"invoke_agent bot", "chat gpt-4o"}
    root = spans["invoke_agent bot"].attributes or {}
    assert root.get("agent_profiler.trace.anomalies") == 1
    assert root.get("agent_profiler.trace.tokens.output") == 9, dict(root)
    assert "agent_profiler.category" in (spans["chat gpt-4o"].attributes or {})


def _sdk_records(value: float) -> list[SpanRecord]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": value, "gen_ai.usage.output_tokens": 3}
    provider.get_tracer("t").start_span("chat m", attributes=attributes).end()
    provider.shutdown()
    return records_from_spans(exporter.get_finished_spans())


def _jaeger_records(value: str) -> list[SpanRecord]:
    from otel_agent_profiler.adapters.jaeger_json import records_from_jaeger

    document = jaeger_doc()
    for span in document["data"][0]["spans"]:
        span["tags"][1] = {"key": "gen_ai.usage.input_tokens", "type": "float64", "value": value}
    problems: list[str] = []
    records = records_from_jaeger(document, problems)
    assert problems == []
    return records


def _otlp_json_records(value: str) -> list[SpanRecord]:
    from otel_agent_profiler.adapters import parse_trace_bytes

    trace_file = parse_trace_bytes(json.dumps(otlp_with_tokens({"doubleValue": value})).encode(), "x.json")
    assert trace_file.problems == []
    return trace_file.records


def _otlp_proto_records(value: str) -> list[SpanRecord]:
    problems: list[str] = []
    records = records_from_proto(proto_bytes(otlp_with_tokens({"doubleValue": value})), problems)
    assert problems == []
    return records


ROADS: dict[str, Callable[[str], list[SpanRecord]]] = {
    "sdk": lambda value: _sdk_records(float(value)),
    "otlp-json": _otlp_json_records,
    "otlp-proto": _otlp_proto_records,
    "jaeger-json": _jaeger_records,
}


@pytest.mark.parametrize("road", sorted(ROADS))
@pytest.mark.parametrize("number", ["NaN", "Infinity"])
def test_every_input_road_treats_a_non_finite_token_count_as_absent(road: str, number: str) -> None:
    profiles = profile_records(ROADS[road](number))
    llm = [span for profile in profiles for span in profile.spans if span.tokens is not None]
    assert llm, "the call's other token counts are still read"
    assert all(span.tokens is not None and span.tokens.input == 0 for span in llm)
    assert all(isinstance(profile.tokens.input, int) for profile in profiles)
    assert any(a.kind == "unusable_token_count" for profile in profiles for a in profile.anomalies)


def test_atif_token_counts_that_are_not_usable_integers_are_ignored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = atif_doc()
    document["steps"][1]["metrics"] = {"prompt_tokens": 10**30, "completion_tokens": 1.5, "cached_tokens": -3}
    code, report, errors = analyze(capsys, write(tmp_path, "run.atif.json", document))
    assert (code, errors) == (0, [])
    assert report["traces"][0]["tokens"] == {"input": 0, "output": 0, "cached_input": 0, "reasoning": 0, "total": 0}


def test_a_json_number_too_large_for_a_float_is_one_line(
    tmp_path: Path, good_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = json.dumps(atif_doc()).replace('"prompt_tokens": 100', '"prompt_tokens": 1e400')
    bad = write(tmp_path, "run.atif.json", text)
    code, report, errors = analyze(capsys, bad, good_file)
    assert code == 2
    assert len(errors) == 1
    assert errors[0].startswith(f"otel-agent-profiler: error: {bad}: unreadable JSON: Number out of range")
    trace(report, GOOD_TRACE)


# --------------------------------------------------------------------------- bad shapes and absurd numbers


def _with(document: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    document = copy.deepcopy(document)
    change(document)
    return document


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(document: dict[str, Any]) -> None:
        holder: Any = document
        for step in path[:-1]:
            holder = holder[step]
        holder[path[-1]] = value

    return change


RS = ("resourceSpans", 0)
SPAN0 = (*RS, "scopeSpans", 0, "spans", 0)
# Spliced in as text: deeper than the json module writes.
DEEP = "deep-arrayValue-placeholder"
DEEP_TEXT = '{"arrayValue": {"values": [' * 3000 + '{"stringValue": "x"}' + "]}}" * 3000

BAD_OTLP: dict[str, tuple[tuple[Any, ...], Any, str]] = {
    "resourceSpans-number": (("resourceSpans",), 5, "resourceSpans"),
    "resourceSpans-item-string": ((*RS,), "x", "resourceSpans[0]"),
    "scopeSpans-number": ((*RS, "scopeSpans"), 5, "scopeSpans"),
    "scopeSpans-object": ((*RS, "scopeSpans"), {"spans": []}, "scopeSpans"),
    "scopeSpans-item-list": ((*RS, "scopeSpans", 0), [1], "scopeSpans[0]"),
    "spans-number": ((*RS, "scopeSpans", 0, "spans"), 5, "spans"),
    "spans-string": ((*RS, "scopeSpans", 0, "spans"), "abc", "spans"),
    "span-number": (SPAN0, 7, "spans[0]"),
    "resource-list": ((*RS, "resource"), [1], "resource"),
    "resource-attributes-number": ((*RS, "resource", "attributes"), 3, "resource"),
    "attributes-object": ((*SPAN0, "attributes"), {"a": 1}, "spans[0]"),
    "attribute-number": ((*SPAN0, "attributes", 0), 3, "spans[0]"),
    "attribute-key-number": ((*SPAN0, "attributes", 0, "key"), 3, "spans[0]"),
    "attribute-value-string": ((*SPAN0, "attributes", 0, "value"), "chat", "spans[0]"),
    "arrayValue-number": ((*SPAN0, "attributes", 0, "value"), {"arrayValue": 5}, "spans[0]"),
    "arrayValue-values-number": ((*SPAN0, "attributes", 0, "value"), {"arrayValue": {"values": 5}}, "spans[0]"),
    "kvlistValue-list": ((*SPAN0, "attributes", 0, "value"), {"kvlistValue": [1]}, "spans[0]"),
    "intValue-word": ((*SPAN0, "attributes", 0, "value"), {"intValue": "many"}, "spans[0]"),
    "doubleValue-word": ((*SPAN0, "attributes", 0, "value"), {"doubleValue": "lots"}, "spans[0]"),
    "bytesValue-number": ((*SPAN0, "attributes", 0, "value"), {"bytesValue": 5}, "spans[0]"),
    "deep-arrayValue": ((*SPAN0, "attributes", 0, "value"), DEEP, "deep"),
    "events-number": ((*SPAN0, "events"), 5, "spans[0]"),
    "event-string": ((*SPAN0, "events", 0), "e", "spans[0]"),
    "event-time-word": ((*SPAN0, "events", 0, "timeUnixNano"), "soon", "spans[0]"),
    "event-time-huge": ((*SPAN0, "events", 0, "timeUnixNano"), "9" * 400, "spans[0]"),
    "event-name-list": ((*SPAN0, "events", 0, "name"), [1], "spans[0]"),
    "links-object": ((*SPAN0, "links"), {"a": 1}, "spans[0]"),
    "link-not-hex-id": ((*SPAN0, "links"), [{"traceId": "zz", "spanId": sid(9)}], "spans[0]"),
    "traceId-number": ((*SPAN0, "traceId"), 12, "spans[0]"),
    "traceId-not-hex": ((*SPAN0, "traceId"), "abcz", "spans[0]"),
    "traceId-list": ((*SPAN0, "traceId"), ["a"], "spans[0]"),
    "spanId-long": ((*SPAN0, "spanId"), "ab" * 20, "spans[0]"),
    "parentSpanId-number": ((*SPAN0, "parentSpanId"), 5, "spans[0]"),
    "name-number": ((*SPAN0, "name"), 5, "spans[0]"),
    "kind-list": ((*SPAN0, "kind"), [3], "spans[0]"),
    "status-string": ((*SPAN0, "status"), "ok", "spans[0]"),
    "status-code-object": ((*SPAN0, "status"), {"code": {"a": 1}}, "spans[0]"),
    "status-message-number": ((*SPAN0, "status"), {"code": 2, "message": 5}, "spans[0]"),
    "start-huge": ((*SPAN0, "startTimeUnixNano"), "9" * 400, "startTimeUnixNano"),
    "end-huge": ((*SPAN0, "endTimeUnixNano"), "9" * 400, "endTimeUnixNano"),
    "end-huge-number": ((*SPAN0, "endTimeUnixNano"), 10**30, "endTimeUnixNano"),
    "start-negative": ((*SPAN0, "startTimeUnixNano"), "-5", "startTimeUnixNano"),
    "start-float-overflow": ((*SPAN0, "startTimeUnixNano"), 1e300, "startTimeUnixNano"),
    "start-object": ((*SPAN0, "startTimeUnixNano"), {"a": 1}, "startTimeUnixNano"),
    "start-bool": ((*SPAN0, "startTimeUnixNano"), True, "startTimeUnixNano"),
}


@pytest.mark.parametrize("case", sorted(BAD_OTLP))
def test_a_bad_otlp_shape_or_number_is_one_line_and_the_good_file_still_reported(
    case: str, tmp_path: Path, good_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, value, mention = BAD_OTLP[case]
    bad = write(tmp_path, "bad.json", _with(otlp_doc(otlp_span(sid(1))), _set(path, value)))
    code, report, errors = analyze(capsys, bad, good_file)
    assert code == 2
    assert len(errors) == 1 and str(bad) in errors[0], errors
    assert mention in errors[0]
    trace(report, GOOD_TRACE)
    assert TRACE not in [t["trace_id"] for t in report["traces"]]


JAEGER0 = ("data", 0)
JSPAN0 = (*JAEGER0, "spans", 0)
BAD_JAEGER: dict[str, tuple[tuple[Any, ...], Any, str]] = {
    "spans-number": ((*JAEGER0, "spans"), 5, "data[0].spans"),
    "spans-object": ((*JAEGER0, "spans"), {"a": 1}, "data[0].spans"),
    "span-string": (JSPAN0, "x", "data[0].spans[0]"),
    "processes-list": ((*JAEGER0, "processes"), [1], "processes"),
    "process-number": ((*JAEGER0, "processes", "p1"), 5, "processes"),
    "process-tags-number": ((*JAEGER0, "processes", "p1", "tags"), 5, "processes"),
    "tags-object": ((*JSPAN0, "tags"), {"a": 1}, "data[0].spans[0]"),
    "tag-number": ((*JSPAN0, "tags", 0), 1, "data[0].spans[0]"),
    "tag-int64-word": ((*JSPAN0, "tags", 1), {"key": "k", "type": "int64", "value": "x"}, "data[0].spans[0]"),
    "references-number": ((*JSPAN0, "references"), 5, "data[0].spans[0]"),
    "reference-string": ((*JSPAN0, "references"), ["x"], "data[0].spans[0]"),
    "spanID-number": ((*JSPAN0, "spanID"), 5, "data[0].spans[0]"),
    "operationName-list": ((*JSPAN0, "operationName"), [1], "data[0].spans[0]"),
    "startTime-huge": ((*JSPAN0, "startTime"), 10**30, "data[0].spans[0]"),
    "startTime-float-overflow": ((*JSPAN0, "startTime"), 1e300, "data[0].spans[0]"),
    "startTime-negative": ((*JSPAN0, "startTime"), -5, "data[0].spans[0]"),
    "duration-huge": ((*JSPAN0, "duration"), 10**30, "data[0].spans[0]"),
    "duration-word": ((*JSPAN0, "duration"), "long", "data[0].spans[0]"),
    "logs-number": ((*JSPAN0, "logs"), 5, "data[0].spans[0]"),
    "log-string": ((*JSPAN0, "logs", 0), "x", "data[0].spans[0]"),
    "log-timestamp-huge": ((*JSPAN0, "logs", 0, "timestamp"), 10**30, "data[0].spans[0]"),
    "log-fields-number": ((*JSPAN0, "logs", 0, "fields"), 5, "data[0].spans[0]"),
}


@pytest.mark.parametrize("case", sorted(BAD_JAEGER))
def test_a_bad_jaeger_shape_or_number_is_one_line_and_the_good_file_still_reported(
    case: str, tmp_path: Path, good_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, value, mention = BAD_JAEGER[case]
    bad = write(tmp_path, "bad-jaeger.json", _with(jaeger_doc(), _set(path, value)))
    code, report, errors = analyze(capsys, bad, good_file)
    assert code == 2
    assert len(errors) == 1 and str(bad) in errors[0], errors
    assert mention in errors[0]
    trace(report, GOOD_TRACE)


BAD_ATIF: dict[str, tuple[tuple[Any, ...], Any]] = {
    "tool_calls-number": (("steps", 1, "tool_calls"), 5),
    "tool_calls-string": (("steps", 1, "tool_calls"), "search"),
    "tool-call-string": (("steps", 1, "tool_calls", 0), "search"),
    "results-number": (("steps", 1, "observation", "results"), 5),
    "observation-list": (("steps", 1, "observation"), [1]),
    "metrics-list": (("steps", 1, "metrics"), [1]),
    "metrics-nan": (("steps", 1, "metrics", "prompt_tokens"), math.nan),
    "arguments-nan": (("steps", 1, "tool_calls", 0, "arguments"), math.inf),
    "step_id-object": (("steps", 1, "step_id"), {"a": [1]}),
    "agent-number": (("agent",), 5),
    "model-list": (("agent", "model_name"), [1]),
    "session-object": (("session_id",), {"a": 1}),
    "timestamp-year-1": (("steps", 1, "timestamp"), "0001-01-01T00:00:00+14:00"),
    "timestamp-year-9999": (("steps", 2, "timestamp"), "9999-12-31T23:59:59-14:00"),
    "timestamp-before-1970": (("steps", 1, "timestamp"), "1960-01-01T00:00:00Z"),
}


@pytest.mark.parametrize("case", sorted(BAD_ATIF))
def test_odd_atif_fields_are_tolerated_or_one_line(
    case: str, tmp_path: Path, good_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, value = BAD_ATIF[case]
    bad = write(tmp_path, "run.atif.json", _with(atif_doc(), _set(path, value)))
    code, report, errors = analyze(capsys, bad, good_file)
    assert code in (0, 2)
    assert len(errors) == (code == 2) and all(str(bad) in line for line in errors), errors
    trace(report, GOOD_TRACE)


def test_a_steps_timestamp_before_1970_is_unreadable(
    tmp_path: Path, good_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = write(tmp_path, "run.atif.json", _with(atif_doc(), _set(("steps", 1, "timestamp"), "1960-01-01T00:00:00Z")))
    code, _, errors = analyze(capsys, bad, good_file)
    assert code == 2
    assert errors == [
        f"otel-agent-profiler: error: {bad}: read 1 spans but skipped unreadable data: "
        "steps[1]: missing or unreadable timestamp '1960-01-01T00:00:00Z'"
    ]


def test_a_protobuf_file_is_one_line(tmp_path: Path, good_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "spans.pb"
    path.write_bytes(proto_bytes(otlp_doc(otlp_span(sid(1)))))
    code, report, errors = analyze(capsys, path, good_file)
    assert code == 2
    assert len(errors) == 1 and str(path) in errors[0]
    trace(report, GOOD_TRACE)


@pytest.mark.e2e
def test_the_cli_reports_a_malformed_file_in_one_line_and_the_good_one_in_full(tmp_path: Path, good_file: Path) -> None:
    nan = write(tmp_path, "nan.json", otlp_with_tokens({"doubleValue": "NaN"}))
    scope = write(tmp_path, "scope.json", _with(otlp_doc(otlp_span(sid(1))), _set((*RS, "scopeSpans"), 5)))
    jaeger = write(tmp_path, "jaeger.json", _with(jaeger_doc(), _set((*JAEGER0, "spans"), 5)))
    huge = write(
        tmp_path, "huge.json", _with(otlp_doc(otlp_span(sid(1))), _set((*SPAN0, "endTimeUnixNano"), "9" * 400))
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "otel_agent_profiler",
            "analyze",
            "--format",
            "json",
            nan,
            scope,
            jaeger,
            huge,
            good_file,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in result.stderr
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 3, lines
    for bad in (scope, jaeger, huge):
        assert sum(str(bad) in line for line in lines) == 1
    report = json.loads(result.stdout)
    assert {t["trace_id"] for t in report["traces"]} == {TRACE, GOOD_TRACE}
    assert trace(report, TRACE)["anomalies"][0]["kind"] == "unusable_token_count"


# --------------------------------------------------------------------------- fuzzing analyze

_ODD_VALUES: list[Any] = [
    None, True, 0, -1, 5, 1.5, 10**30, -(10**30), 1e308, "", "x", "NaN", "9" * 400, [], [1], {}, {"a": 1},
]  # fmt: skip
_NON_FINITE = [math.nan, math.inf, -math.inf]


def _paths(node: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield at
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*at, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _paths(value, (*at, index))


def _mutate_json(document: Any, rng: random.Random) -> bytes:
    document = copy.deepcopy(document)
    for _ in range(rng.randint(1, 3)):
        paths = [path for path in _paths(document) if path]
        if not paths:
            break
        path = rng.choice(paths)
        holder = document
        for step in path[:-1]:
            holder = holder[step]
        roll = rng.random()
        if roll < 0.6:
            holder[path[-1]] = copy.deepcopy(rng.choice(_ODD_VALUES))
        elif roll < 0.8:
            holder[path[-1]] = rng.choice(_NON_FINITE)
        elif isinstance(holder, dict):
            del holder[path[-1]]
        else:
            holder[path[-1]] = [copy.deepcopy(holder[path[-1]]) for _ in range(3)]
    text = json.dumps(document).encode()
    roll = rng.random()
    if roll < 0.1:
        text = text[: rng.randrange(len(text))]
    elif roll < 0.2:
        text = _flip_bytes(text, rng)
    return text


def _json_line() -> bytes:
    return json.dumps(otlp_doc(otlp_span(sid(5), trace_id="22" * 16))).encode()


def _flip_bytes(data: bytes, rng: random.Random) -> bytes:
    mutable = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        mutable[rng.randrange(len(mutable))] = rng.randrange(256)
    return bytes(mutable)


def _mutate_proto(data: bytes, rng: random.Random) -> bytes:
    if rng.random() < 0.3:
        return data[: rng.randrange(len(data))]
    return _flip_bytes(data, rng)


FUZZ_CASES = 400


def test_fuzzed_inputs_never_raise_out_of_analyze(
    tmp_path: Path, good_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(20240611)
    sources: list[tuple[str, Callable[[], bytes]]] = [
        ("otlp.json", lambda: _mutate_json(otlp_with_tokens({"intValue": "12"}), rng)),
        ("jaeger.json", lambda: _mutate_json(jaeger_doc(), rng)),
        ("run.atif.json", lambda: _mutate_json(atif_doc(), rng)),
        ("lines.jsonl", lambda: _mutate_json(otlp_with_tokens({"doubleValue": 3.0}), rng) + b"\n" + _json_line()),
        ("spans.pb", lambda: _mutate_proto(proto_bytes(otlp_with_tokens({"intValue": "12"})), rng)),
    ]
    outcomes = {0: 0, 2: 0}
    for case in range(FUZZ_CASES):
        name, mutate = sources[case % len(sources)]
        bad = tmp_path / f"{case}-{name}"
        bad.write_bytes(mutate())
        code = main(["analyze", "--format", "json", str(bad), str(good_file)])
        out, err = capsys.readouterr()
        assert "Traceback" not in err, (bad.read_bytes()[:300], err)
        assert code in outcomes, (code, bad.read_bytes()[:300], err)
        outcomes[code] += 1
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == (code == 2), (lines, bad.read_bytes()[:300])
        assert all(str(bad) in line for line in lines), lines
        assert GOOD_TRACE in {t["trace_id"] for t in json.loads(out)["traces"]}
    assert outcomes[0] and outcomes[2], outcomes  # the fuzzing reaches both outcomes


def test_an_otlp_json_body_nested_too_deeply_is_a_value_error() -> None:
    document = _with(otlp_doc(otlp_span(sid(1))), _set((*SPAN0, "attributes", 0, "value"), DEEP))
    text = json.dumps(document).replace(json.dumps(DEEP), DEEP_TEXT)
    with pytest.raises(ValueError, match="nested too deeply"):
        request_from_otlp_json(text)


def test_fuzzed_protobuf_requests_never_raise_out_of_the_proto_reader() -> None:
    rng = random.Random(7)
    data = proto_bytes(otlp_with_tokens({"doubleValue": "NaN"}))
    parsed = 0
    for _ in range(300):
        request = ExportTraceServiceRequest()
        try:
            request.ParseFromString(_mutate_proto(data, rng))
        except DecodeError:  # not a message at all: the caller is told so before any reader runs
            continue
        parsed += 1
        problems: list[str] = []
        profile_records(records_from_proto(request, problems))
    assert parsed

"""Reading Jaeger's JSON export: ``{"data": [{"traceID", "spans", "processes"}]}``.

Jaeger keeps times in microseconds, attributes as typed tags, events as logs, the parent
as a ``CHILD_OF`` reference and links as ``FOLLOWS_FROM``; OpenTelemetry's translation puts
the kind in ``span.kind`` and the status in ``otel.status_code``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from otel_agent_profiler.adapters import JAEGER_JSON, parse_trace_bytes, read_trace_file
from otel_agent_profiler.core import SpanKind, StatusCode

TRACE64 = "d269b633813fc60c"
TRACE128 = "5b8efff798038103d269b633813fc60c"
ROOT = "eee19b7ec3c1b174"
CHILD = "a1b2c3d4e5f60718"
LEAF = "00000000000000cc"
START_US = 1_760_000_000_000_000


def tag(key: str, value: Any, type_: str | None = None) -> dict[str, Any]:
    if type_ is None:
        type_ = {bool: "bool", int: "int64", float: "float64", str: "string"}[type(value)]
    return {"key": key, "type": type_, "value": value}


def ref(span_id: str, ref_type: str = "CHILD_OF", trace_id: str = TRACE64) -> dict[str, Any]:
    return {"refType": ref_type, "traceID": trace_id, "spanID": span_id}


def jaeger_span(
    span_id: str,
    parent: str | None = None,
    *,
    trace_id: str = TRACE64,
    name: str | None = None,
    start: Any = START_US,
    duration: Any = 1000,
    tags: list[dict[str, Any]] | None = None,
    references: list[dict[str, Any]] | None = None,
    process: str = "p1",
    **extra: Any,
) -> dict[str, Any]:
    span: dict[str, Any] = {
        "traceID": trace_id,
        "spanID": span_id,
        "operationName": name if name is not None else f"op {span_id}",
        "references": references if references is not None else ([ref(parent, trace_id=trace_id)] if parent else []),
        "startTime": start,
        "duration": duration,
        "tags": tags or [],
        "logs": [],
        "processID": process,
        "warnings": None,
        "flags": 1,
    }
    span.update(extra)
    return span


def jaeger_doc(spans: list[dict[str, Any]], trace_id: str = TRACE64, processes: dict[str, Any] | None = None):
    if processes is None:
        processes = {"p1": {"serviceName": "agent", "tags": [tag("hostname", "box-1")]}}
    return {
        "data": [{"traceID": trace_id, "spans": spans, "processes": processes, "warnings": None}],
        "total": 0,
        "limit": 0,
        "offset": 0,
        "errors": None,
    }


def parse(document: Any, path: str = "jaeger.json"):
    return parse_trace_bytes(json.dumps(document).encode(), path)


def records_by_id(document: Any) -> dict[str, Any]:
    trace_file = parse(document)
    assert trace_file.format == JAEGER_JSON
    assert trace_file.problems == [], trace_file.problems
    return {r.span_id: r for r in trace_file.records}


# --------------------------------------------------------------------------- basics


def test_jaeger_export_is_detected_and_read() -> None:
    trace_file = parse(jaeger_doc([jaeger_span(ROOT, name="agent run"), jaeger_span(CHILD, ROOT)]))
    assert trace_file.format == JAEGER_JSON
    assert trace_file.problems == []
    assert trace_file.error_line() is None
    by_id = {r.span_id: r for r in trace_file.records}
    assert set(by_id) == {ROOT, CHILD}
    assert by_id[ROOT].name == "agent run"
    assert by_id[ROOT].parent_span_id is None
    assert by_id[CHILD].parent_span_id == ROOT


def test_microseconds_become_nanoseconds() -> None:
    record = records_by_id(jaeger_doc([jaeger_span(ROOT, start=START_US + 7, duration=2_500)]))[ROOT]
    assert record.start_ns == (START_US + 7) * 1000
    assert record.end_ns == (START_US + 7 + 2_500) * 1000


def test_zero_duration_span() -> None:
    record = records_by_id(jaeger_doc([jaeger_span(ROOT, duration=0)]))[ROOT]
    assert record.end_ns == record.start_ns == START_US * 1000


def test_64_bit_trace_id_is_padded_to_32_hex() -> None:
    record = records_by_id(jaeger_doc([jaeger_span(ROOT)]))[ROOT]
    assert record.trace_id == "0000000000000000" + TRACE64
    assert len(record.span_id) == 16


def test_128_bit_trace_id_is_kept() -> None:
    doc = jaeger_doc([jaeger_span(ROOT, trace_id=TRACE128), jaeger_span(CHILD, ROOT, trace_id=TRACE128)], TRACE128)
    by_id = records_by_id(doc)
    assert {r.trace_id for r in by_id.values()} == {TRACE128}
    assert by_id[CHILD].parent_span_id == ROOT


def test_root_span_id_equal_to_the_64_bit_trace_id() -> None:
    # Jaeger clients give the root span the trace id as its span id.
    by_id = records_by_id(jaeger_doc([jaeger_span(TRACE64), jaeger_span(CHILD, TRACE64)]))
    assert set(by_id) == {TRACE64, CHILD}
    assert by_id[CHILD].parent_span_id == TRACE64
    assert by_id[TRACE64].trace_id == "0000000000000000" + TRACE64


def test_uppercase_ids_are_lowercased() -> None:
    by_id = records_by_id(
        jaeger_doc(
            [
                jaeger_span(ROOT.upper(), trace_id=TRACE64.upper()),
                jaeger_span(CHILD.upper(), ROOT.upper(), trace_id=TRACE64.upper()),
            ]
        )
    )
    assert set(by_id) == {ROOT, CHILD}
    assert by_id[CHILD].parent_span_id == ROOT


def test_several_traces_in_one_export() -> None:
    doc = jaeger_doc([jaeger_span(ROOT)])
    doc["data"].append(
        {
            "traceID": TRACE128,
            "spans": [jaeger_span(CHILD, trace_id=TRACE128, process="p9")],
            "processes": {"p9": {"serviceName": "other", "tags": []}},
        }
    )
    by_id = records_by_id(doc)
    assert by_id[ROOT].trace_id.endswith(TRACE64)
    assert by_id[CHILD].trace_id == TRACE128
    assert by_id[CHILD].resource["service.name"] == "other"


# --------------------------------------------------------------------------- references


def test_child_of_reference_is_the_parent() -> None:
    by_id = records_by_id(jaeger_doc([jaeger_span(ROOT), jaeger_span(CHILD, references=[ref(ROOT, "CHILD_OF")])]))
    assert by_id[CHILD].parent_span_id == ROOT
    assert list(by_id[CHILD].links) == []


def test_follows_from_reference_is_a_link_not_a_parent() -> None:
    by_id = records_by_id(jaeger_doc([jaeger_span(ROOT), jaeger_span(CHILD, references=[ref(ROOT, "FOLLOWS_FROM")])]))
    child = by_id[CHILD]
    assert child.parent_span_id is None
    assert [(link.trace_id, link.span_id) for link in child.links] == [("0000000000000000" + TRACE64, ROOT)]


def test_child_of_and_follows_from_together() -> None:
    refs = [ref(LEAF, "FOLLOWS_FROM"), ref(ROOT, "CHILD_OF")]
    by_id = records_by_id(jaeger_doc([jaeger_span(ROOT), jaeger_span(LEAF), jaeger_span(CHILD, references=refs)]))
    child = by_id[CHILD]
    assert child.parent_span_id == ROOT
    assert [link.span_id for link in child.links] == [LEAF]


def test_no_references_is_a_root() -> None:
    record = records_by_id(jaeger_doc([jaeger_span(ROOT, references=[])]))[ROOT]
    assert record.parent_span_id is None
    record = records_by_id(jaeger_doc([jaeger_span(ROOT, references=None) | {"references": None}]))[ROOT]
    assert record.parent_span_id is None


def test_follows_from_into_another_trace_is_a_link() -> None:
    refs = [ref("0000000000000042", "FOLLOWS_FROM", trace_id=TRACE128)]
    record = records_by_id(jaeger_doc([jaeger_span(ROOT, references=refs)]))[ROOT]
    assert record.parent_span_id is None
    assert [(link.trace_id, link.span_id) for link in record.links] == [(TRACE128, "0000000000000042")]


# --------------------------------------------------------------------------- tags


def test_typed_tags_become_attributes() -> None:
    tags = [
        tag("gen_ai.operation.name", "chat"),
        tag("gen_ai.usage.input_tokens", 1200),
        tag("temperature", 0.25),
        tag("gen_ai.is_streaming", True),
        tag("as_string_int", "42", "int64"),
        tag("as_string_float", "1.5", "float64"),
        tag("as_string_bool", "true", "bool"),
        tag("as_string_bool_false", "false", "bool"),
    ]
    attrs = records_by_id(jaeger_doc([jaeger_span(ROOT, tags=tags)]))[ROOT].attributes
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.usage.input_tokens"] == 1200
    assert attrs["temperature"] == 0.25
    assert attrs["gen_ai.is_streaming"] is True
    assert attrs["as_string_int"] == 42 and type(attrs["as_string_int"]) is int
    assert attrs["as_string_float"] == 1.5
    assert attrs["as_string_bool"] is True
    assert attrs["as_string_bool_false"] is False


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("internal", SpanKind.INTERNAL),
        ("server", SpanKind.SERVER),
        ("client", SpanKind.CLIENT),
        ("producer", SpanKind.PRODUCER),
        ("consumer", SpanKind.CONSUMER),
    ],
)
def test_span_kind_tag(value: str, expected: SpanKind) -> None:
    record = records_by_id(jaeger_doc([jaeger_span(ROOT, tags=[tag("span.kind", value)])]))[ROOT]
    assert record.kind is expected
    assert "span.kind" not in record.attributes


def test_missing_span_kind_tag_is_internal() -> None:
    assert records_by_id(jaeger_doc([jaeger_span(ROOT)]))[ROOT].kind is SpanKind.INTERNAL


@pytest.mark.parametrize(
    ("tags", "expected"),
    [
        ([], StatusCode.UNSET),
        ([tag("otel.status_code", "OK")], StatusCode.OK),
        ([tag("otel.status_code", "ERROR")], StatusCode.ERROR),
        ([tag("error", True)], StatusCode.ERROR),
    ],
)
def test_status_from_tags(tags: list[dict[str, Any]], expected: StatusCode) -> None:
    assert records_by_id(jaeger_doc([jaeger_span(ROOT, tags=tags)]))[ROOT].status is expected


def test_status_description_becomes_the_status_message() -> None:
    tags = [tag("otel.status_code", "ERROR"), tag("otel.status_description", "tool timed out"), tag("keep", "me")]
    record = records_by_id(jaeger_doc([jaeger_span(ROOT, tags=tags)]))[ROOT]
    assert record.status is StatusCode.ERROR
    assert record.status_message == "tool timed out"
    assert record.attributes["keep"] == "me"
    assert "otel.status_code" not in record.attributes


# --------------------------------------------------------------------------- logs and processes


def test_logs_become_events() -> None:
    logs = [
        {"timestamp": START_US + 10, "fields": [tag("event", "gen_ai.content.completion.chunk")]},
        {"timestamp": START_US + 20, "fields": [tag("event", "exception"), tag("exception.type", "TimeoutError")]},
        {"timestamp": START_US + 30, "fields": [tag("message", "no event field")]},
    ]
    record = records_by_id(jaeger_doc([jaeger_span(ROOT, logs=logs)]))[ROOT]
    events = list(record.events)
    assert [(e.name, e.time_ns) for e in events[:2]] == [
        ("gen_ai.content.completion.chunk", (START_US + 10) * 1000),
        ("exception", (START_US + 20) * 1000),
    ]
    assert events[1].attributes == {"exception.type": "TimeoutError"}
    assert events[2].time_ns == (START_US + 30) * 1000
    assert events[2].attributes["message"] == "no event field"


def test_process_becomes_the_resource() -> None:
    processes = {
        "p1": {"serviceName": "planner", "tags": [tag("hostname", "box-1"), tag("pid", 11)]},
        "p2": {"serviceName": "tools", "tags": []},
    }
    doc = jaeger_doc([jaeger_span(ROOT, process="p1"), jaeger_span(CHILD, ROOT, process="p2")], processes=processes)
    by_id = records_by_id(doc)
    assert dict(by_id[ROOT].resource) == {"service.name": "planner", "hostname": "box-1", "pid": 11}
    assert dict(by_id[CHILD].resource) == {"service.name": "tools"}
    assert "service.name" not in by_id[ROOT].attributes


def test_unknown_process_id_gives_an_empty_resource() -> None:
    record = records_by_id(jaeger_doc([jaeger_span(ROOT, process="p404")]))[ROOT]
    assert dict(record.resource) == {}


# --------------------------------------------------------------------------- bad spans


@pytest.mark.parametrize(
    ("bad_span", "mentions"),
    [
        pytest.param(
            {k: v for k, v in jaeger_span(CHILD, ROOT).items() if k != "spanID"}, "spanID", id="missing-spanID"
        ),
        pytest.param(jaeger_span("not-hex-at-all!!", ROOT), "not-hex-at-all", id="non-hex-spanID"),
        pytest.param(jaeger_span(CHILD, ROOT, trace_id="q" * 16), "q" * 16, id="non-hex-traceID"),
        pytest.param(jaeger_span(CHILD, references=[ref("zz-zz")]), "zz-zz", id="non-hex-reference"),
        pytest.param(jaeger_span(CHILD, ROOT, start="noon"), "startTime", id="non-integer-startTime"),
        pytest.param(jaeger_span(CHILD, ROOT, duration=None), "duration", id="missing-duration"),
    ],
)
def test_a_bad_span_is_skipped_and_described_and_the_others_kept(bad_span: dict[str, Any], mentions: str) -> None:
    trace_file = parse(jaeger_doc([jaeger_span(ROOT), bad_span, jaeger_span(LEAF, ROOT)]), "export.json")
    assert trace_file.format == JAEGER_JSON
    assert sorted(r.span_id for r in trace_file.records) == sorted([ROOT, LEAF])
    assert len(trace_file.problems) == 1
    assert mentions in trace_file.problems[0]
    assert "spans[1]" in trace_file.problems[0]
    line = trace_file.error_line()
    assert line is not None and "export.json" in line and "\n" not in line


def test_a_span_that_is_not_an_object_is_skipped() -> None:
    trace_file = parse(jaeger_doc([jaeger_span(ROOT), "oops", jaeger_span(CHILD, ROOT)]))
    assert sorted(r.span_id for r in trace_file.records) == sorted([ROOT, CHILD])
    assert len(trace_file.problems) == 1


def test_unreadable_processes_keep_the_spans() -> None:
    doc = jaeger_doc([jaeger_span(ROOT)], processes=["not", "a", "map"])  # type: ignore[arg-type]
    trace_file = parse(doc, "procs.json")
    assert [r.span_id for r in trace_file.records] == [ROOT]
    assert trace_file.problems
    assert "procs.json" in (trace_file.error_line() or "")


def test_export_without_spans_is_reported(tmp_path) -> None:
    path = tmp_path / "empty-export.json"
    path.write_text(json.dumps({"data": [], "total": 0, "limit": 0, "offset": 0, "errors": None}))
    trace_file = read_trace_file(path)
    assert trace_file.records == []
    line = trace_file.error_line()
    assert line is not None and "empty-export.json" in line


@pytest.mark.parametrize("key", ["otel.scope.name", "otel.library.name"])
def test_the_instrumentation_scope_tag_names_the_record_s_scope(key: str) -> None:
    # The semantic conventions' attribute for non-OTLP exporters, and the older Jaeger mapping's.
    spans = [jaeger_span(ROOT, tags=[tag(key, "opentelemetry.instrumentation.openai.v1")]), jaeger_span(CHILD, ROOT)]
    records = records_by_id(jaeger_doc(spans))
    assert records[ROOT].scope == "opentelemetry.instrumentation.openai.v1"
    assert records[ROOT].attributes[key] == "opentelemetry.instrumentation.openai.v1"
    assert records[CHILD].scope == ""

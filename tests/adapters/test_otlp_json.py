"""Reading OTLP JSON: one ``{"resourceSpans": ...}`` document, or JSON Lines of them.

Inputs are built as Python dicts, serialised and fed to ``parse_trace_bytes`` /
``read_trace_file``; the resulting ``SpanRecord`` fields are checked one by one.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from otel_agent_profiler.adapters import OTLP_JSON, OTLP_JSON_LINES, parse_trace_bytes, read_trace_file
from otel_agent_profiler.core import SpanEvent, SpanKind, SpanLink, StatusCode

TRACE = "5b8efff798038103d269b633813fc60c"
OTHER_TRACE = "0af7651916cd43dd8448eb211c80319c"
ROOT = "eee19b7ec3c1b174"
CHILD = "a1b2c3d4e5f60718"
BASE_NS = 1_760_000_000_000_000_000


# --------------------------------------------------------------------------- builders


def kv(key: str, value: dict[str, Any]) -> dict[str, Any]:
    return {"key": key, "value": value}


def s(key: str, value: str) -> dict[str, Any]:
    return kv(key, {"stringValue": value})


def otlp_span(
    span_id: str,
    parent: str | None = None,
    *,
    trace_id: str = TRACE,
    name: str | None = None,
    start: int | str = BASE_NS,
    end: int | str | None = BASE_NS + 1_000_000,
    **extra: Any,
) -> dict[str, Any]:
    span: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": span_id,
        "name": name if name is not None else f"span {span_id}",
        "startTimeUnixNano": str(start) if isinstance(start, int) else start,
    }
    if end is not None:
        span["endTimeUnixNano"] = str(end) if isinstance(end, int) else end
    if parent is not None:
        span["parentSpanId"] = parent
    span.update(extra)
    return span


def otlp_doc(
    spans: list[dict[str, Any]],
    resource: list[dict[str, Any]] | None = None,
    *,
    scope_key: str = "scopeSpans",
) -> dict[str, Any]:
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": resource or []},
                scope_key: [{"scope": {"name": "test", "version": "1"}, "spans": spans}],
            }
        ]
    }


def parse(document: Any, path: str = "trace.json"):
    data = document if isinstance(document, bytes) else json.dumps(document).encode()
    return parse_trace_bytes(data, path)


def only_record(document: Any):
    trace_file = parse(document)
    assert trace_file.problems == [], trace_file.problems
    assert len(trace_file.records) == 1
    return trace_file.records[0]


def b64(hex_id: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_id)).decode()


# --------------------------------------------------------------------------- the basics


def test_minimal_document_is_detected_and_read() -> None:
    trace_file = parse(otlp_doc([otlp_span(ROOT, name="agent run")]), "run.json")
    assert trace_file.format == OTLP_JSON
    assert trace_file.problems == []
    assert trace_file.ok
    assert trace_file.error_line() is None
    [record] = trace_file.records
    assert record.trace_id == TRACE
    assert record.span_id == ROOT
    assert record.parent_span_id is None
    assert record.name == "agent run"
    assert record.start_ns == BASE_NS
    assert record.end_ns == BASE_NS + 1_000_000
    assert record.kind is SpanKind.INTERNAL
    assert record.status is StatusCode.UNSET


def test_parent_and_child_are_linked_by_hex_ids() -> None:
    trace_file = parse(otlp_doc([otlp_span(ROOT), otlp_span(CHILD, ROOT)]))
    assert trace_file.problems == []
    by_id = {r.span_id: r for r in trace_file.records}
    assert by_id[ROOT].parent_span_id is None
    assert by_id[CHILD].parent_span_id == ROOT


def test_uppercase_hex_ids_are_lowercased() -> None:
    record = only_record(otlp_doc([otlp_span(CHILD.upper(), ROOT.upper(), trace_id=TRACE.upper())]))
    assert (record.trace_id, record.span_id, record.parent_span_id) == (TRACE, CHILD, ROOT)


def test_integer_timestamps_are_accepted_as_well_as_strings() -> None:
    record = only_record(otlp_doc([otlp_span(ROOT, start="1000", end="5000")]))
    assert (record.start_ns, record.end_ns) == (1000, 5000)
    raw = otlp_span(ROOT)
    raw["startTimeUnixNano"] = 1000
    raw["endTimeUnixNano"] = 5000
    record = only_record(otlp_doc([raw]))
    assert (record.start_ns, record.end_ns) == (1000, 5000)


def test_nanosecond_precision_is_kept_for_large_timestamps() -> None:
    # 19-digit values do not fit a double exactly; they must not go through float.
    record = only_record(otlp_doc([otlp_span(ROOT, start=1_760_000_000_123_456_789, end=1_760_000_000_987_654_321)]))
    assert record.start_ns == 1_760_000_000_123_456_789
    assert record.end_ns == 1_760_000_000_987_654_321


# --------------------------------------------------------------------------- ids


def test_base64_ids_are_converted_to_hex() -> None:
    span = otlp_span(b64(CHILD), b64(ROOT), trace_id=b64(TRACE))
    record = only_record(otlp_doc([span]))
    assert record.trace_id == TRACE
    assert record.span_id == CHILD
    assert record.parent_span_id == ROOT


def test_base64_and_hex_ids_of_one_trace_meet_in_one_tree() -> None:
    trace_file = parse(otlp_doc([otlp_span(ROOT), otlp_span(b64(CHILD), b64(ROOT), trace_id=b64(TRACE))]))
    assert trace_file.problems == []
    assert {r.trace_id for r in trace_file.records} == {TRACE}
    by_id = {r.span_id: r for r in trace_file.records}
    assert by_id[CHILD].parent_span_id == ROOT


def test_base64_link_ids_are_converted_to_hex() -> None:
    link = {"traceId": b64(OTHER_TRACE), "spanId": b64(CHILD)}
    record = only_record(otlp_doc([otlp_span(ROOT, links=[link])]))
    assert list(record.links) == [SpanLink(OTHER_TRACE, CHILD, {})]


def test_64_bit_trace_id_is_left_padded_to_32_hex() -> None:
    record = only_record(otlp_doc([otlp_span(ROOT, trace_id="d269b633813fc60c")]))
    assert record.trace_id == "0000000000000000d269b633813fc60c"


def test_64_bit_trace_id_equal_to_the_root_span_id_keeps_both_ids_apart() -> None:
    # Zipkin/Jaeger-style data: the root span id is the (64-bit) trace id. The trace id is
    # padded to 32 hex characters; the span ids must stay 16.
    short = "463ac35c9f6413ad"
    trace_file = parse(otlp_doc([otlp_span(short, trace_id=short), otlp_span(CHILD, short, trace_id=short)]))
    assert trace_file.problems == []
    by_name = {r.name: r for r in trace_file.records}
    root, child = by_name[f"span {short}"], by_name[f"span {CHILD}"]
    assert root.trace_id == child.trace_id == "0000000000000000" + short
    assert root.span_id == short
    assert child.parent_span_id == short


@pytest.mark.parametrize(
    "parent",
    [
        pytest.param(None, id="missing"),
        pytest.param("", id="empty"),
        pytest.param("0000000000000000", id="all-zero-hex"),
        pytest.param(b64("0000000000000000"), id="all-zero-base64"),
    ],
)
def test_missing_empty_or_all_zero_parent_makes_a_root(parent: str | None) -> None:
    record = only_record(otlp_doc([otlp_span(ROOT, parent)]))
    assert record.parent_span_id is None


# --------------------------------------------------------------------------- end times


@pytest.mark.parametrize(
    "end",
    [
        pytest.param(None, id="missing"),
        pytest.param("0", id="string-zero"),
        pytest.param(0, id="int-zero"),
    ],
)
def test_missing_or_zero_end_time_is_an_unended_span(end: Any) -> None:
    raw = otlp_span(ROOT, end=None)
    if end is not None:
        raw["endTimeUnixNano"] = end
    trace_file = parse(otlp_doc([raw, otlp_span(CHILD, ROOT)]))
    by_id = {r.span_id: r for r in trace_file.records}
    assert set(by_id) == {ROOT, CHILD}, trace_file.problems
    assert by_id[ROOT].end_ns is None
    assert by_id[ROOT].start_ns == BASE_NS
    assert by_id[CHILD].end_ns == BASE_NS + 1_000_000


# --------------------------------------------------------------------------- attribute values


def test_every_any_value_type_is_decoded() -> None:
    attributes = [
        s("s", "text"),
        kv("int_as_string", {"intValue": "42"}),
        kv("int_as_number", {"intValue": 7}),
        kv("big_int", {"intValue": "9007199254740993"}),
        kv("negative_int", {"intValue": "-3"}),
        kv("double", {"doubleValue": 0.25}),
        kv("double_integral", {"doubleValue": 3}),
        kv("bool_true", {"boolValue": True}),
        kv("bool_false", {"boolValue": False}),
        kv(
            "array",
            {"arrayValue": {"values": [{"stringValue": "a"}, {"intValue": "2"}, {"boolValue": True}]}},
        ),
        kv("empty_array", {"arrayValue": {}}),
        kv(
            "kvlist",
            {
                "kvlistValue": {
                    "values": [
                        s("inner", "x"),
                        kv("n", {"intValue": "5"}),
                        kv("nested", {"kvlistValue": {"values": [kv("deep", {"doubleValue": 1.5})]}}),
                    ]
                }
            },
        ),
        kv("bytes", {"bytesValue": base64.b64encode(b"\xde\xad\xbe\xef").decode()}),
    ]
    record = only_record(otlp_doc([otlp_span(ROOT, attributes=attributes)]))
    attrs = record.attributes
    assert attrs["s"] == "text"
    assert attrs["int_as_string"] == 42 and type(attrs["int_as_string"]) is int
    assert attrs["int_as_number"] == 7 and type(attrs["int_as_number"]) is int
    assert attrs["big_int"] == 9007199254740993
    assert attrs["negative_int"] == -3
    assert attrs["double"] == 0.25
    assert attrs["double_integral"] == 3.0 and isinstance(attrs["double_integral"], float)
    assert attrs["bool_true"] is True
    assert attrs["bool_false"] is False
    assert list(attrs["array"]) == ["a", 2, True]
    assert list(attrs["empty_array"]) == []
    assert dict(attrs["kvlist"]) == {"inner": "x", "n": 5, "nested": {"deep": 1.5}}
    assert attrs["bytes"] == "deadbeef"


def test_int_value_is_used_for_token_counts() -> None:
    # intValue written as a string (the OTLP/JSON rule for 64-bit integers) must arrive as int,
    # or the token totals downstream would be wrong.
    attributes = [
        s("gen_ai.operation.name", "chat"),
        kv("gen_ai.usage.input_tokens", {"intValue": "1200"}),
        kv("gen_ai.usage.output_tokens", {"intValue": "34"}),
    ]
    record = only_record(otlp_doc([otlp_span(ROOT, attributes=attributes)]))
    assert record.attributes["gen_ai.usage.input_tokens"] == 1200
    assert record.attributes["gen_ai.usage.output_tokens"] == 34


# --------------------------------------------------------------------------- kind and status


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (0, SpanKind.INTERNAL),
        (1, SpanKind.INTERNAL),
        (2, SpanKind.SERVER),
        (3, SpanKind.CLIENT),
        (4, SpanKind.PRODUCER),
        (5, SpanKind.CONSUMER),
        ("SPAN_KIND_UNSPECIFIED", SpanKind.INTERNAL),
        ("SPAN_KIND_INTERNAL", SpanKind.INTERNAL),
        ("SPAN_KIND_SERVER", SpanKind.SERVER),
        ("SPAN_KIND_CLIENT", SpanKind.CLIENT),
        ("SPAN_KIND_PRODUCER", SpanKind.PRODUCER),
        ("SPAN_KIND_CONSUMER", SpanKind.CONSUMER),
    ],
)
def test_kind_as_number_or_name(raw: Any, expected: SpanKind) -> None:
    assert only_record(otlp_doc([otlp_span(ROOT, kind=raw)])).kind is expected


def test_missing_kind_is_internal() -> None:
    assert only_record(otlp_doc([otlp_span(ROOT)])).kind is SpanKind.INTERNAL


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({}, StatusCode.UNSET),
        ({"code": 0}, StatusCode.UNSET),
        ({"code": 1}, StatusCode.OK),
        ({"code": 2}, StatusCode.ERROR),
        ({"code": "STATUS_CODE_UNSET"}, StatusCode.UNSET),
        ({"code": "STATUS_CODE_OK"}, StatusCode.OK),
        ({"code": "STATUS_CODE_ERROR"}, StatusCode.ERROR),
    ],
)
def test_status_code_as_number_or_name(raw: dict[str, Any], expected: StatusCode) -> None:
    assert only_record(otlp_doc([otlp_span(ROOT, status=raw)])).status is expected


def test_status_message_is_kept() -> None:
    record = only_record(otlp_doc([otlp_span(ROOT, status={"code": "STATUS_CODE_ERROR", "message": "rate limited"})]))
    assert record.status is StatusCode.ERROR
    assert record.status_message == "rate limited"


def test_unknown_kind_skips_only_that_span() -> None:
    trace_file = parse(otlp_doc([otlp_span(ROOT), otlp_span(CHILD, ROOT, kind="SPAN_KIND_SIDEWAYS")]), "k.json")
    assert [r.span_id for r in trace_file.records] == [ROOT]
    assert len(trace_file.problems) == 1
    assert "SPAN_KIND_SIDEWAYS" in trace_file.problems[0]


# --------------------------------------------------------------------------- resource, events, links


def test_resource_attributes_end_up_on_every_record_of_that_resource() -> None:
    document = {
        "resourceSpans": [
            {
                "resource": {"attributes": [s("service.name", "planner"), kv("pid", {"intValue": "11"})]},
                "scopeSpans": [{"spans": [otlp_span(ROOT)]}, {"spans": [otlp_span(CHILD, ROOT)]}],
            },
            {
                "resource": {"attributes": [s("service.name", "tools")]},
                "scopeSpans": [{"spans": [otlp_span("00000000000000aa", ROOT)]}],
            },
            {"scopeSpans": [{"spans": [otlp_span("00000000000000bb", ROOT)]}]},
        ]
    }
    trace_file = parse(document)
    assert trace_file.problems == []
    by_id = {r.span_id: r for r in trace_file.records}
    assert dict(by_id[ROOT].resource) == {"service.name": "planner", "pid": 11}
    assert dict(by_id[CHILD].resource) == {"service.name": "planner", "pid": 11}
    assert dict(by_id["00000000000000aa"].resource) == {"service.name": "tools"}
    assert dict(by_id["00000000000000bb"].resource) == {}
    # Resource attributes are not span attributes.
    assert "service.name" not in by_id[ROOT].attributes


def test_events_are_kept_with_time_and_attributes() -> None:
    events = [
        {"timeUnixNano": str(BASE_NS + 10), "name": "gen_ai.content.completion.chunk"},
        {
            "timeUnixNano": str(BASE_NS + 20),
            "name": "exception",
            "attributes": [s("exception.type", "TimeoutError"), kv("attempt", {"intValue": "2"})],
        },
    ]
    record = only_record(otlp_doc([otlp_span(ROOT, events=events)]))
    assert list(record.events) == [
        SpanEvent("gen_ai.content.completion.chunk", BASE_NS + 10, {}),
        SpanEvent("exception", BASE_NS + 20, {"exception.type": "TimeoutError", "attempt": 2}),
    ]


def test_links_are_kept_with_attributes() -> None:
    links = [
        {"traceId": OTHER_TRACE, "spanId": CHILD, "attributes": [s("link.kind", "batch")]},
        {"traceId": TRACE, "spanId": "00000000000000ff"},
    ]
    record = only_record(otlp_doc([otlp_span(ROOT, links=links)]))
    assert list(record.links) == [
        SpanLink(OTHER_TRACE, CHILD, {"link.kind": "batch"}),
        SpanLink(TRACE, "00000000000000ff", {}),
    ]
    # A link is not a parent.
    assert record.parent_span_id is None


def test_legacy_instrumentation_library_spans_key() -> None:
    document = otlp_doc(
        [otlp_span(ROOT), otlp_span(CHILD, ROOT)], [s("service.name", "old")], scope_key="instrumentationLibrarySpans"
    )
    trace_file = parse(document)
    assert trace_file.format == OTLP_JSON
    assert trace_file.problems == []
    assert {r.span_id for r in trace_file.records} == {ROOT, CHILD}
    assert all(dict(r.resource) == {"service.name": "old"} for r in trace_file.records)


def test_several_resources_scopes_and_traces_are_all_read() -> None:
    document = {
        "resourceSpans": [
            {"scopeSpans": [{"spans": [otlp_span(ROOT)]}, {"spans": []}, {"spans": [otlp_span(CHILD, ROOT)]}]},
            {"scopeSpans": [{"spans": [otlp_span("0000000000000001", trace_id=OTHER_TRACE)]}]},
        ]
    }
    trace_file = parse(document)
    assert trace_file.problems == []
    assert sorted((r.trace_id, r.span_id) for r in trace_file.records) == sorted(
        [(TRACE, ROOT), (TRACE, CHILD), (OTHER_TRACE, "0000000000000001")]
    )


# --------------------------------------------------------------------------- bad spans in a good document


@pytest.mark.parametrize(
    ("bad_span", "mentions"),
    [
        pytest.param({k: v for k, v in otlp_span(CHILD, ROOT).items() if k != "spanId"}, "spanId", id="missing-spanId"),
        pytest.param(
            {k: v for k, v in otlp_span(CHILD, ROOT).items() if k != "traceId"}, "traceId", id="missing-traceId"
        ),
        pytest.param(otlp_span("not-a-hex-id!!!!", ROOT), "not-a-hex-id", id="non-hex-spanId"),
        pytest.param(otlp_span("xyz", ROOT), "xyz", id="short-non-hex-spanId"),
        pytest.param(otlp_span(CHILD, ROOT, trace_id="g" * 32), "g" * 32, id="non-hex-traceId"),
        pytest.param(otlp_span(CHILD, "zz-parent-zz"), "zz-parent-zz", id="non-hex-parentSpanId"),
        pytest.param(otlp_span(CHILD, ROOT, start="yesterday"), "yesterday", id="non-integer-start"),
        pytest.param(otlp_span(CHILD, ROOT, end="1.5e18x"), "1.5e18x", id="non-integer-end"),
        # Out of range: the typed reader checks the range itself, and must hand the document over too.
        pytest.param(otlp_span(CHILD, ROOT, start="-5"), "-5", id="negative-start"),
        pytest.param(otlp_span(CHILD, ROOT, end="-7"), "-7", id="negative-end"),
        pytest.param(otlp_span(CHILD, ROOT, end=str(2**64)), str(2**64), id="end-beyond-64-bits"),
        pytest.param(otlp_span(CHILD, ROOT, start=2**64 + 3), str(2**64 + 3), id="integer-start-beyond-64-bits"),
        pytest.param(
            {k: v for k, v in otlp_span(CHILD, ROOT).items() if k != "startTimeUnixNano"},
            "startTimeUnixNano",
            id="missing-start",
        ),
    ],
)
def test_a_bad_span_is_skipped_and_described_and_the_others_kept(bad_span: dict[str, Any], mentions: str) -> None:
    other = otlp_span("00000000000000cc", ROOT)
    trace_file = parse(otlp_doc([otlp_span(ROOT), bad_span, other]), "agent-run.json")
    assert trace_file.format == OTLP_JSON
    assert sorted(r.span_id for r in trace_file.records) == sorted([ROOT, "00000000000000cc"])
    assert len(trace_file.problems) == 1
    problem = trace_file.problems[0]
    assert mentions in problem
    # The problem says which span it was.
    assert "spans[1]" in problem
    line = trace_file.error_line()
    assert line is not None
    assert "agent-run.json" in line
    assert mentions in line
    assert "\n" not in line


def test_a_span_that_is_not_an_object_is_skipped() -> None:
    trace_file = parse(otlp_doc([otlp_span(ROOT), "oops", 42, None, otlp_span(CHILD, ROOT)]))
    assert sorted(r.span_id for r in trace_file.records) == sorted([ROOT, CHILD])
    assert len(trace_file.problems) == 3


def test_a_bad_attribute_value_skips_only_that_span() -> None:
    bad = otlp_span(CHILD, ROOT, attributes=[kv("n", {"intValue": "forty-two"})])
    trace_file = parse(otlp_doc([otlp_span(ROOT), bad]))
    assert [r.span_id for r in trace_file.records] == [ROOT]
    assert len(trace_file.problems) == 1


def test_many_bad_spans_are_summarised_in_one_line() -> None:
    spans = [otlp_span(ROOT)] + [otlp_span(f"bad-{i}", ROOT) for i in range(10)]
    trace_file = parse(otlp_doc(spans), "many.json")
    assert [r.span_id for r in trace_file.records] == [ROOT]
    assert len(trace_file.problems) == 10
    line = trace_file.error_line()
    assert line is not None
    assert "\n" not in line
    assert line.startswith("many.json")
    assert len(line) < 1000


def test_resource_spans_that_is_not_a_list_is_described() -> None:
    trace_file = parse({"resourceSpans": {"scopeSpans": []}}, "weird.json")
    assert trace_file.records == []
    assert trace_file.problems
    assert "weird.json" in (trace_file.error_line() or "")


def test_document_with_no_spans_is_reported() -> None:
    trace_file = parse({"resourceSpans": []}, "nothing.json")
    assert trace_file.records == []
    line = trace_file.error_line()
    assert line is not None and "nothing.json" in line
    assert "no spans" in line


# --------------------------------------------------------------------------- JSON Lines


def jsonl(*documents: dict[str, Any], end: str = "\n") -> bytes:
    return ("\n".join(json.dumps(d) for d in documents) + end).encode()


def test_json_lines_as_the_collector_file_exporter_writes_them() -> None:
    lines = jsonl(
        otlp_doc([otlp_span(ROOT)], [s("service.name", "a")]),
        otlp_doc([otlp_span(CHILD, ROOT)], [s("service.name", "b")]),
        otlp_doc([otlp_span("0000000000000001", trace_id=OTHER_TRACE)]),
    )
    trace_file = parse(lines, "collector.jsonl")
    assert trace_file.format == OTLP_JSON_LINES
    assert trace_file.problems == []
    by_id = {r.span_id: r for r in trace_file.records}
    assert set(by_id) == {ROOT, CHILD, "0000000000000001"}
    assert by_id[CHILD].parent_span_id == ROOT
    assert dict(by_id[ROOT].resource) == {"service.name": "a"}
    assert dict(by_id[CHILD].resource) == {"service.name": "b"}


def test_json_lines_without_final_newline_blank_lines_and_crlf() -> None:
    first = json.dumps(otlp_doc([otlp_span(ROOT)]))
    second = json.dumps(otlp_doc([otlp_span(CHILD, ROOT)]))
    for data in (
        f"{first}\n{second}",
        f"\n{first}\n\n\n{second}\n\n",
        f"{first}\r\n{second}\r\n",
    ):
        trace_file = parse(data.encode(), "x.jsonl")
        assert trace_file.format == OTLP_JSON_LINES, data
        assert trace_file.problems == []
        assert {r.span_id for r in trace_file.records} == {ROOT, CHILD}


def test_json_lines_mixing_metrics_and_logs_lines_reads_the_spans() -> None:
    # The Collector's file exporter may write every signal to one file.
    data = jsonl(
        {"resourceMetrics": [{"scopeMetrics": []}]},
        otlp_doc([otlp_span(ROOT)]),
        {"resourceLogs": []},
        otlp_doc([otlp_span(CHILD, ROOT)]),
    )
    trace_file = parse(data, "mixed.jsonl")
    assert trace_file.format == OTLP_JSON_LINES
    assert trace_file.problems == []
    assert {r.span_id for r in trace_file.records} == {ROOT, CHILD}


def test_a_single_document_on_one_line_is_read_whatever_the_file_name() -> None:
    trace_file = parse(jsonl(otlp_doc([otlp_span(ROOT)])), "one.jsonl")
    assert trace_file.problems == []
    assert trace_file.format in (OTLP_JSON, OTLP_JSON_LINES)
    assert [r.span_id for r in trace_file.records] == [ROOT]


def test_json_lines_bad_span_on_one_line_keeps_the_rest() -> None:
    data = jsonl(
        otlp_doc([otlp_span(ROOT)]),
        otlp_doc([otlp_span("nope", ROOT), otlp_span(CHILD, ROOT)]),
    )
    trace_file = parse(data, "x.jsonl")
    assert {r.span_id for r in trace_file.records} == {ROOT, CHILD}
    assert len(trace_file.problems) == 1
    assert "line 2" in trace_file.problems[0]


def test_unicode_line_separator_inside_a_string_does_not_split_a_line() -> None:
    first = json.dumps(otlp_doc([otlp_span(ROOT, name="a\u2028b")]), ensure_ascii=False)
    second = json.dumps(otlp_doc([otlp_span(CHILD, ROOT)]))
    trace_file = parse(f"{first}\n{second}\n".encode(), "u.jsonl")
    assert trace_file.problems == []
    assert {r.name for r in trace_file.records} == {"a\u2028b", f"span {CHILD}"}


# --------------------------------------------------------------------------- real exporter output


def test_protobuf_json_mapping_of_real_sdk_spans(tmp_path) -> None:
    """Spans from the OpenTelemetry SDK, encoded to OTLP protobuf and written with the generic
    protobuf JSON mapping: base64 ids, enum names, 64-bit integers as strings."""
    from google.protobuf.json_format import MessageToJson
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "sdk-test"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("invoke_agent", kind=trace.SpanKind.SERVER) as root:
        root.set_attribute("gen_ai.operation.name", "invoke_agent")
        root.set_attribute("retries", 3)
        root.set_attribute("temperature", 0.5)
        root.set_attribute("streamed", True)
        root.set_attribute("tags", ["a", "b"])
        with tracer.start_as_current_span("chat gpt-4o", kind=trace.SpanKind.CLIENT) as child:
            child.set_attribute("gen_ai.usage.input_tokens", 120)
            child.add_event("gen_ai.content.completion.chunk", {"index": 1})
            child.set_status(trace.Status(trace.StatusCode.ERROR, "boom"))
    provider.shutdown()
    finished = {span.name: span for span in exporter.get_finished_spans()}

    path = tmp_path / "sdk.json"
    path.write_text(MessageToJson(encode_spans(list(finished.values()))), encoding="utf-8")
    trace_file = read_trace_file(path)
    assert trace_file.format == OTLP_JSON
    assert trace_file.problems == []
    records = {r.name: r for r in trace_file.records}
    assert set(records) == set(finished)

    for name, sdk_span in finished.items():
        record = records[name]
        assert record.trace_id == format(sdk_span.context.trace_id, "032x")
        assert record.span_id == format(sdk_span.context.span_id, "016x")
        assert record.start_ns == sdk_span.start_time
        assert record.end_ns == sdk_span.end_time
        assert record.resource["service.name"] == "sdk-test"

    root_record, child_record = records["invoke_agent"], records["chat gpt-4o"]
    assert root_record.parent_span_id is None
    assert child_record.parent_span_id == root_record.span_id
    assert root_record.kind is SpanKind.SERVER
    assert child_record.kind is SpanKind.CLIENT
    assert child_record.status is StatusCode.ERROR
    assert child_record.status_message == "boom"
    assert root_record.attributes["retries"] == 3
    assert root_record.attributes["temperature"] == 0.5
    assert root_record.attributes["streamed"] is True
    assert list(root_record.attributes["tags"]) == ["a", "b"]
    assert child_record.attributes["gen_ai.usage.input_tokens"] == 120
    [event] = child_record.events
    assert event.name == "gen_ai.content.completion.chunk"
    assert event.attributes == {"index": 1}


# --------------------------------------------------------------------------- instrumentation scopes


@pytest.mark.parametrize("with_a_bad_span", [False, True], ids=["typed-reader", "tolerant-reader"])
def test_each_span_keeps_the_name_of_its_instrumentation_scope(with_a_bad_span: bool) -> None:
    # A bad span sends the whole document to the tolerant reader, which must read scopes alike.
    bad = [otlp_span("xyz", ROOT)] if with_a_bad_span else []
    document = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {"scope": {"name": "openinference.instrumentation.langchain"}, "spans": [otlp_span(ROOT), *bad]},
                    {"scope": {"name": "opentelemetry.instrumentation.openai.v1"}, "spans": [otlp_span(CHILD, ROOT)]},
                    {"spans": [otlp_span("0000000000000001", ROOT)]},
                ]
            },
            {
                "instrumentationLibrarySpans": [
                    {"instrumentationLibrary": {"name": "old.library"}, "spans": [otlp_span("0000000000000002", ROOT)]}
                ]
            },
        ]
    }
    trace_file = parse(document)
    assert len(trace_file.problems) == (1 if with_a_bad_span else 0)
    assert {r.span_id: r.scope for r in trace_file.records} == {
        ROOT: "openinference.instrumentation.langchain",
        CHILD: "opentelemetry.instrumentation.openai.v1",
        "0000000000000001": "",
        "0000000000000002": "old.library",
    }


# --------------------------------------------------------------------------- spans decoded in batches


def _long_scope(count: int) -> list[dict[str, Any]]:
    """``count`` spans, each the child of the one before: parents cross the decoder's batches."""
    ids = [f"{number + 1:016x}" for number in range(count)]
    spans = [otlp_span(ids[0], name="root", attributes=[s("gen_ai.request.model", "gpt-4o"), s("prompt", "x" * 100)])]
    for number in range(1, count):
        attributes = [s("gen_ai.request.model", "gpt-4o"), kv("step", {"intValue": str(number)})]
        spans.append(otlp_span(ids[number], ids[number - 1], name=f"step {number % 7}", attributes=attributes))
    return spans


def test_a_scope_of_more_spans_than_a_batch_reads_as_the_tolerant_reader_reads_it() -> None:
    from otel_agent_profiler.adapters.otlp_json import records_from_otlp
    from otel_agent_profiler.adapters.otlp_json_typed import SPAN_BATCH

    document = otlp_doc(_long_scope(2 * SPAN_BATCH + 3), resource=[s("service.name", "agent")])
    trace_file = parse(document)
    problems: list[str] = []
    assert trace_file.problems == [] and len(trace_file.records) == 2 * SPAN_BATCH + 3
    assert trace_file.records == records_from_otlp(document, problems) and problems == []
    by_id = {record.span_id: record for record in trace_file.records}
    assert all(record.parent_span_id is None or record.parent_span_id in by_id for record in trace_file.records)


def test_a_bad_span_in_a_later_batch_costs_only_that_span() -> None:
    from otel_agent_profiler.adapters.otlp_json_typed import SPAN_BATCH

    spans = _long_scope(SPAN_BATCH + 10)
    spans[-1] = otlp_span("xyz", spans[-2]["spanId"])
    trace_file = parse(otlp_doc(spans))
    assert len(trace_file.records) == SPAN_BATCH + 9
    assert len(trace_file.problems) == 1 and "'xyz'" in trace_file.problems[0]

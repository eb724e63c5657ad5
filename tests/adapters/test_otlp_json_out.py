"""Span records written as OTLP JSON (what ``--save`` writes) read back as the same records."""

from __future__ import annotations

import math

import msgspec

from otel_agent_profiler.adapters.files import parse_trace_bytes, read_trace_file
from otel_agent_profiler.adapters.otlp_json_out import otlp_json_document
from otel_agent_profiler.core.records import SpanEvent, SpanKind, SpanLink, SpanRecord, StatusCode
from tests.support.paths import DATA

DEMO = DATA / "demo_trace.otlp.json"
TRACE = "0af7651916cd43dd8448eb211c80319c"


def round_trip(records: list[SpanRecord]) -> list[SpanRecord]:
    trace_file = parse_trace_bytes(msgspec.json.encode(otlp_json_document(records)), "saved.json")
    assert trace_file.problems == []
    return trace_file.records


def test_the_demo_trace_reads_back_the_same() -> None:
    records = read_trace_file(DEMO).records
    assert round_trip(records) == records


def test_every_field_and_attribute_type_reads_back_the_same() -> None:
    resource = {"service.name": "agent", "host.cores": 8}
    other = {"service.name": "tools"}
    records = [
        SpanRecord(
            TRACE,
            "b7ad6b7169203331",
            None,
            "agent",
            1_000,
            9_000,
            SpanKind.SERVER,
            StatusCode.ERROR,
            "it broke",
            {
                "s": "text",
                "b": False,
                "i": 2**63 - 1,
                "f": 0.1,
                "inf": math.inf,
                "neg": -math.inf,
                "list": ["a", "b"],
                "map": {"k": [1, 2], "m": {"x": True}},
                "none": None,
            },
            (SpanEvent("exception", 5_000, {"exception.type": "ValueError"}),),
            (SpanLink("1" * 32, "2" * 16, {"link.kind": "follows"}),),
            resource,
        ),
        SpanRecord(TRACE, "00f067aa0ba902b7", "b7ad6b7169203331", "tool", 2_000, None, SpanKind.CLIENT, resource=other),
        SpanRecord(
            TRACE, "00f067aa0ba902b8", "b7ad6b7169203331", "ok", 3_000, 4_000, status=StatusCode.OK, resource=resource
        ),
    ]
    back = round_trip(records)
    assert back == records
    assert math.isnan(
        round_trip([SpanRecord(TRACE, "1" * 16, None, "n", 1, 2, attributes={"x": math.nan})])[0].attributes["x"]
    )  # type: ignore[arg-type]

"""docs/analysis.md's table "Against Jaeger's critical path" and the paragraph under it are true.

Each row of the table names a shape of trace; the same spans go through Jaeger UI's algorithm
(:mod:`tests.support.jaeger_ui_critical_path`, written from Jaeger UI's source) and through ours, at Jaeger's
microseconds (times cut to the microsecond before either sees them), and the row's last column says whether
the two give the same spans with the same times. The paragraph's traces are checked the same way.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest

from benchmarks.agent_traces import generate_runs, otlp_document
from otel_agent_profiler.adapters.files import parse_trace_bytes
from otel_agent_profiler.core import SpanRecord, TraceProfile
from tests.report.test_golden_reports import parallel_fan_out, sequential_tools
from tests.support.jaeger_ui_critical_path import jaeger_ui_critical_path_us
from tests.support.paths import DATA, ROOT
from tests.support.span_builders import CONSUMER, PRODUCER, anomaly_kinds, by_name, profile, sid, span

US = 1_000  # ns
LLM = {"gen_ai.operation.name": "chat"}
TOOL = {"gen_ai.operation.name": "execute_tool"}


def readme_table() -> dict[str, str]:
    """The table under "Against Jaeger's critical path": first column -> last column."""
    text = (ROOT / "docs" / "analysis.md").read_text(encoding="utf-8")
    section = text[text.index("**Against Jaeger's critical path.**") :]
    rows = re.findall(r"^\| (.+?) \|.*\| (yes|no) \|$", section.split("\n\n")[1], re.M)
    return dict(rows)


def jaeger_json(records: list[SpanRecord]) -> dict[str, Any]:
    """The records as Jaeger's JSON has them: microseconds, the OTLP parent as a CHILD_OF reference."""
    return {
        "spans": [
            {
                "spanID": r.span_id,
                "startTime": r.start_ns // US,
                "duration": (r.end_ns or r.start_ns) // US - r.start_ns // US,
                "references": [{"refType": "CHILD_OF", "spanID": r.parent_span_id}] if r.parent_span_id else [],
            }
            for r in records
        ]
    }


def at_microseconds(record: SpanRecord) -> SpanRecord:
    """The record with its times cut to the microsecond below, as Jaeger stores them."""
    start = record.start_ns // US * US
    end = start + ((record.end_ns or record.start_ns) - record.start_ns) // US * US
    return dataclasses.replace(record, start_ns=start, end_ns=end)


def both(records: list[SpanRecord]) -> tuple[TraceProfile, dict[str, int], dict[str, int]]:
    """(our profile, our µs on the path per span id, Jaeger UI's) for the records of one trace."""
    records = [at_microseconds(r) for r in records]
    ours = profile(records)
    ours_us = {s.span_id: s.critical_path_ns // US for s in ours.spans if s.critical_path_ns}
    return ours, ours_us, jaeger_ui_critical_path_us(jaeger_json(records))


def ms(value: float) -> int:
    return int(value * 1_000_000)


def sequential() -> list[SpanRecord]:
    return [
        span("agent", None, 0, ms(100)),
        span("plan", "agent", ms(5), ms(40), attributes=LLM),
        span("search", "agent", ms(45), ms(70), attributes=TOOL),
        span("answer", "agent", ms(72), ms(98), attributes=LLM),
    ]


def overlapping() -> list[SpanRecord]:
    return [
        span("agent", None, 0, ms(100)),
        span("fetch_a", "agent", ms(10), ms(60), attributes=TOOL),
        span("fetch_b", "agent", ms(12), ms(90), attributes=TOOL),
        span("fetch_c", "agent", ms(14), ms(40), attributes=TOOL),
    ]


def back_to_back() -> list[SpanRecord]:
    return [
        span("tool", None, 0, ms(100), attributes=TOOL),
        span("embed", "tool", ms(1), ms(30)),
        span("retrieve", "tool", ms(30), ms(99)),
    ]


def overflowing() -> list[SpanRecord]:
    return [
        span("agent", None, ms(10), ms(100)),
        span("early", "agent", ms(0), ms(40), attributes=LLM),
        span("stream", "agent", ms(80), ms(130), attributes=LLM),
    ]


def after_parent() -> list[SpanRecord]:
    return [
        span("agent", None, 0, ms(100)),
        span("call", "agent", ms(20), ms(60), attributes=LLM),
        span("late", "agent", ms(150), ms(200), attributes=TOOL),
        span("late_child", "late", ms(160), ms(170)),
    ]


def producer_consumer() -> list[SpanRecord]:
    return [
        span("agent", None, 0, ms(100)),
        span("enqueue", "agent", ms(10), ms(20), PRODUCER),
        span("handle", "enqueue", ms(15), ms(90), CONSUMER),
        span("call", "agent", ms(25), ms(60), attributes=LLM),
    ]


def several_roots() -> list[SpanRecord]:
    return [
        span("agent", None, 0, ms(100)),
        span("call", "agent", ms(10), ms(50), attributes=LLM),
        span("orphan", "lost", ms(20), ms(80), attributes=TOOL),
        span("orphan_child", "orphan", ms(30), ms(70)),
    ]


ROWS: dict[str, Callable[[], list[SpanRecord]]] = {
    "children one after another, with gaps": sequential,
    "overlapping siblings (parallel tool calls)": overlapping,
    "back-to-back children (one ends the instant the next starts)": back_to_back,
    "a child running past its parent's end, or starting before it": overflowing,
    "a child starting after its parent ended": after_parent,
    "a CONSUMER child of a PRODUCER span": producer_consumer,
    "several roots (a parent that never arrived)": several_roots,
    "categories (llm, tool, ...)": lambda: records_of(parallel_fan_out()),
}


def records_of(document: dict[str, Any]) -> list[SpanRecord]:
    read = parse_trace_bytes(json.dumps(document).encode(), "document")
    assert read.ok, read.problems
    return read.records


def test_every_row_of_the_table_is_checked() -> None:
    assert set(readme_table()) == set(ROWS)


@pytest.mark.parametrize("row", list(ROWS))
def test_the_row_says_whether_the_two_paths_are_the_same(row: str) -> None:
    _, ours, theirs = both(ROWS[row]())
    assert (ours == theirs) == (readme_table()[row] == "yes"), (ours, theirs)


def test_where_they_differ_it_is_for_the_reason_the_row_gives() -> None:
    _, ours, theirs = both(back_to_back())
    assert ours[sid("embed")] == 29_000 and sid("embed") not in theirs
    assert theirs[sid("tool")] == ours[sid("tool")] + 29_000

    _, ours, theirs = both(producer_consumer())
    # Jaeger UI clips the consumer to the producer (10 to 20 ms) like any child and puts its part on the path.
    assert sid("handle") not in ours and theirs[sid("handle")] == 5_000


def test_what_ours_adds_where_they_agree() -> None:
    trace, _, _ = both(overlapping())
    assert by_name(trace)["agent"].critical_path_waiting_ns > 0  # fetch_a ran while the agent "waited"
    for records, kind in ((overflowing(), "child_outlives_parent"), (after_parent(), "child_starts_after_parent")):
        trace, _, _ = both(records)
        assert kind in {k for k, _ in anomaly_kinds(trace)}


def test_jaeger_per_span_times_grouped_by_our_categories_are_our_totals() -> None:
    trace, ours, theirs = both(ROWS["categories (llm, tool, ...)"]())
    assert ours == theirs
    category = {s.span_id: s.category for s in trace.spans}
    grouped: dict[str, int] = defaultdict(int)
    for span_id, us in theirs.items():
        grouped[category[span_id]] += us * US
    totals = {name: stats.critical_path_ns for name, stats in trace.categories.items() if stats.critical_path_ns}
    assert grouped == totals
    assert {"llm", "tool"} <= set(totals)


def traces(document: dict[str, Any]) -> dict[str, list[SpanRecord]]:
    by_trace: dict[str, list[SpanRecord]] = defaultdict(list)
    for record in records_of(document):
        by_trace[record.trace_id].append(record)
    return by_trace


def test_the_paragraph_under_the_table() -> None:
    same = [
        json.loads((DATA / "demo_trace.otlp.json").read_text(encoding="utf-8")),
        parallel_fan_out(),
        sequential_tools(),
    ]
    for document in same:
        for records in traces(document).values():
            _, ours, theirs = both(records)
            assert ours == theirs

    research = json.loads((ROOT / "examples" / "traces" / "research-agent.otlp.json").read_text(encoding="utf-8"))
    runs = generate_runs(40, seed=5)
    synthetic = traces(otlp_document([s for run in runs for s in run]))
    differing = 0
    for records in [*traces(research).values(), *synthetic.values()]:
        records = [at_microseconds(r) for r in records]
        trace = profile(records)
        ours = {s.span_id: s.critical_path_ns // US for s in trace.spans if s.critical_path_ns}
        theirs = jaeger_ui_critical_path_us(jaeger_json(records))
        if ours != theirs:
            differing += 1
            names = {s.span_id: s.name.split()[0] for s in trace.spans}
            # Only an embedding call ending as its retrieval starts, whose time Jaeger gives to the tool.
            assert {names[i] for i in set(ours) ^ set(theirs)} == {"embeddings"}, names
        assert ours == jaeger_ui_critical_path_us(jaeger_json(records), back_to_back_on_path=True)
    assert differing == 1 + 12  # the research agent and 12 of the 40 synthetic runs
    assert len(synthetic) == 40

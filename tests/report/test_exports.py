"""The speedscope and Chrome trace-event exports, checked against the formats' schemas.

speedscope's schema is its published one (tests/data/speedscope-file-format-schema.json, from the
speedscope npm package; see the NOTICE next to it). The Trace Event Format has no official schema:
tests/data/chrome-trace-event-format.schema.json is written from its specification and Perfetto's
documentation (sources in its ``$comment``). What a schema cannot say (nesting, times, each span
once) is checked here, the way the readers build their stacks.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from benchmarks.agent_traces import generate_runs, otlp_document
from otel_agent_profiler.cli import main
from otel_agent_profiler.core import SpanKind, SpanProfile, SpanRecord, TraceProfile, profile_records
from otel_agent_profiler.core.pricing import with_built_in_prices
from otel_agent_profiler.offline import load_profiles
from otel_agent_profiler.report.chrome_trace import FLOW_CATEGORY, assign_lanes, to_chrome_trace
from otel_agent_profiler.report.speedscope import SCHEMA_URL, to_speedscope
from tests.support.paths import DATA, ROOT

SPEEDSCOPE_SCHEMA = json.loads((DATA / "speedscope-file-format-schema.json").read_text(encoding="utf-8"))
CHROME_SCHEMA = json.loads((DATA / "chrome-trace-event-format.schema.json").read_text(encoding="utf-8"))

TRACE_A = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACE_B = "00000000000000000000000000c0ffee"
# Not a whole number of microseconds, so the exact-nanosecond rule of the Chrome export is exercised.
BASE_NS = 1_760_000_000_000_000_123
US = 1000

LLM = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}
TOOL = {"gen_ai.operation.name": "execute_tool"}
AGENT = {"gen_ai.operation.name": "invoke_agent"}

# Trace A (microseconds from its start; names are unique, so a frame name identifies its span):
#
#   agent                  [0, 1000]      agent
#   ├── plan               [0, 200.5]     llm
#   ├── search             [200.5, 700]   tool     ┐
#   ├── weather            [200.5, 500]   tool     ├ three tools in parallel
#   │   └── GET /weather   [250, 450]              │
#   ├── calc               [300, 600]   tool     ┘
#   ├── answer             [700, 1000]    llm
#   │   └── marker         [1000, 1000]   empty, at its parent's very end
#   ├── tick               [700, 700]     empty, at the start of `answer`
#   └── late               [950, 1100]    overflows its parent
# plus a second root `side` [100, 300] (its parent is missing from the data).
SPECS_A: list[tuple[str, str | None, float, float, dict[str, Any]]] = [
    ("agent", None, 0, 1000, AGENT),
    ("plan", "agent", 0, 200.5, LLM),
    ("search", "agent", 200.5, 700, TOOL),
    ("weather", "agent", 200.5, 500, TOOL),
    ("GET /weather", "weather", 250, 450, {}),
    ("calc", "agent", 300, 600.001, TOOL),
    ("answer", "agent", 700, 1000, LLM),
    ("marker", "answer", 1000, 1000, {}),
    ("tick", "agent", 700, 700, {}),
    ("late", "agent", 950, 1100, {}),
    ("side", "ffffffffffffffff", 100, 300, {}),
]
SPECS_B: list[tuple[str, str | None, float, float, dict[str, Any]]] = [
    ("run", None, 2000, 2400, AGENT),
    ("step 1", "run", 2000, 2100, LLM),
    ("step 2", "run", 2100, 2400, LLM),
]


def _span_id(trace_id: str, name: str) -> str:
    return hashlib.blake2b(f"{trace_id}/{name}".encode(), digest_size=8).hexdigest()


def records(trace_id: str, specs: list[tuple[str, str | None, float, float, dict[str, Any]]]) -> list[SpanRecord]:
    ids = {name: _span_id(trace_id, name) for name, *_ in specs}
    return [
        SpanRecord(
            trace_id=trace_id,
            span_id=ids[name],
            parent_span_id=None if parent is None else ids.get(parent, parent),
            name=name,
            start_ns=BASE_NS + round(start * US),
            end_ns=BASE_NS + round(end * US),
            kind=SpanKind.CLIENT if attributes is LLM else SpanKind.INTERNAL,
            attributes=dict(attributes),
        )
        for name, parent, start, end, attributes in specs
    ]


@pytest.fixture
def profiles() -> list[TraceProfile]:
    result = profile_records(records(TRACE_A, SPECS_A) + records(TRACE_B, SPECS_B))
    assert [p.trace_id for p in result] == [TRACE_A, TRACE_B] or [p.trace_id for p in result] == [TRACE_B, TRACE_A]
    return sorted(result, key=lambda p: p.trace_id != TRACE_A)


# --------------------------------------------------------------------------- checkers


def check_speedscope(document: dict[str, Any], profiles: list[TraceProfile]) -> None:
    """Schema, then what speedscope's importer enforces (CallTreeProfileBuilder: values never go
    back, a close event closes the frame on top of the stack, all frames closed at the end), then
    that every span is in exactly one lane, at its exact times, nested only under its parent."""
    jsonschema.validate(document, SPEEDSCOPE_SCHEMA, cls=jsonschema.Draft7Validator)
    assert document["$schema"] == SCHEMA_URL
    frames = document["shared"]["frames"]
    assert len({(f["name"], f["file"]) for f in frames}) == len(frames)
    Key = tuple[str, str, int, int]  # name, category, start and end from the trace's start

    def key(span: SpanProfile, origin: int) -> Key:
        return (span.name, span.category, span.start_ns - origin, span.end_ns - origin)

    critical = {}
    assert len(document["profiles"]) == sum(assign_lanes(p).count + 1 for p in profiles)
    for trace in profiles:
        lanes = [sp for sp in document["profiles"] if sp["name"].startswith(f"{trace.trace_id} lane ")]
        name = f"{trace.trace_id} critical path"
        (critical[trace.trace_id],) = (sp for sp in document["profiles"] if sp["name"] == name)
        origin = trace.start_ns
        # Which spans a span may be nested under: its parent, by key (names need not be unique).
        parents: dict[Key, set[Key | None]] = {}
        for span in trace.spans:
            parents.setdefault(key(span, origin), set()).add(None if span.parent is None else key(span.parent, origin))
        seen: Counter[Key] = Counter()
        for sp in lanes:
            assert sp["type"] == "evented" and sp["unit"] == "nanoseconds"
            assert sp["startValue"] == 0 and sp["endValue"] == trace.duration_ns
            stack: list[tuple[int, str, str, int]] = []
            last = 0
            for event in sp["events"]:
                at = event["at"]
                assert isinstance(at, int)
                assert last <= at <= sp["endValue"], "speedscope: values must not go back"
                last = at
                frame = frames[event["frame"]]
                if event["type"] == "O":
                    stack.append((event["frame"], frame["name"], frame["file"], at))
                    continue
                assert stack and stack[-1][0] == event["frame"], "speedscope: closes a frame that is not on top"
                _, name, category, start = stack.pop()
                this = (name, category, start, at)
                assert this in parents, f"no span {this}"
                if stack:
                    _, p_name, p_category, p_start = stack[-1]
                    enclosing = [k for k in parents[this] if k is not None and k[:3] == (p_name, p_category, p_start)]
                    assert enclosing, f"{name} nested under {p_name}, not its parent"
                seen[this] += 1
            assert not stack, "speedscope: frames left open"
        assert seen == Counter(key(span, origin) for span in trace.spans), "each span in exactly one lane"

    for trace in profiles:
        path = critical[trace.trace_id]
        assert path["type"] == "evented" and path["unit"] == "nanoseconds" and path["startValue"] == 0
        assert path["endValue"] == trace.critical_path_ns
        # Self time of every frame instance, by its stack: what speedscope's views add up.
        emitted: Counter[tuple[tuple[tuple[str, str], ...], int]] = Counter()
        opened: list[tuple[int, int, int]] = []  # frame, opened at, time of its children
        last = 0
        for event in path["events"]:
            at = event["at"]
            assert isinstance(at, int) and last <= at <= path["endValue"]
            last = at
            if event["type"] == "O":
                opened.append((event["frame"], at, 0))
                continue
            frame_index, start, children = opened.pop()
            assert frame_index == event["frame"]
            chain = tuple((frames[f]["name"], frames[f]["file"]) for f, _, _ in opened)
            emitted[((*chain, (frames[frame_index]["name"], frames[frame_index]["file"])), at - start - children)] += 1
            if opened:
                f, s, c = opened[-1]
                opened[-1] = (f, s, c + at - start)
        assert not opened
        expected: Counter[tuple[tuple[tuple[str, str], ...], int]] = Counter()
        kept = {id(s) for s in trace.spans if s.on_critical_path or s.critical_path_ns > 0}
        for span in trace.spans:
            if id(span) in kept:
                node = span.parent
                while node is not None:
                    kept.add(id(node))
                    node = node.parent
        for span in trace.spans:
            if id(span) in kept:
                chain = []
                node: SpanProfile | None = span
                while node is not None:
                    chain.append((node.name, node.category))
                    node = node.parent
                expected[(tuple(reversed(chain)), span.critical_path_ns)] += 1
        assert emitted == expected
        assert sum(weight for (_, weight), n in emitted.items() for _ in range(n)) == trace.critical_path_ns


def check_chrome(document: dict[str, Any], profiles: list[TraceProfile]) -> None:
    """Schema, then per thread the stack a reader builds from complete events (sorted by start,
    longer first, then file order; an event starting when the top one has ended is not inside it):
    every span once, at its exact times, nested only under its parent; flows link each parent to
    its children on other lanes."""
    jsonschema.validate(document, CHROME_SCHEMA, cls=jsonschema.Draft7Validator)
    assert document["displayTimeUnit"] == "ms"
    origin = int(document["otherData"]["time_origin_unix_nano"])
    assert origin == min(p.start_ns for p in profiles)
    events = document["traceEvents"]
    process_names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    thread_names = {(e["pid"], e["tid"]) for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    pid_of = {p.trace_id: pid for pid, name in process_names.items() for p in profiles if name.endswith(p.trace_id)}
    assert len(pid_of) == len(profiles)
    spans_by_id = {(pid_of[p.trace_id], s.span_id): s for p in profiles for s in p.spans}

    complete = [(n, e) for n, e in enumerate(events) if e["ph"] == "X"]
    assert Counter((e["pid"], e["args"]["span_id"]) for _, e in complete) == Counter(spans_by_id.keys())
    lane_of = {(e["pid"], e["args"]["span_id"]): e["tid"] for _, e in complete}
    for _, event in complete:
        assert (event["pid"], event["tid"]) in thread_names
        span = spans_by_id[(event["pid"], event["args"]["span_id"])]
        # Times: microseconds with nanosecond decimals; round(x * 1000) gives the nanoseconds back.
        assert round(event["ts"] * 1000) == span.start_ns - origin
        assert round(event["dur"] * 1000) == span.duration_ns
        assert event["name"] == span.name
        assert event["cat"] == event["args"]["category"] == span.category
        assert event["args"]["self_time_ms"] == span.self_time_ns / 1e6
        assert event["args"]["critical_path_ms"] == span.critical_path_ns / 1e6
        assert event["args"]["on_critical_path"] is span.on_critical_path

    threads: dict[tuple[int, int], list[tuple[int, int, int, str]]] = {}
    for n, event in complete:
        start = round(event["ts"] * 1000)
        threads.setdefault((event["pid"], event["tid"]), []).append(
            (start, start + round(event["dur"] * 1000), n, event["args"]["span_id"])
        )
    for (pid, _tid), slices in threads.items():
        slices.sort(key=lambda s: (s[0], -(s[1] - s[0]), s[2]))
        stack: list[tuple[int, int, int, str]] = []
        for item in slices:
            start, end, _, span_id = item
            while stack and stack[-1][1] <= start and stack[-1][0] != start:
                stack.pop()
            span = spans_by_id[(pid, span_id)]
            if stack:
                top_start, top_end, _, top_id = stack[-1]
                assert top_start <= start and end <= top_end, f"{span.name} overlaps without nesting"
                assert span.parent is not None and span.parent.span_id == top_id, f"{span.name} mis-nested"
            stack.append(item)

    flows = [e for e in events if e["ph"] in "sf"]
    starts = {e["id"]: e for e in flows if e["ph"] == "s"}
    ends = {e["id"]: e for e in flows if e["ph"] == "f"}
    assert starts.keys() == ends.keys() and len(starts) * 2 == len(flows)
    linked = set()
    for flow_id, start in starts.items():
        end = ends[flow_id]
        assert start["cat"] == end["cat"] == FLOW_CATEGORY and end["bp"] == "e"
        assert start["ts"] == end["ts"] and start["pid"] == end["pid"]
        linked.add((start["pid"], start["tid"], end["tid"], start["ts"]))
    for (pid, span_id), span in spans_by_id.items():
        parent = span.parent
        if parent is None or (pid, parent.span_id) not in spans_by_id:
            continue
        child_lane, parent_lane = lane_of[(pid, span_id)], lane_of[(pid, parent.span_id)]
        if child_lane != parent_lane and parent.start_ns <= span.start_ns <= parent.end_ns:
            ts = next(e["ts"] for _, e in complete if e["pid"] == pid and e["args"]["span_id"] == span_id)
            assert (pid, parent_lane, child_lane, ts) in linked


def _named(profile: TraceProfile) -> dict[str, SpanProfile]:
    spans = {s.name: s for s in profile.spans}
    assert len(spans) == len(profile.spans)
    return spans


# --------------------------------------------------------------------------- the exports


def test_speedscope_export_matches_the_schema_and_the_profile(profiles: list[TraceProfile]) -> None:
    document = to_speedscope(profiles, name="two runs")
    check_speedscope(document, profiles)
    assert document["name"] == "two runs"
    assert json.loads(json.dumps(document)) == document


def test_chrome_export_matches_the_schema_and_the_profile(profiles: list[TraceProfile]) -> None:
    document = to_chrome_trace(profiles)
    check_chrome(document, profiles)
    assert json.loads(json.dumps(document)) == document


def test_parallel_children_go_to_their_own_lanes(profiles: list[TraceProfile]) -> None:
    trace = profiles[0]
    spans = _named(trace)
    lanes = assign_lanes(trace)
    lane = {s.name: lanes.lane[i] for i, s in enumerate(trace.spans)}
    # Sequential children stay on their parent's lane; each parallel tool gets a lane of its own
    # (the first one it finds free), and the grandchild stays with its parent.
    assert lane["plan"] == lane["answer"] == lane["agent"] == 0
    assert len({lane["search"], lane["weather"], lane["calc"]}) == 3
    assert lane["GET /weather"] == lane["weather"]
    # `search` and `weather` start together: the longer one shares the parent's lane.
    assert lane["search"] == 0
    # Overflowing its parent, and empty at its parent's end or at the start of a sibling: elsewhere.
    # (`marker` may follow `agent` on lane 0, at the top: readers close `agent` before it opens.)
    index = {s.name: i for i, s in enumerate(trace.spans)}
    assert lane["late"] != 0 and lane["tick"] != 0
    assert index["marker"] in lanes.tops[lane["marker"]] and index["late"] in lanes.tops[lane["late"]]
    # The second root overlaps the first: another lane, at the top.
    assert lane["side"] != 0
    assert spans["side"].parent is None


def test_chrome_times_are_exact_nanoseconds_in_microseconds(profiles: list[TraceProfile]) -> None:
    document = to_chrome_trace(profiles)
    text = json.dumps(document)
    x = [e for e in json.loads(text)["traceEvents"] if e["ph"] == "X"]
    calc = next(e for e in x if e["name"] == "calc")
    # Whole microseconds are integers; others carry their nanoseconds as three decimals.
    assert calc["ts"] == 300 and calc["dur"] == 300.001
    second = next(e for e in x if e["name"] == "run")
    assert second["ts"] == 2000 and second["pid"] == 2  # relative to the earliest trace, not its own


def test_one_trace_and_no_flows(profiles: list[TraceProfile]) -> None:
    document = to_chrome_trace(profiles[1:], flows=False)
    check_chrome(document, profiles[1:])
    assert {e["ph"] for e in document["traceEvents"]} == {"M", "X"}
    speedscope = to_speedscope(profiles[1:])
    check_speedscope(speedscope, profiles[1:])
    # Sequential steps: one lane, plus the critical path.
    assert [p["name"].split(" ", 1)[1] for p in speedscope["profiles"]] == ["lane 0", "critical path"]


def test_empty_input_gives_valid_empty_documents() -> None:
    jsonschema.validate(to_speedscope([]), SPEEDSCOPE_SCHEMA)
    jsonschema.validate(to_chrome_trace([]), CHROME_SCHEMA)


def test_the_schemas_reject_what_the_readers_would() -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"shared": {"frames": []}, "profiles": []}, SPEEDSCOPE_SCHEMA)
    bad_unit = {
        "$schema": SCHEMA_URL,
        "shared": {"frames": [{"name": "a"}]},
        "profiles": [{"type": "evented", "name": "x", "unit": "ms", "startValue": 0, "endValue": 1, "events": []}],
    }
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad_unit, SPEEDSCOPE_SCHEMA)
    no_dur = {"traceEvents": [{"name": "a", "cat": "c", "ph": "X", "ts": 0, "pid": 1, "tid": 1}]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(no_dur, CHROME_SCHEMA)
    bad_unit_chrome = {"traceEvents": [], "displayTimeUnit": "us"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad_unit_chrome, CHROME_SCHEMA)
    thread_without_tid = {"traceEvents": [{"name": "thread_name", "ph": "M", "pid": 1, "args": {"name": "x"}}]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(thread_without_tid, CHROME_SCHEMA)


@pytest.mark.parametrize("seed", range(40))
def test_random_trees_nest_properly_in_both_formats(seed: int) -> None:
    rng = random.Random(seed)
    trace_id = f"{seed + 1:032x}"
    specs: list[tuple[str, str | None, float, float, dict[str, Any]]] = [("s0", None, 0, 1000, AGENT)]
    for n in range(1, rng.randint(2, 60)):
        parent = rng.choice(specs)
        # Mostly inside the parent, on a coarse grid so that ends touch and empty spans occur;
        # sometimes overflowing it, sometimes a second root.
        p_start, p_end = int(parent[2]), int(parent[3])
        start = rng.randrange(p_start, p_end + 1, 1) if p_end > p_start else p_start
        start = start - start % 50 if rng.random() < 0.7 else start
        end = min(p_end, start + rng.choice([0, 50, 100, 250, 400]))
        if rng.random() < 0.1:
            end = p_end + 100
        parent_name: str | None = parent[0] if rng.random() > 0.05 else None
        specs.append((f"s{n}", parent_name, start, end, rng.choice([LLM, TOOL, AGENT, {}])))
    (trace,) = profile_records(records(trace_id, specs))
    check_speedscope(to_speedscope([trace]), [trace])
    check_chrome(to_chrome_trace([trace]), [trace])


def test_the_bundled_example_exports(tmp_path: Path) -> None:
    example = ROOT / "examples" / "traces" / "research-agent.otlp.json"
    from otel_agent_profiler.adapters import read_trace_file

    traces = profile_records(read_trace_file(str(example)).records)
    check_speedscope(to_speedscope(traces), traces)
    check_chrome(to_chrome_trace(traces), traces)


# --------------------------------------------------------------------------- the command line


def _otlp_file(path: Path, *traces: list[SpanRecord]) -> Path:
    spans = []
    for record in (r for trace in traces for r in trace):
        span = {
            "traceId": record.trace_id,
            "spanId": record.span_id,
            "name": record.name,
            "kind": 3 if record.kind is SpanKind.CLIENT else 1,
            "startTimeUnixNano": str(record.start_ns),
            "endTimeUnixNano": str(record.end_ns),
            "attributes": [{"key": k, "value": {"stringValue": str(v)}} for k, v in record.attributes.items()],
        }
        if record.parent_span_id:
            span["parentSpanId"] = record.parent_span_id
        spans.append(span)
    document = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "t"}, "spans": spans}]}]}
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


@pytest.fixture
def trace_file(tmp_path: Path) -> Path:
    return _otlp_file(tmp_path / "runs.otlp.json", records(TRACE_A, SPECS_A), records(TRACE_B, SPECS_B))


def test_cli_exports_speedscope(trace_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.speedscope.json"
    assert main(["export", str(trace_file), "--format", "speedscope", "--output", str(out)]) == 0
    document = json.loads(out.read_text(encoding="utf-8"))
    traces = profile_records(records(TRACE_A, SPECS_A) + records(TRACE_B, SPECS_B))
    check_speedscope(document, traces)
    assert document["name"] == "runs.otlp.json"
    assert capsys.readouterr().err == ""


def test_cli_speedscope_written_a_trace_at_a_time_is_the_whole_document(tmp_path: Path) -> None:
    """export streams the speedscope document (frames after the profiles, each profile freed once
    written): parsed, it is the document ``to_speedscope`` builds whole, and the same on stdout."""
    runs = [span for run in generate_runs(12, seed=8) for span in run]
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(otlp_document(runs)), encoding="utf-8")
    out = tmp_path / "out.speedscope.json"
    assert main(["export", str(path), "--format", "speedscope", "--output", str(out)]) == 0
    expected = to_speedscope(load_profiles([str(path)], prices=with_built_in_prices(None)).profiles, name="runs.json")
    assert json.loads(out.read_bytes()) == expected
    assert len(expected["profiles"]) > 24 and len(expected["shared"]["frames"]) > 10
    assert out.read_bytes().endswith(b"}\n")


def test_cli_exports_one_chrome_trace_to_stdout(trace_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(trace_file), "--format", "chrome", "-o", "-", "--trace", TRACE_B.upper()]) == 0
    document = json.loads(capsys.readouterr().out)
    (trace,) = profile_records(records(TRACE_B, SPECS_B))
    check_chrome(document, [trace])


def test_cli_accepts_a_64_bit_trace_id(trace_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "b.json"
    assert main(["export", str(trace_file), "--format", "chrome", "-o", str(out), "--trace", TRACE_B[16:]]) == 0
    assert {e["pid"] for e in json.loads(out.read_text(encoding="utf-8"))["traceEvents"]} == {1}


def test_cli_unknown_trace_id_is_an_error(trace_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "none.json"
    code = main(["export", str(trace_file), "--format", "chrome", "-o", str(out), "--trace", "deadbeef"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["otel-agent-profiler: error: no trace deadbeef in the input (2 traces read)"]
    assert not out.exists()


def test_cli_unreadable_file_gets_one_line_and_the_rest_is_exported(
    trace_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"resourceSpans": [', encoding="utf-8")
    out = tmp_path / "out.json"
    assert main(["export", str(broken), str(trace_file), "--format", "speedscope", "-o", str(out)]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "broken.json" in err[0]
    document = json.loads(out.read_text(encoding="utf-8"))
    assert len([p for p in document["profiles"] if p["name"].endswith(" critical path")]) == 2


def test_cli_nothing_to_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "empty.json"
    broken.write_text("", encoding="utf-8")
    out = tmp_path / "out.json"
    assert main(["export", str(broken), "--format", "chrome", "-o", str(out)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and err[-1] == "otel-agent-profiler: error: no traces to export"
    assert not out.exists()


def test_cli_unwritable_output(trace_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "missing-dir" / "out.json"
    assert main(["export", str(trace_file), "--format", "chrome", "-o", str(out)]) == 1
    assert "cannot write" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["export", "x.json"], ["export", "x.json", "--format", "svg", "-o", "y"]])
def test_cli_requires_format_and_output(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    capsys.readouterr()


def test_cli_help_lists_export(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "export" in out and "analyze" in out and "serve" in out


@pytest.mark.e2e
def test_console_script_exports_both_formats(trace_file: Path, tmp_path: Path) -> None:
    script = Path(sys.executable).parent / ("otel-agent-profiler.exe" if os.name == "nt" else "otel-agent-profiler")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "otel_agent_profiler"]
    traces = profile_records(records(TRACE_A, SPECS_A) + records(TRACE_B, SPECS_B))
    for fmt, check in (("speedscope", check_speedscope), ("chrome", check_chrome)):
        out = tmp_path / f"out.{fmt}.json"
        result = subprocess.run(
            [*command, "export", str(trace_file), "--format", fmt, "--output", str(out)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        assert result.stderr == ""
        check(json.loads(out.read_text(encoding="utf-8")), traces)
    result = subprocess.run(
        [*command, "export", str(trace_file), "--format", "chrome", "-o", "-", "--trace", "0" * 32],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and "no trace" in result.stderr and result.stdout == ""

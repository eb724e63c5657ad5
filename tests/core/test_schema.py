"""The JSON schema (``profiles_to_dict``): its shape, its types and the numbers of a small agent trace.

Times are float milliseconds. The trace below uses whole milliseconds, so every expected value is
exactly representable and compared with ``==``.
"""

from __future__ import annotations

import json
import re

from otel_agent_profiler.core import CATEGORIES, profile_records, profiles_to_dict, trace_to_dict
from tests.support.span_builders import TRACE_ID, sid, span, with_events

MS = 1_000_000
T0 = 1_700_000_000_000_000_000  # a realistic epoch start, in ns

HEX32 = re.compile(r"^[0-9a-f]{32}$")
HEX16 = re.compile(r"^[0-9a-f]{16}$")


def at(ms: int) -> int:
    return T0 + ms * MS


def agent_trace_records():
    """invoke_agent root -> streaming chat -> two parallel execute_tool spans -> chat.

    offsets in ms:
      root   invoke_agent planner   [0, 2000]
      chat1  chat gpt-4o, streaming [10, 810]     first chunk at 260 -> TTFT 250
      tool1  execute_tool get_weather [820, 1320]  runs alongside tool2, which ends later
      tool2  execute_tool search_web  [830, 1530]
      chat2  chat gpt-4o              [1540, 1990]
    """
    chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}
    return [
        span(
            "root",
            None,
            at(0),
            at(2_000),
            attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"},
        ),
        with_events(
            span(
                "chat1",
                "root",
                at(10),
                at(810),
                attributes={
                    **chat,
                    "gen_ai.is_streaming": True,
                    "gen_ai.usage.input_tokens": 1_200,
                    "gen_ai.usage.output_tokens": 80,
                },
            ),
            ("gen_ai.content.completion.chunk", at(260)),
            ("gen_ai.content.completion.chunk", at(300)),
        ),
        span("tool1", "root", at(820), at(1_320), attributes={"gen_ai.operation.name": "execute_tool"}),
        span("tool2", "root", at(830), at(1_530), attributes={"gen_ai.operation.name": "execute_tool"}),
        span(
            "chat2",
            "root",
            at(1_540),
            at(1_990),
            attributes={**chat, "gen_ai.usage.input_tokens": 1_500, "gen_ai.usage.output_tokens": 150},
        ),
    ]


def agent_trace_dict() -> dict:
    return profiles_to_dict(profile_records(agent_trace_records()))


def test_top_level_shape() -> None:
    result = agent_trace_dict()
    assert isinstance(result, dict)
    assert list(result) == ["traces"]
    assert isinstance(result["traces"], list)
    assert len(result["traces"]) == 1


def test_trace_fields_and_types() -> None:
    trace = agent_trace_dict()["traces"][0]
    assert {"trace_id", "duration_ms", "critical_path_ms", "categories", "spans"} <= set(trace)
    assert isinstance(trace["trace_id"], str)
    assert HEX32.match(trace["trace_id"])
    assert trace["trace_id"] == TRACE_ID
    assert type(trace["duration_ms"]) is float
    assert type(trace["critical_path_ms"]) is float
    assert isinstance(trace["categories"], dict)
    assert isinstance(trace["spans"], list)


def test_every_category_is_listed_with_float_times() -> None:
    categories = agent_trace_dict()["traces"][0]["categories"]
    assert set(categories) == set(CATEGORIES)
    for name, stats in categories.items():
        assert {"count", "self_time_ms", "critical_path_ms"} <= set(stats), name
        assert type(stats["count"]) is int, name
        assert type(stats["self_time_ms"]) is float, name
        assert type(stats["critical_path_ms"]) is float, name


def test_span_fields_and_types() -> None:
    spans = agent_trace_dict()["traces"][0]["spans"]
    assert len(spans) == 5
    for entry in spans:
        assert {
            "span_id",
            "parent_span_id",
            "name",
            "category",
            "duration_ms",
            "self_time_ms",
            "critical_path_ms",
            "on_critical_path",
        } <= set(entry)
        assert isinstance(entry["span_id"], str) and HEX16.match(entry["span_id"])
        parent = entry["parent_span_id"]
        assert parent is None or (isinstance(parent, str) and HEX16.match(parent))
        assert isinstance(entry["name"], str)
        assert entry["category"] in CATEGORIES
        for key in ("duration_ms", "self_time_ms", "critical_path_ms"):
            assert type(entry[key]) is float, (entry["name"], key)
        assert type(entry["on_critical_path"]) is bool


def test_trace_values() -> None:
    trace = agent_trace_dict()["traces"][0]
    # From the root's start (0) to its end (2000).
    assert trace["duration_ms"] == 2_000.0
    # One root: its subtree's critical-path sections tile its duration.
    assert trace["critical_path_ms"] == 2_000.0


def test_category_values() -> None:
    categories = agent_trace_dict()["traces"][0]["categories"]
    picked = {
        name: (stats["count"], stats["self_time_ms"], stats["critical_path_ms"]) for name, stats in categories.items()
    }
    assert picked == {
        # root self time: 2000 - union([10, 810], [820, 1530], [1540, 1990]) = 2000 - 1960 = 40.
        # root critical path: [0, 10] + [810, 830] + [1530, 1540] + [1990, 2000] = 50; it includes
        # [820, 830] because tool1 is off the path (tool2 ends later and decides).
        "agent": (1, 40.0, 50.0),
        # chat1 800 + chat2 450, both on the path.
        "llm": (2, 1_250.0, 1_250.0),
        # tool1 500 + tool2 700 of self time; only tool2 (700) on the path.
        "tool": (2, 1_200.0, 700.0),
        "embedding": (0, 0.0, 0.0),
        "retrieval": (0, 0.0, 0.0),
        "memory": (0, 0.0, 0.0),
        "internal": (0, 0.0, 0.0),
    }
    assert sum(stats["critical_path_ms"] for stats in categories.values()) == 2_000.0


def test_span_values() -> None:
    spans = agent_trace_dict()["traces"][0]["spans"]
    picked = [
        (
            entry["span_id"],
            entry["parent_span_id"],
            entry["name"],
            entry["category"],
            entry["duration_ms"],
            entry["self_time_ms"],
            entry["critical_path_ms"],
            entry["on_critical_path"],
        )
        for entry in spans
    ]
    # Depth first, children by start time.
    assert picked == [
        (sid("root"), None, "root", "agent", 2_000.0, 40.0, 50.0, True),
        (sid("chat1"), sid("root"), "chat1", "llm", 800.0, 800.0, 800.0, True),
        (sid("tool1"), sid("root"), "tool1", "tool", 500.0, 500.0, 0.0, False),
        (sid("tool2"), sid("root"), "tool2", "tool", 700.0, 700.0, 700.0, True),
        (sid("chat2"), sid("root"), "chat2", "llm", 450.0, 450.0, 450.0, True),
    ]
    assert sum(entry["critical_path_ms"] for entry in spans) == 2_000.0


def test_streaming_and_token_extras() -> None:
    trace = agent_trace_dict()["traces"][0]
    spans = {entry["name"]: entry for entry in trace["spans"]}
    assert spans["chat1"]["time_to_first_token_ms"] == 250.0
    assert spans["chat2"]["time_to_first_token_ms"] is None
    assert trace["llm_calls"] == 2
    assert trace["tokens"] == {"input": 2_700, "output": 230, "cached_input": 0, "reasoning": 0, "total": 2_930}
    assert trace["critical_path_tokens"] == trace["tokens"]


def test_json_round_trip() -> None:
    result = agent_trace_dict()
    assert json.loads(json.dumps(result)) == result


def test_duration_and_critical_path_with_two_roots() -> None:
    # Two separate roots with a gap: duration is earliest start to latest end (400 ms), the
    # critical path is the sum over spans (100 + 100 ms).
    other = "ffffffffffffffffffffffffffffffff"
    records = [
        span("a", None, at(0), at(100), trace_id=other),
        span("b", None, at(300), at(400), trace_id=other),
        span("a1", "a", at(20), at(60), trace_id=other),
    ]
    trace = profiles_to_dict(profile_records(records))["traces"][0]
    assert trace["trace_id"] == other
    assert trace["duration_ms"] == 400.0
    assert trace["critical_path_ms"] == 200.0
    assert {entry["name"]: entry["critical_path_ms"] for entry in trace["spans"]} == {"a": 60.0, "a1": 40.0, "b": 100.0}
    assert trace["categories"]["internal"] == {**trace["categories"]["internal"], "count": 3, "critical_path_ms": 200.0}


def test_missing_parent_keeps_its_recorded_parent_id() -> None:
    records = [span("orphan", "gone", at(0), at(5))]
    entry = profiles_to_dict(profile_records(records))["traces"][0]["spans"][0]
    assert entry["parent_span_id"] == sid("gone")


def test_several_traces_ordered_by_start() -> None:
    late, early = "1" * 32, "2" * 32
    records = [span("x", None, at(50), at(60), trace_id=late), span("y", None, at(10), at(20), trace_id=early)]
    result = profiles_to_dict(profile_records(records))
    assert [t["trace_id"] for t in result["traces"]] == [early, late]
    assert [t["duration_ms"] for t in result["traces"]] == [10.0, 10.0]


def test_trace_to_dict_without_spans() -> None:
    [profile] = profile_records(agent_trace_records())
    result = trace_to_dict(profile, include_spans=False)
    assert "spans" not in result
    assert result["duration_ms"] == 2_000.0

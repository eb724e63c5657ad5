"""Profiles averaged per agent program (core.programs, live.program_averages): which program a trace
runs, exact averages over constructed traces, percentiles over each program's recent durations, and
the cap."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable

import pytest

from otel_agent_profiler.core import CATEGORIES, PriceTable, SpanRecord, StatusCode, TraceProfile, profile_trace
from otel_agent_profiler.core.programs import UNKNOWN_SERVICE, percentile, program_of
from otel_agent_profiler.live.program_averages import ProgramAverages
from tests.support.span_builders import CLIENT, SERVER, profile, span

MS = 1_000_000
AGENT = {"gen_ai.operation.name": "invoke_agent"}
TOOL = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}


def _trace_id(number: int) -> str:
    return f"{number:032x}"


def _in_service(records: Iterable[SpanRecord], service: str | None) -> list[SpanRecord]:
    resource = {} if service is None else {"service.name": service}
    return [dataclasses.replace(record, resource=resource) for record in records]


def agent_run(
    agent: str,
    *,
    number: int = 1,
    llm_ms: int = 600,
    tool_ms: int = 300,
    input_tokens: int = 1000,
    output_tokens: int = 50,
    cached_tokens: int = 0,
    service: str | None = "agents",
    error: bool = False,
) -> TraceProfile:
    """agent [0, llm+tool] -> chat [0, llm], then a tool [llm, llm+tool]; the chat may fail."""
    trace_id = _trace_id(number)
    chat = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.usage.input_tokens": input_tokens,
        "gen_ai.usage.output_tokens": output_tokens,
        "gen_ai.usage.cache_read.input_tokens": cached_tokens,
    }
    named_agent = {**AGENT, "gen_ai.agent.name": agent}
    records = [
        span("agent", None, 0, (llm_ms + tool_ms) * MS, trace_id=trace_id, attributes=named_agent),
        span("chat", "agent", 0, llm_ms * MS, CLIENT, trace_id=trace_id, attributes=chat),
        span("tool", "agent", llm_ms * MS, (llm_ms + tool_ms) * MS, trace_id=trace_id, attributes=TOOL),
    ]
    if error:
        records[1] = dataclasses.replace(records[1], status=StatusCode.ERROR)
    return profile(_in_service(records, service))


def _only(averages: ProgramAverages) -> dict[str, object]:
    programs = averages.to_dict()["programs"]
    assert len(programs) == 1
    return programs[0]  # type: ignore[no-any-return]


# -- which program a trace runs ---------------------------------------------------------------


def test_the_program_is_the_outermost_agents_name_and_the_roots_service() -> None:
    records = [
        span("request", None, 0, 100 * MS, CLIENT, attributes={"http.request.method": "POST"}),
        span("outer", "request", 0, 90 * MS, attributes={**AGENT, "gen_ai.agent.name": "planner"}),
        span("inner", "outer", 0, 50 * MS, attributes={**AGENT, "gen_ai.agent.name": "researcher"}),
    ]
    assert program_of(profile(_in_service(records, "frontend"))) == ("frontend", "planner")


def test_an_agent_nearer_the_root_wins_over_one_found_earlier_deeper_down() -> None:
    records = [
        span("root", None, 0, 100 * MS),
        span("step", "root", 0, 40 * MS),
        span("deep", "step", 0, 30 * MS, attributes={**AGENT, "gen_ai.agent.name": "deep"}),
        span("near", "root", 50 * MS, 90 * MS, attributes={**AGENT, "gen_ai.agent.name": "near"}),
    ]
    assert program_of(profile(_in_service(records, "svc"))) == ("svc", "near")


@pytest.mark.parametrize(
    ("attributes", "expected"),
    [
        ({"gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": "triage"}, "triage"),
        ({"openinference.span.kind": "AGENT", "agent.name": "writer"}, "writer"),
        ({"traceloop.span.kind": "workflow", "traceloop.entity.name": "pipeline"}, "pipeline"),
        # An agent span that names no agent is named by its span name.
        (AGENT, "workflow-root"),
    ],
)
def test_agent_and_workflow_names_of_every_convention(attributes: dict[str, object], expected: str) -> None:
    records = [span("workflow-root", None, 0, 10 * MS, attributes=attributes)]
    assert program_of(profile(_in_service(records, "svc"))) == ("svc", expected)


def test_without_an_agent_span_the_program_is_the_root_span_and_the_service_may_be_unknown() -> None:
    records = [span("POST /chat", None, 0, 10 * MS, attributes={"http.request.method": "POST"})]
    assert program_of(profile(_in_service(records, None))) == (UNKNOWN_SERVICE, "POST /chat")


# -- the averages -----------------------------------------------------------------------------


def test_averages_are_exact_means_per_trace() -> None:
    averages = ProgramAverages(clock=lambda: 1_700_000_000.5)
    averages.add(agent_run("planner", number=1, llm_ms=600, tool_ms=300, input_tokens=1000, output_tokens=50))
    averages.add(
        agent_run(
            "planner", number=2, llm_ms=200, tool_ms=100, input_tokens=3000, output_tokens=150, cached_tokens=1000
        )
    )
    averages.add(agent_run("planner", number=3, llm_ms=400, tool_ms=500, error=True))
    document = averages.to_dict()
    assert document["since"] == 1_700_000_000.5 and document["other_programs"] == 0
    program = _only(averages)
    assert (program["service"], program["program"], program["traces"], program["error_traces"]) == (
        "agents",
        "planner",
        3,
        1,
    )
    # Durations 900, 300 and 900 ms.
    assert program["duration_ms"] == {"mean": 700.0, "p50": 900.0, "p90": 900.0}
    assert program["critical_path_ms"] == 700.0
    categories = program["categories"]
    assert list(categories) == list(CATEGORIES)
    assert categories["llm"] == {"critical_path_ms": 400.0, "self_time_ms": 400.0, "critical_path_share": 1200 / 2100}
    assert categories["tool"] == {"critical_path_ms": 300.0, "self_time_ms": 300.0, "critical_path_share": 900 / 2100}
    assert categories["agent"] == {"critical_path_ms": 0.0, "self_time_ms": 0.0, "critical_path_share": 0.0}
    assert program["llm_calls"] == 1.0
    assert program["tokens"] == {
        "input": 5000 / 3,
        "output": 250 / 3,
        "cached_input": 1000 / 3,
        "reasoning": 0.0,
        "total": 5250 / 3,
    }
    # No price table and no recorded cost; no inference server's spans.
    assert (program["priced_traces"], program["cost_usd"]) == (0, None)
    assert (program["traces_with_llm_phases"], program["critical_path_llm_phases_ms"]) == (0, None)


def test_cost_is_averaged_over_the_priced_traces() -> None:
    prices = PriceTable.from_mapping({"gpt-4o-mini": {"input": 1.0, "output": 10.0}})
    averages = ProgramAverages()
    run = agent_run("planner", number=1, input_tokens=1_000_000, output_tokens=100_000)
    priced = profile_trace([node.record for node in run.spans], prices=prices)
    assert priced.cost_usd == pytest.approx(2.0)
    averages.add(priced)
    averages.add(agent_run("planner", number=2))
    program = _only(averages)
    assert (program["traces"], program["priced_traces"]) == (2, 1)
    assert program["cost_usd"] == pytest.approx(2.0)


def _served_run(number: int, queue_s: float, prefill_s: float, decode_s: float) -> TraceProfile:
    """An agent whose one 1 s LLM call has the inference server's span below it, then a 100 ms tool."""
    trace_id = _trace_id(number)
    server = {
        "gen_ai.latency.time_in_queue": queue_s,
        "gen_ai.latency.time_in_model_prefill": prefill_s,
        "gen_ai.latency.time_in_model_decode": decode_s,
    }
    chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "llama"}
    records = [
        span("agent", None, 0, 1100 * MS, trace_id=trace_id, attributes={**AGENT, "gen_ai.agent.name": "served"}),
        span("chat", "agent", 0, 1000 * MS, CLIENT, trace_id=trace_id, attributes=chat),
        span("server", "chat", 10 * MS, 990 * MS, SERVER, trace_id=trace_id, attributes=server),
        span("tool", "agent", 1000 * MS, 1100 * MS, trace_id=trace_id, attributes=TOOL),
    ]
    return profile(_in_service(records, "agents"))


def test_llm_phases_are_averaged_over_the_traces_that_have_them() -> None:
    averages = ProgramAverages()
    averages.add(_served_run(1, 0.2, 0.3, 0.4))
    averages.add(_served_run(2, 0.4, 0.1, 0.2))
    # The same program, without an inference server's span: counted, but not in the phases' means.
    plain = _served_run(3, 0, 0, 0)
    averages.add(profile([node.record for node in plain.spans if node.name != "server"]))
    program = _only(averages)
    assert (program["traces"], program["traces_with_llm_phases"]) == (3, 2)
    assert program["critical_path_llm_phases_ms"] == pytest.approx(
        {"queue": 300.0, "prefill": 200.0, "decode": 300.0, "other": 200.0}
    )
    # Pause (queue) and tool time, side by side.
    assert program["categories"]["tool"]["critical_path_ms"] == 100.0


def test_percentiles_are_over_each_programs_most_recent_durations() -> None:
    averages = ProgramAverages(duration_window=5)
    for number in range(1, 11):
        averages.add(agent_run("planner", number=number, llm_ms=number * 100, tool_ms=0))
    program = _only(averages)
    # The mean is over all ten (100 ... 1000 ms); p50 and p90 over the last five (600 ... 1000 ms),
    # interpolated between the nearest ranks.
    assert program["duration_ms"] == {"mean": 550.0, "p50": 800.0, "p90": 960.0}


@pytest.mark.parametrize(
    ("values", "fraction", "expected"), [([5], 0.9, 5.0), ([1, 2, 3, 4, 5], 0.9, 4.6), ([1, 2, 3, 4], 0.5, 2.5)]
)
def test_percentile_interpolates_between_the_nearest_ranks(values: list[int], fraction: float, expected: float) -> None:
    assert percentile(values, fraction) == pytest.approx(expected)


def test_programs_beyond_the_cap_are_only_counted() -> None:
    averages = ProgramAverages(max_programs=2)
    for number, agent in enumerate(("a", "b", "c", "a", "d", "c"), start=1):
        averages.add(agent_run(agent, number=number))
    document = averages.to_dict()
    assert [(p["program"], p["traces"]) for p in document["programs"]] == [("a", 2), ("b", 1)]
    # c (twice) and d came after two programs were kept.
    assert document["other_programs"] == averages.other_programs == 3


def test_sorted_by_traces_then_service_and_program_and_filtered_by_service() -> None:
    averages = ProgramAverages()
    runs = [("x", "svc-b"), ("y", "svc-a"), ("x", "svc-a"), ("y", "svc-a"), ("z", "svc-b")]
    for number, (agent, service) in enumerate(runs, start=1):
        averages.add(agent_run(agent, number=number, service=service))
    document = averages.to_dict()
    assert [(p["service"], p["program"], p["traces"]) for p in document["programs"]] == [
        ("svc-a", "y", 2),
        ("svc-a", "x", 1),
        ("svc-b", "x", 1),
        ("svc-b", "z", 1),
    ]
    assert [p["program"] for p in averages.to_dict(service="svc-b")["programs"]] == ["x", "z"]
    assert averages.to_dict(service="nowhere")["programs"] == []


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="max_programs"):
        ProgramAverages(max_programs=-1)
    with pytest.raises(ValueError, match="duration_window"):
        ProgramAverages(duration_window=0)


def test_reading_while_traces_are_added_sees_whole_traces() -> None:
    averages = ProgramAverages(duration_window=50)
    runs = [agent_run(f"agent-{number % 3}", number=number) for number in range(30)]
    done = threading.Event()

    def write() -> None:
        for _ in range(100):
            for run in runs:
                averages.add(run)
        done.set()

    writer = threading.Thread(target=write)
    writer.start()
    while not done.is_set():
        for program in averages.to_dict()["programs"]:
            # Every run is 900 ms with 600 ms of LLM: a half-added trace would show in the means.
            assert program["duration_ms"]["mean"] == pytest.approx(900.0)
            assert program["categories"]["llm"]["critical_path_ms"] == pytest.approx(600.0)
    writer.join()
    assert sum(p["traces"] for p in averages.to_dict()["programs"]) == 3000


def test_the_servers_load_is_averaged_over_the_traces_whose_calls_met_one() -> None:
    from otel_agent_profiler.core.profile import BackendLoad

    averages = ProgramAverages()
    loads = [
        BackendLoad("vllm", 3, running_mean=2.0, running_max=2, waiting_mean=1.0, waiting_max=4,
                    kv_cache_usage_max=0.5, prefix_cache_hit_rate=0.25, preemptions=1),
        BackendLoad("vllm", 2, running_mean=1.0, running_max=1, waiting_mean=0.0, waiting_max=0,
                    kv_cache_usage_max=0.75, prefix_cache_hit_rate=0.75, preemptions=0),
    ]  # fmt: skip
    for number, load in enumerate(loads, 1):
        trace = agent_run("planner", number=number)
        next(s for s in trace.spans if s.name == "chat").backend_load = load
        averages.add(trace)
    averages.add(agent_run("planner", number=3))  # no load: not in the load's averages
    averages.add(agent_run("writer", number=4))
    by_name = {p["program"]: p for p in averages.to_dict()["programs"]}
    assert by_name["planner"]["backend_load"] == {
        "traces": 2,
        "running_mean": 1.5,
        "waiting_max_mean": 2.0,
        "waiting_max": 4,
        "kv_cache_usage_max": 0.75,
        "prefix_cache_hit_rate": 0.5,
        "preemptions": 0.5,
    }
    assert by_name["writer"]["backend_load"] is None

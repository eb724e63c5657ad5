"""Findings: one hand-built agent trace per kind, with exact expected numbers, and the cases where
no finding must appear.

Times are written in milliseconds (``MS``); spans are named by short strings (see span_builders).
"""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from otel_agent_profiler.core import PriceTable, SpanLink, SpanRecord, profile_trace
from otel_agent_profiler.core.findings import (
    BOTTLENECK,
    BUDGET_EXCEEDED,
    DEFAULT_CONTEXT_WINDOWS,
    KINDS,
    LARGE_PROMPT,
    LLM_GAPS,
    LLM_TIMING,
    PARALLELIZABLE,
    PREFIX_CACHE,
    REPEATED_TOOL_CALL,
    SEQUENTIAL_LLM_CHAIN,
    SLOW_TOOL,
    TOKEN_PROFILE,
    WHAT_IF,
    Finding,
    FindingOptions,
    combined_projection,
    context_window,
    dependency,
    find_all,
    find_bottlenecks,
    find_budget_overruns,
    find_large_prompts,
    find_llm_gaps,
    find_llm_timing,
    find_parallelization,
    find_prefix_cache,
    find_repeated_tool_calls,
    find_sequential_llm_chains,
    find_slow_tools,
    find_token_profile,
    format_duration,
    select,
    what_if,
    what_ifs_together,
)
from tests.core.test_projection import span_trees
from tests.support.span_builders import TRACE_ID, profile, sid, span, with_events

MS = 1_000_000


def agent(name: str, parent: str | None, start: int, end: int, agent_name: str = "support", **extra) -> SpanRecord:
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent_name, **extra}
    return span(name, parent, start * MS, end * MS, attributes=attributes)


def llm(
    name: str,
    parent: str,
    start: int,
    end: int,
    model: str = "gpt-4o",
    tokens: tuple[int, int] | None = None,
    cached: int | None = None,
    **extra,
) -> SpanRecord:
    attributes: dict[str, object] = {"gen_ai.operation.name": "chat", "gen_ai.request.model": model, **extra}
    if tokens is not None:
        attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"] = tokens
    if cached is not None:
        attributes["gen_ai.usage.cache_read.input_tokens"] = cached
    return span(name, parent, start * MS, end * MS, attributes=attributes)


def tool(
    name: str,
    parent: str,
    start: int,
    end: int,
    tool_name: str,
    call_id: str | None = None,
    arguments: str | None = None,
    **extra,
) -> SpanRecord:
    attributes: dict[str, object] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool_name, **extra}
    if call_id is not None:
        attributes["gen_ai.tool.call.id"] = call_id
    if arguments is not None:
        attributes["gen_ai.tool.call.arguments"] = arguments
    return span(name, parent, start * MS, end * MS, attributes=attributes)


def linked(record: SpanRecord, *targets: str) -> SpanRecord:
    return dataclasses.replace(record, links=tuple(SpanLink(TRACE_ID, sid(target)) for target in targets))


def of_kind(findings: list[Finding], kind: str) -> list[Finding]:
    assert all(f.kind == kind for f in findings)
    return findings


# The example: an LLM call, the search_kb tool (360 ms), another LLM call; 1.25 s in all.
# Critical path: root 70 (20 before llm2, 50 at the end), llm1 300, search 360, llm2 520.
SUPPORT = [
    agent("root", None, 0, 1250),
    llm("llm1", "root", 0, 300, tokens=(3000, 120)),
    tool("search", "root", 300, 660, "search_kb", call_id="call_1", arguments='{"query": "refund policy"}'),
    llm("llm2", "root", 680, 1200, tokens=(4200, 300)),
]


# ------------------------------------------------------------------------------------------------
# Bottlenecks


def test_bottlenecks_top_spans_and_operations() -> None:
    findings = of_kind(find_bottlenecks(profile(SUPPORT)), BOTTLENECK)
    summary = [
        (
            f.evidence["scope"],
            f.span_ids,
            f.evidence["critical_path_ns"],
            f.saving_ns,
            f.evidence["saving_if_2x_faster_ns"],
        )
        for f in findings
    ]
    assert summary == [
        ("span", (sid("llm2"),), 520 * MS, 520 * MS, 260 * MS),
        ("span", (sid("search"),), 360 * MS, 360 * MS, 180 * MS),
        ("span", (sid("llm1"),), 300 * MS, 300 * MS, 150 * MS),
        # search_kb is one span, already reported; the agent's own time comes third.
        ("operation", (sid("llm1"), sid("llm2")), 820 * MS, 820 * MS, 410 * MS),
        ("operation", (sid("root"),), 70 * MS, 70 * MS, 35 * MS),
    ]
    assert findings[0].title == (
        "The gpt-4o call 'llm2' at 680 ms holds 520 ms of the critical path (42%): "
        "removing that time would end the trace 520 ms sooner, and halving it 260 ms sooner."
    )
    assert findings[3].title.startswith("The 2 gpt-4o calls hold 820 ms of the critical path (66%)")
    assert findings[0].evidence == {
        "scope": "span",
        "spans": 1,
        "critical_path_ns": 520 * MS,
        "critical_path_share": 0.416,
        "critical_path_waiting_ns": 0,
        "self_time_ns": 520 * MS,
        "duration_ns": 1250 * MS,
        "projected_duration_without_ns": 730 * MS,
        "projected_duration_2x_faster_ns": 990 * MS,
        "saving_if_2x_faster_ns": 260 * MS,
    }
    assert (findings[0].operation, findings[0].category) == ("gpt-4o", "llm")


def test_bottleneck_saving_is_projected_not_its_critical_path_time() -> None:
    # A [0, 600] hides B [0, 500]; C follows both. Without A, B decides when C starts: 100 ms saved.
    records = [
        agent("root", None, 0, 1000),
        tool("A", "root", 0, 600, "slow_api"),
        tool("B", "root", 0, 500, "other_api"),
        llm("C", "root", 600, 1000),
    ]
    by_span = {f.span_ids: f for f in find_bottlenecks(profile(records), FindingOptions(top_n=2))}
    a = by_span[(sid("A"),)]
    assert (a.evidence["critical_path_ns"], a.saving_ns, a.evidence["saving_if_2x_faster_ns"]) == (
        600 * MS,
        100 * MS,
        100 * MS,
    )


def test_time_a_parent_holds_while_a_child_runs_is_not_blamed_on_its_own_code() -> None:
    # The agent runs no code of its own (self time 0): it starts B 400 ms into A. The critical path
    # credits it those 400 ms, but A ran through them: a gap between children, not its code.
    records = [
        agent("ov", None, 0, 1000, agent_name="ov"),
        tool("a", "ov", 0, 500, "lookup"),
        tool("b", "ov", 400, 1000, "search"),
    ]
    trace = profile(records)
    (agent_span,) = [s for s in trace.spans if s.name == "ov"]
    assert (agent_span.self_time_ns, agent_span.critical_path_ns) == (0, 400 * MS)
    (finding,) = [f for f in find_bottlenecks(trace) if f.span_ids == (sid("ov"),)]
    assert finding.title == (
        "Agent ov at the start holds 400 ms of the critical path (40%) only as gaps between its children, "
        "not in its own code: a child was still running throughout while the next one had not started."
    )
    assert finding.saving_ns == 0 and finding.evidence["saving_if_2x_faster_ns"] == 0
    assert finding.evidence["critical_path_waiting_ns"] == 400 * MS
    assert finding.suggestion is not None and finding.suggestion.startswith("See why 'ov' starts a step")
    assert "ov" not in {f.operation for f in find_all(trace) if f.saving_ns > 0}


def test_own_code_and_gaps_between_children_are_told_apart() -> None:
    # 100 ms of the agent's own code, then A, and B started 300 ms into A.
    records = [
        agent("ov", None, 0, 1000, agent_name="ov"),
        tool("a", "ov", 100, 500, "lookup"),
        tool("b", "ov", 400, 1000, "search"),
    ]
    trace = profile(records)
    (finding,) = [f for f in find_bottlenecks(trace) if f.span_ids == (sid("ov"),)]
    assert finding.title.startswith(
        "Agent ov's own code at the start holds 100 ms of the critical path (10%), and 300 ms more as gaps "
        "between its children while one of them was still running: removing that time would end the trace "
        "100 ms sooner"
    )
    assert finding.saving_ns == 100 * MS


@pytest.mark.parametrize(
    ("model", "output_tokens", "suggestion"),
    [
        # Nothing in the price table is a smaller gpt-4o: no model is suggested.
        (
            "gpt-4o-mini",
            40,
            "Send gpt-4o-mini shorter prompts, or make fewer calls: its answers are already short "
            "(40 output tokens on average).",
        ),
        (
            "gpt-4o-2024-08-06",
            40,
            "Try gpt-4o-mini for this call: the answers are short (40 output tokens on average), and gpt-4o-mini "
            "costs less than gpt-4o.",
        ),
        (
            "gpt-4.1",
            900,
            "Ask for shorter answers, or try gpt-4.1-mini or gpt-4.1-nano for this call: both cost less than gpt-4.1.",
        ),
        (
            "claude-sonnet-4-5-20250929",
            900,
            "Ask for shorter answers, or try claude-haiku-4-5 for this call: claude-haiku-4-5 costs less than "
            "claude-sonnet-4-5.",
        ),
        # A model the price table does not know gets no model advice.
        ("my-llm", 900, "Ask my-llm for shorter answers (900 output tokens on average), or send shorter prompts."),
    ],
)
def test_llm_bottlenecks_suggest_a_smaller_model_only_where_the_price_table_has_one(
    model: str, output_tokens: int, suggestion: str
) -> None:
    records = [agent("root", None, 0, 1000), llm("call", "root", 0, 1000, model=model, tokens=(2000, output_tokens))]
    bottleneck = next(f for f in find_bottlenecks(profile(records)) if f.category == "llm")
    assert bottleneck.suggestion == suggestion


def test_a_saving_far_below_the_time_held_says_what_takes_over() -> None:
    # The embedding call holds 400 ms, but a 350 ms tool ran beside it: removing it saves 50 ms.
    records = [
        agent("root", None, 0, 1000),
        span(
            "embed",
            "root",
            0,
            400 * MS,
            attributes={"gen_ai.operation.name": "embeddings", "gen_ai.request.model": "text-embedding-3-small"},
        ),
        tool("lookup", "root", 0, 350, "lookup"),
        llm("answer", "root", 400, 1000),
    ]
    embed = next(f for f in find_bottlenecks(profile(records)) if f.category == "embedding")
    assert embed.saving_ns == 50 * MS
    assert embed.title == (
        "The text-embedding-3-small call 'embed' at the start holds 400 ms of the critical path (40%): removing "
        "that time would end the trace only 50.0 ms sooner, and halving it 50.0 ms sooner: work that ran beside "
        "it would take over the critical path."
    )


def test_no_bottleneck_without_critical_path_time() -> None:
    assert find_bottlenecks(profile([agent("root", None, 5, 5)])) == []
    assert find_bottlenecks(profile(SUPPORT), FindingOptions(top_n=0)) == []


# ------------------------------------------------------------------------------------------------
# Slow tools

SLOW = [
    agent("root", None, 0, 2000),
    llm("llm1", "root", 0, 100),
    tool("fetch", "root", 100, 1600, "web_fetch"),
    tool("warm", "root", 100, 700, "warm_cache"),  # 30% of the trace, but hidden by fetch
    llm("llm2", "root", 1600, 1950),
    tool("calc", "root", 1950, 1960, "calculator"),
]


def test_slow_tools_by_threshold_and_share() -> None:
    findings = of_kind(find_slow_tools(profile(SLOW)), SLOW_TOOL)
    assert [(f.operation, f.saving_ns, f.evidence["saving_if_2x_faster_ns"]) for f in findings] == [
        # Without web_fetch, warm_cache (ending at 700) holds llm2 up: 900 ms saved, not 1.5 s.
        ("web_fetch", 900 * MS, 750 * MS),
        ("warm_cache", 0, 0),
    ]
    fetch, warm = findings
    assert fetch.title == (
        "Tool web_fetch took 1.50 s itself (75% of the trace): removing that time would end the trace 900 ms sooner, "
        "and halving it 750 ms sooner."
    )
    assert fetch.evidence["trace_share"] == 0.75
    assert fetch.evidence["on_critical_path"] is True
    assert (warm.evidence["self_time_ns"], warm.evidence["trace_share"]) == (600 * MS, 0.3)
    assert warm.evidence["on_critical_path"] is False


def test_slow_tool_options() -> None:
    trace = profile(SLOW)
    only_fetch = find_slow_tools(trace, FindingOptions(slow_tool_ms=2000, slow_tool_share=0.5))
    assert [f.operation for f in only_fetch] == ["web_fetch"]
    assert find_slow_tools(trace, FindingOptions(slow_tool_ms=2000, slow_tool_share=0.9)) == []


def test_tool_time_spent_in_its_children_is_not_slow_tool_time() -> None:
    records = [
        agent("root", None, 0, 3000),
        tool("scrape", "root", 0, 3000, "scrape"),
        span("GET", "scrape", 10 * MS, 2990 * MS),
    ]
    assert find_slow_tools(profile(records)) == []


# ------------------------------------------------------------------------------------------------
# Large prompts

PROMPTS = [
    agent("root", None, 0, 1000),
    llm("big", "root", 0, 300, model="gpt-4o-2024-08-06", tokens=(100_000, 500)),
    llm("small", "root", 300, 500, model="gpt-4o-mini", tokens=(20_000, 100)),
    llm("custom", "root", 500, 700, model="my-llm", tokens=(30_000, 100)),
    llm("long", "root", 700, 1000, model="gpt-4.1", tokens=(600_000, 100)),
]


def test_large_prompts_by_share_of_context_window() -> None:
    findings = of_kind(find_large_prompts(profile(PROMPTS)), LARGE_PROMPT)
    assert [(f.span_ids, f.evidence["window_share"]) for f in findings] == [
        ((sid("big"),), 0.7812),
        ((sid("long"),), 0.5728),
    ]
    assert findings[0].title == (
        "The gpt-4o call at the start sends 100,000 input tokens, 78% of its 128,000-token context window."
    )  # the snapshot's finding names its family, as every report groups it
    assert findings[0].evidence["context_window"] == 128_000
    assert findings[0].saving_ns == 0


def test_large_prompts_with_extended_window_table_and_threshold() -> None:
    windows = {**DEFAULT_CONTEXT_WINDOWS, "my-llm": 32_000}
    findings = find_large_prompts(profile(PROMPTS), FindingOptions(context_windows=windows, large_prompt_share=0.8))
    assert [(f.operation, f.evidence["window_share"]) for f in findings] == [("my-llm", 0.9375)]


def test_context_window_lookup() -> None:
    assert context_window("gpt-4o", DEFAULT_CONTEXT_WINDOWS) == 128_000
    assert context_window("gpt-4o-mini-2024-07-18", DEFAULT_CONTEXT_WINDOWS) == 128_000
    assert context_window("o3-mini-2025-01-31", DEFAULT_CONTEXT_WINDOWS) == 200_000
    assert context_window("gpt-4.1-2025-04-14", DEFAULT_CONTEXT_WINDOWS) == 1_047_576
    assert context_window("unknown-model", DEFAULT_CONTEXT_WINDOWS) is None


# ------------------------------------------------------------------------------------------------
# Repeated identical tool calls

REFUND = '{"query": "refund policy"}'
REPEAT = [
    agent("root", None, 0, 1000),
    llm("llm1", "root", 0, 100),
    tool("s1", "root", 100, 300, "search_kb", arguments=REFUND),
    llm("llm2", "root", 300, 400),
    tool("s2", "root", 400, 600, "search_kb", arguments=REFUND),
    llm("llm3", "root", 600, 700),
    tool("s3", "root", 700, 800, "search_kb", arguments='{"query": "shipping"}'),
    llm("llm4", "root", 800, 1000),
]


def test_repeated_tool_call() -> None:
    (finding,) = of_kind(find_repeated_tool_calls(profile(REPEAT)), REPEATED_TOOL_CALL)
    assert finding.span_ids == (sid("s1"), sid("s2"))
    assert finding.saving_ns == 200 * MS
    assert finding.title == (
        "Tool search_kb was called 2 times with the same arguments: dropping the 1 repeat would end the trace "
        "200 ms sooner."
    )
    assert finding.suggestion == "Cache the results of tool search_kb so identical calls are made once."
    assert finding.evidence == {
        "arguments": REFUND,
        "calls": 2,
        "repeated_duration_ns": 200 * MS,
        "projected_duration_without_repeats_ns": 800 * MS,
    }


def test_repeated_openinference_tool_call_in_parallel_saves_nothing_but_is_reported() -> None:
    attributes = {"openinference.span.kind": "TOOL", "tool.name": "lookup", "input.value": '{"sku": "A-1"}'}
    records = [
        agent("root", None, 0, 500),
        span("a", "root", 0, 300 * MS, attributes=attributes),
        span("b", "root", 0, 300 * MS, attributes=attributes),
        llm("llm", "root", 300, 500),
    ]
    (finding,) = find_repeated_tool_calls(profile(records))
    assert (finding.operation, finding.saving_ns, finding.evidence["calls"]) == ("lookup", 0, 2)


def test_no_repeat_without_arguments_or_with_only_a_schema() -> None:
    schema = '{"type": "object", "properties": {"sku": {"type": "string"}}}'
    records = [
        agent("root", None, 0, 500),
        tool("a", "root", 0, 100, "lookup"),
        tool("b", "root", 100, 200, "lookup"),
        span(
            "c",
            "root",
            200 * MS,
            300 * MS,
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "x", "tool.parameters": schema},
        ),
        span(
            "d",
            "root",
            300 * MS,
            400 * MS,
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "x", "tool.parameters": schema},
        ),
        tool("e", "root", 400, 450, "search_kb", arguments='{"query": "a"}'),
        tool("f", "root", 450, 500, "search_kb", arguments='{"query": "b"}'),
    ]
    assert find_repeated_tool_calls(profile(records)) == []


# ------------------------------------------------------------------------------------------------
# Long chains of sequential LLM calls

CHAIN = [
    agent("root", None, 0, 1000),
    llm("l1", "root", 0, 100, tokens=(1000, 10)),
    tool("t1", "root", 100, 150, "lookup"),
    llm("l2", "root", 150, 300, tokens=(1100, 20)),
    llm("l3", "root", 300, 450, model="gpt-4o-mini", tokens=(1200, 30)),
    tool("t2", "root", 450, 500, "lookup"),
    llm("l4", "root", 500, 700, tokens=(1300, 40)),
    llm("l5", "root", 700, 900, tokens=(1400, 50)),
]


def test_sequential_llm_chain() -> None:
    (finding,) = of_kind(find_sequential_llm_chains(profile(CHAIN)), SEQUENTIAL_LLM_CHAIN)
    assert finding.span_ids == tuple(sid(f"l{i}") for i in range(1, 6))
    assert finding.saving_ns == 0
    assert finding.title == (
        "5 LLM calls under 'root' ran one after another, a round trip each: 800 ms in the calls, from the first "
        "one's start to the last one's end 900 ms (90% of the trace)."
    )
    assert finding.evidence == {
        "calls": 5,
        "parent_span_id": sid("root"),
        "models": ["gpt-4o", "gpt-4o-mini"],
        "llm_time_ns": 800 * MS,
        "chain_ns": 900 * MS,
        "between_calls_ns": 100 * MS,
        "trace_share": 0.9,
        "on_critical_path": 5,
        "tokens": {"input": 6000, "output": 150, "cached_input": 0, "reasoning": 0, "total": 6150},
        # Every call halved: the tools and the agent's 100 ms tail stay.
        "saving_if_2x_faster_ns": 400 * MS,
    }
    assert finding.operation is None


def test_no_chain_when_shorter_or_overlapping() -> None:
    assert find_sequential_llm_chains(profile(CHAIN), FindingOptions(min_llm_chain=6)) == []
    overlapping = [
        agent("root", None, 0, 1000),
        llm("l1", "root", 0, 100),
        llm("l2", "root", 100, 300),
        llm("l3", "root", 250, 400),  # overlaps l2: the run restarts
        llm("l4", "root", 400, 500),
    ]
    assert find_sequential_llm_chains(profile(overlapping)) == []


# ------------------------------------------------------------------------------------------------
# Parallelization opportunities

# The model asks for two tools in one answer; the agent runs them one after the other.
TRAVEL = [
    agent("root", None, 0, 1000, agent_name="travel"),
    llm("llm1", "root", 0, 200),
    tool("weather", "root", 200, 500, "get_weather", call_id="call_a"),
    tool("clock", "root", 500, 700, "get_time", call_id="call_b"),
    llm("llm2", "root", 700, 950),
]


def test_sequential_tools_without_evidence_are_only_a_hedged_note() -> None:
    # Nothing recorded says whether clock needs weather's result (code may pass it on directly,
    # as summarize(fetch_prices(...)) does): the finding says so and stays out of the combined saving.
    (finding,) = of_kind(find_parallelization(profile(TRAVEL)), PARALLELIZABLE)
    assert finding.span_ids == (sid("weather"), sid("clock"))
    # Started together: weather ends at 500, clock at 400; llm2 follows weather. 1 s -> 800 ms.
    assert finding.saving_ns == 200 * MS
    assert finding.rests_on == "assumed: no recorded data flow"
    assert finding.title == (
        "No recorded data flow between get_weather and get_time under 'root', which ran one after another: "
        "if get_time does not need get_weather's result, starting them together would end the trace 200 ms "
        "sooner (20% of it). Nothing recorded shows that, so this saving is left out of the combined one."
    )
    assert finding.suggestion == (
        "If they do not need each other's results, run get_weather and get_time together, "
        "with asyncio.gather or a thread pool."
    )
    assert finding.evidence == {
        "parent_span_id": sid("root"),
        "members": [
            {
                "span_id": sid("weather"),
                "name": "weather",
                "category": "tool",
                "operation": "get_weather",
                "start_offset_ns": 200 * MS,
                "duration_ns": 300 * MS,
            },
            {
                "span_id": sid("clock"),
                "name": "clock",
                "category": "tool",
                "operation": "get_time",
                "start_offset_ns": 500 * MS,
                "duration_ns": 200 * MS,
            },
        ],
        "sequential_ns": 500 * MS,
        "longest_member_ns": 300 * MS,
        "duration_ns": 1000 * MS,
        "projected_duration_ns": 800 * MS,
        "independence": ["no link and no recorded data flow between two actions"],
    }
    assert (finding.category, finding.operation) == ("tool", None)
    assert finding.to_dict()["rests_on"] == "assumed: no recorded data flow"
    assert combined_projection(profile(TRAVEL), [finding]).changes == 0


def test_tools_one_llm_response_requested_are_parallelizable() -> None:
    output = '[{"role": "assistant", "tool_calls": [{"id": "call_a"}, {"id": "call_b"}]}]'
    records = [*TRAVEL]
    records[1] = llm("llm1", "root", 0, 200, **{"gen_ai.output.messages": output})
    trace = profile(records)
    (finding,) = find_parallelization(trace)
    assert finding.span_ids == (sid("weather"), sid("clock"))
    assert finding.saving_ns == 200 * MS
    assert finding.rests_on == "tool calls requested in one LLM response"
    assert finding.title == (
        "2 tool calls under 'root' ran one after another, and one LLM response requested them together: "
        "started together they would end the trace 200 ms sooner (20% of it)."
    )
    assert finding.suggestion == "Run get_weather and get_time together, with asyncio.gather or a thread pool."
    assert finding.evidence["independence"] == ["both tool call ids in one LLM response"]
    combined = combined_projection(trace, [finding])
    assert (combined.changes, combined.saving_ns) == (1, 200 * MS)


@pytest.mark.parametrize(("first", "second"), [("call_a", "call_b"), ("fc:1|x", "fc:2|x")])
def test_tool_call_ids_of_any_spelling_are_found_in_the_response(first: str, second: str) -> None:
    output = f'[{{"role": "assistant", "tool_calls": [{{"id": "{first}"}}, {{"id": "{second}"}}]}}]'
    records = [
        agent("root", None, 0, 1000, agent_name="travel"),
        llm("llm1", "root", 0, 200, **{"gen_ai.output.messages": output}),
        tool("weather", "root", 200, 500, "get_weather", call_id=first),
        tool("clock", "root", 500, 700, "get_time", call_id=second),
        llm("llm2", "root", 700, 950),
    ]
    (finding,) = find_parallelization(profile(records))
    assert finding.rests_on == "tool calls requested in one LLM response"
    # A longer id that merely starts like one listed is not that id.
    records[3] = tool("clock", "root", 500, 700, "get_time", call_id=second + "9")
    (finding,) = find_parallelization(profile(records))
    assert finding.rests_on == "assumed: no recorded data flow"


def test_tools_two_llm_responses_requested_are_not_shown_independent() -> None:
    # Each id is in a different response: the second call may have been asked for with the first's result.
    records = [
        agent("root", None, 0, 1000, agent_name="travel"),
        llm("llm1", "root", 0, 100, **{"gen_ai.output.messages": '[{"tool_calls": [{"id": "call_a"}]}]'}),
        tool("weather", "root", 200, 500, "get_weather", call_id="call_a"),
        tool("clock", "root", 500, 700, "get_time", call_id="call_b"),
        llm("llm2", "root", 700, 950),
        agent("other", "root", 950, 1000, agent_name="helper"),
        llm("llm3", "other", 950, 1000, **{"gen_ai.output.messages": '[{"tool_calls": [{"id": "call_b"}]}]'}),
    ]
    (finding,) = find_parallelization(profile(records))
    assert finding.rests_on == "assumed: no recorded data flow"


def test_recorded_inputs_and_outputs_sharing_nothing_show_independence() -> None:
    records = [*TRAVEL]
    records[2] = tool(
        "weather", "root", 200, 500, "get_weather", call_id="call_a", **{"gen_ai.tool.call.result": "Sunny, 24 C"}
    )
    records[3] = tool("clock", "root", 500, 700, "get_time", call_id="call_b", arguments='{"zone": "Europe/Paris"}')
    (finding,) = find_parallelization(profile(records))
    assert finding.rests_on == "recorded inputs and outputs show no data flow"
    assert "what they recorded as inputs and outputs shows no data flow between them" in finding.title


def test_calls_the_application_declares_independent_are_parallelizable() -> None:
    declared = {"agent_profiler.independent_group": "lookups"}
    records = [*TRAVEL]
    records[2] = tool("weather", "root", 200, 500, "get_weather", call_id="call_a", **declared)
    records[3] = tool("clock", "root", 500, 700, "get_time", call_id="call_b", **declared)
    (finding,) = find_parallelization(profile(records))
    assert finding.rests_on == "declared independent"
    assert "the application declares them independent" in finding.title
    # Another group's name declares nothing about these two.
    records[3] = tool("clock", "root", 500, 700, "get_time", **{"agent_profiler.independent_group": "other"})
    (finding,) = find_parallelization(profile(records))
    assert finding.rests_on == "assumed: no recorded data flow"


# An LLM call, the tool it asked for, the next LLM call (no messages recorded: assumed to use it).
def _asked(tool_call_in_output: str) -> list[SpanRecord]:
    call = f'{{"id": "{tool_call_in_output}", "name": "get_weather"}}'
    output = f'[{{"role": "assistant", "tool_calls": [{call}]}}]'
    return [
        agent("root", None, 0, 800),
        llm("llm1", "root", 0, 200, **{"gen_ai.output.messages": output}),
        tool("weather", "root", 200, 500, "get_weather", call_id="call_a"),
        llm("llm2", "root", 500, 750),
    ]


def test_tool_call_id_in_output_messages_is_a_dependency() -> None:
    assert find_parallelization(profile(_asked("call_a"))) == []
    trace = profile(_asked("call_a"))
    spans = {node.name: node for node in trace.spans}
    assert dependency(spans["llm1"], spans["weather"]) == (True, "an LLM call and the next step of the same agent")


def test_an_llm_call_is_never_started_together_with_the_step_after_it() -> None:
    # The tool's id is not in the call's recorded answer, and their messages share no text: still
    # the step after an LLM call acts on its answer (and the next LLM call reads the step's result).
    (trace) = profile(_asked("call_zzz"))
    assert find_parallelization(trace) == []
    spans = {node.name: node for node in trace.spans}
    assert dependency(spans["llm1"], spans["weather"]) == (True, "an LLM call and the next step of the same agent")


def test_successive_llm_calls_with_unrelated_messages_are_not_parallelizable() -> None:
    records = [
        agent("root", None, 0, 900),
        llm("l1", "root", 0, 300, **{"gen_ai.output.messages": "the shipping policy looks fine"}),
        llm("l2", "root", 300, 600, **{"gen_ai.input.messages": "summarize the order history please"}),
        llm("l3", "root", 600, 900, **{"gen_ai.input.messages": "check the refund status of it"}),
    ]
    assert find_parallelization(profile(records)) == []


def test_an_embedding_is_never_started_together_with_the_search_that_uses_it() -> None:
    records = [
        tool("search", None, 0, 400, "search_kb"),
        span("embed", "search", 0, 100 * MS, attributes={"gen_ai.operation.name": "embeddings"}),
        span("lookup", "search", 100 * MS, 400 * MS, attributes={"gen_ai.operation.name": "retrieval"}),
    ]
    trace = profile(records)
    assert [s.category for s in trace.spans] == ["tool", "embedding", "retrieval"]
    assert find_parallelization(trace) == []


def test_steps_that_already_overlap_are_not_parallelizable() -> None:
    records = [
        agent("root", None, 0, 1000, agent_name="travel"),
        llm("llm1", "root", 0, 200),
        tool("weather", "root", 200, 500, "get_weather"),
        tool("clock", "root", 250, 520, "get_time"),
        tool("rates", "root", 260, 510, "get_rates"),
        llm("llm2", "root", 520, 1000),
    ]
    assert find_parallelization(profile(records)) == []


def test_link_is_a_dependency() -> None:
    records = [*TRAVEL]
    records[3] = linked(records[3], "weather")
    assert find_parallelization(profile(records)) == []
    records = [*TRAVEL]
    records[2] = linked(records[2], "clock")  # a link in either direction counts
    assert find_parallelization(profile(records)) == []


def test_tool_result_in_next_arguments_is_a_dependency() -> None:
    result = "Forecast for Paris is 18 degrees with light rain"
    records = [*TRAVEL]
    records[2] = tool(
        "weather", "root", 200, 500, "get_weather", call_id="call_a", **{"gen_ai.tool.call.result": result}
    )
    records[3] = tool("clock", "root", 500, 700, "get_time", call_id="call_b", arguments=f'{{"note": "{result}"}}')
    assert find_parallelization(profile(records)) == []


def test_tool_result_fed_to_the_next_llm_call_by_id_is_a_dependency() -> None:
    messages = '[{"role": "tool", "tool_call_id": "call_b", "content": "12:00"}]'
    records = [*TRAVEL]
    records[4] = llm("llm2", "root", 700, 950, **{"gen_ai.input.messages": messages})
    trace = profile(records)
    spans = {node.name: node for node in trace.spans}
    assert dependency(spans["clock"], spans["llm2"]) == (True, "an LLM call and the next step of the same agent")
    # weather and clock are still a (hedged) group of their own.
    assert [f.span_ids for f in find_parallelization(trace)] == [(sid("weather"), sid("clock"))]


def test_no_parallelization_finding_off_the_critical_path() -> None:
    records = [
        agent("root", None, 0, 1000),
        tool("a", "root", 0, 300, "lookup_a"),
        llm("think", "root", 0, 1000),
        tool("b", "root", 300, 600, "lookup_b"),
    ]
    assert find_parallelization(profile(records)) == []


def test_sub_agents_without_recorded_data_are_assumed_dependent() -> None:
    records = [
        agent("root", None, 0, 1000, agent_name="workflow"),
        agent("research", "root", 0, 500, agent_name="researcher"),
        agent("write", "root", 500, 1000, agent_name="writer"),
    ]
    assert find_parallelization(profile(records)) == []


def test_internal_sibling_between_ends_a_group() -> None:
    records = [*TRAVEL[:3], span("parse", "root", 500 * MS, 510 * MS), *TRAVEL[3:]]
    records[4] = tool("clock", "root", 510, 700, "get_time", call_id="call_b")
    assert find_parallelization(profile(records)) == []


# ------------------------------------------------------------------------------------------------
# What-if


def test_what_if_tool_2x_faster() -> None:
    finding = what_if(profile(SUPPORT), "tool:search_kb", 2.0)
    assert finding.kind == WHAT_IF
    assert finding.title == "With tool search_kb 2x faster, the trace would end 180 ms sooner (14% of its 1.25 s)."
    assert finding.saving_ns == 180 * MS
    assert (finding.span_ids, finding.operation, finding.category) == ((sid("search"),), "search_kb", "tool")
    assert finding.evidence == {
        "selector": "tool:search_kb",
        "speedup": 2.0,
        "matched_spans": 1,
        "selected_duration_ns": 360 * MS,
        "selected_critical_path_ns": 360 * MS,
        "duration_ns": 1250 * MS,
        "projected_duration_ns": 1070 * MS,
    }


@pytest.mark.parametrize(
    ("selector", "speedup", "title", "saving_ms"),
    [
        ("llm", 2.0, "With all llm spans 2x faster, the trace would end 410 ms sooner (33% of its 1.25 s).", 410),
        ("llm:gpt-4o", 4.0, "With llm gpt-4o 4x faster, the trace would end 615 ms sooner (49% of its 1.25 s).", 615),
        ("search_kb", 1.5, "With search_kb 1.5x faster, the trace would end 120 ms sooner (10% of its 1.25 s).", 120),
        (
            "span:" + sid("llm1"),
            2.0,
            f"With span {sid('llm1')} 2x faster, the trace would end 150 ms sooner (12% of its 1.25 s).",
            150,
        ),
        (
            "tool:search_kb",
            math.inf,
            "With tool search_kb instant, the trace would end 360 ms sooner (29% of its 1.25 s).",
            360,
        ),
        ("tool:missing", 2.0, "No span matches tool missing.", 0),
    ],
)
def test_what_if_selectors(selector: str, speedup: float, title: str, saving_ms: int) -> None:
    finding = what_if(profile(SUPPORT), selector, speedup)
    assert (finding.title, finding.saving_ns) == (title, saving_ms * MS)


def test_what_if_model_matches_its_snapshots_and_speeds_up_what_a_span_calls() -> None:
    records = [
        agent("root", None, 0, 1000),
        llm("llm", "root", 0, 200, model="gpt-4o-2024-08-06"),
        tool("fetch", "root", 200, 1000, "fetch"),
        span("GET", "fetch", 300 * MS, 900 * MS),
    ]
    trace = profile(records)
    assert what_if(trace, "llm:gpt-4o", 2.0).saving_ns == 100 * MS
    # The tool's own 200 ms and its HTTP call's 600 ms are both halved.
    assert what_if(trace, "tool:fetch", 2.0).saving_ns == 400 * MS


def test_what_if_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="unknown category"):
        what_if(profile(SUPPORT), "bogus:x", 2.0)
    with pytest.raises(ValueError, match="speedup"):
        what_if(profile(SUPPORT), "llm", 0.0)


# ------------------------------------------------------------------------------------------------
# LLM timing, gaps between LLM calls, prefix cache


def test_llm_timing_split_of_streaming_calls() -> None:
    records = [
        agent("root", None, 0, 1000),
        with_events(
            llm("l1", "root", 0, 400, tokens=(500, 100)),
            ("gen_ai.content.completion.chunk", 200 * MS),
            ("gen_ai.content.completion.chunk", 150 * MS),
        ),
        llm("l2", "root", 500, 800, tokens=(500, 50), **{"gen_ai.response.time_to_first_chunk": 0.05}),
        llm("l3", "root", 850, 900, **{"gen_ai.request.stream": True}),  # streaming, no first-token time
        llm("l4", "root", 900, 950),  # not streaming
    ]
    (finding,) = of_kind(find_llm_timing(profile(records)), LLM_TIMING)
    assert (
        finding.title == "2 streaming LLM calls waited 200 ms for the first token and spent 500 ms decoding "
        "(29% of the time waiting)."
    )
    assert finding.span_ids == (sid("l1"), sid("l2"))
    assert finding.evidence == {
        "calls": [
            {
                "span_id": sid("l1"),
                "model": "gpt-4o",
                "time_to_first_token_ns": 150 * MS,
                "decode_ns": 250 * MS,
                "output_tokens": 100,
                "decode_tokens_per_s": 400.0,
                "on_critical_path": True,
            },
            {
                "span_id": sid("l2"),
                "model": "gpt-4o",
                "time_to_first_token_ns": 50 * MS,
                "decode_ns": 250 * MS,
                "output_tokens": 50,
                "decode_tokens_per_s": 200.0,
                "on_critical_path": True,
            },
        ],
        "time_to_first_token_ns": 200 * MS,
        "decode_ns": 500 * MS,
        "first_token_share": 0.2857,
        "streaming_without_first_token": 1,
    }


def test_no_llm_timing_without_streaming_calls() -> None:
    assert find_llm_timing(profile(SUPPORT)) == []


def test_gaps_between_consecutive_llm_calls() -> None:
    records = [
        agent("root", None, 0, 700),
        llm("l1", "root", 0, 100),
        tool("t", "root", 120, 300, "lookup"),
        llm("l2", "root", 350, 500),
        llm("l3", "root", 520, 600),
    ]
    (finding,) = of_kind(find_llm_gaps(profile(records)), LLM_GAPS)
    assert finding.title == (
        "270 ms passed between consecutive LLM calls (2 gaps): 180 ms in tools and other steps, "
        "90.0 ms in the agents' own code."
    )
    assert finding.span_ids == (sid("l1"), sid("l2"), sid("l3"))
    assert finding.evidence == {
        "gaps": [
            {
                "parent_span_id": sid("root"),
                "after_span_id": sid("l1"),
                "before_span_id": sid("l2"),
                "gap_ns": 250 * MS,
                "other_steps_ns": 180 * MS,
                "own_ns": 70 * MS,
            },
            {
                "parent_span_id": sid("root"),
                "after_span_id": sid("l2"),
                "before_span_id": sid("l3"),
                "gap_ns": 20 * MS,
                "other_steps_ns": 0,
                "own_ns": 20 * MS,
            },
        ],
        "gap_ns": 270 * MS,
        "other_steps_ns": 180 * MS,
        "own_ns": 90 * MS,
        "trace_share": round(270 / 700, 4),
    }


def test_no_gaps_for_a_single_or_overlapping_llm_calls() -> None:
    assert find_llm_gaps(profile([agent("root", None, 0, 100), llm("l1", "root", 0, 100)])) == []
    overlapping = [agent("root", None, 0, 100), llm("l1", "root", 0, 60), llm("l2", "root", 50, 100)]
    assert find_llm_gaps(profile(overlapping)) == []


def test_prefix_cache_hit_rate() -> None:
    records = [
        agent("root", None, 0, 300),
        llm("l1", "root", 0, 100, tokens=(10_000, 100), cached=8_000),
        llm("l2", "root", 100, 200, tokens=(5_000, 100)),
        llm("l3", "root", 200, 300, model="gpt-4o-mini", tokens=(2_000, 100), cached=1_000),
    ]
    (finding,) = of_kind(find_prefix_cache(profile(records)), PREFIX_CACHE)
    assert finding.title == "The provider's prefix cache served 53% of the input tokens (9,000 of 17,000)."
    assert finding.evidence == {
        "input": 17_000,
        "cached_input": 9_000,
        "uncached_input": 8_000,
        "hit_rate": 0.5294,
        "calls": 3,
        "calls_below_caching_minimum": 0,
        "calls_without_cache_counts": 0,
        "by_model": {
            "gpt-4o": {"input": 15_000, "cached_input": 8_000, "hit_rate": 0.5333},
            "gpt-4o-mini": {"input": 2_000, "cached_input": 1_000, "hit_rate": 0.5},
        },
    }


def test_no_prefix_cache_finding_without_input_tokens() -> None:
    assert find_prefix_cache(profile(TRAVEL)) == []


def test_no_prefix_cache_finding_when_the_instrumentation_records_no_cached_tokens() -> None:
    # The server may well have served thousands of cached tokens: the spans do not say, so 0% would be a guess.
    records = [
        agent("root", None, 0, 600),
        llm("l1", "root", 0, 300, tokens=(5_000, 100)),
        llm("l2", "root", 300, 600, tokens=(5_200, 100)),
    ]
    assert find_prefix_cache(profile(records)) == []


def test_prefix_cache_counts_the_providers_whose_calls_record_cached_tokens() -> None:
    # OpenAI's calls record cached tokens (one records 0 by leaving it out); Anthropic's never do.
    records = [
        agent("root", None, 0, 900),
        llm("l1", "root", 0, 300, tokens=(4_000, 100), cached=2_000),
        llm("l2", "root", 300, 600, tokens=(4_000, 100)),
        llm("l3", "root", 600, 900, model="claude-sonnet-4-5", tokens=(9_000, 100)),
    ]
    (finding,) = of_kind(find_prefix_cache(profile(records)), PREFIX_CACHE)
    assert finding.span_ids == (sid("l1"), sid("l2"))
    assert finding.title == "The provider's prefix cache served 25% of the input tokens (2,000 of 8,000)."
    assert finding.evidence["calls_without_cache_counts"] == 1


@pytest.mark.parametrize(
    ("model", "prompt_tokens", "counted"),
    [
        ("gpt-4o", 1_023, False),
        ("gpt-4o-mini-2024-07-18", 1_024, True),
        ("claude-sonnet-4-5", 1_500, True),
        ("claude-3-5-haiku-20241022", 1_500, False),
        ("claude-3-5-haiku-20241022", 2_048, True),
        ("claude-haiku-4-5", 3_000, False),
        # A self-hosted model has no known minimum: the cache counts it records are taken as they are.
        ("meta-llama/Llama-3.1-8B-Instruct", 100, True),
    ],
)
def test_prefix_cache_leaves_out_prompts_below_the_providers_caching_minimum(
    model: str, prompt_tokens: int, counted: bool
) -> None:
    records = [
        agent("root", None, 0, 600),
        llm("l1", "root", 0, 300, model=model, tokens=(prompt_tokens, 100), cached=0),
        llm("l2", "root", 300, 600, model=model, tokens=(prompt_tokens, 100), cached=0),
    ]
    findings = find_prefix_cache(profile(records))
    assert bool(findings) is counted
    if not counted:
        return
    (finding,) = findings
    assert finding.evidence["calls"] == 2 and finding.evidence["calls_below_caching_minimum"] == 0


def test_prefix_cache_says_when_short_prompts_were_left_out() -> None:
    records = [
        agent("root", None, 0, 900),
        llm("l1", "root", 0, 300, tokens=(4_000, 100), cached=0),
        llm("l2", "root", 300, 600, tokens=(4_200, 100), cached=1_000),
        llm("l3", "root", 600, 900, tokens=(800, 100), cached=0),
    ]
    (finding,) = of_kind(find_prefix_cache(profile(records)), PREFIX_CACHE)
    assert finding.title == (
        "The provider's prefix cache served 12% of the input tokens of the 2 calls with prompts long enough "
        "to cache (1,000 of 8,200)."
    )
    assert finding.span_ids == (sid("l1"), sid("l2"))
    assert finding.evidence["calls_below_caching_minimum"] == 1


def test_no_gaps_finding_for_calls_back_to_back() -> None:
    records = [agent("root", None, 0, 400), llm("l1", "root", 0, 200), llm("l2", "root", 200, 400)]
    assert find_llm_gaps(profile(records), FindingOptions(min_saving=0)) == []


# ------------------------------------------------------------------------------------------------
# Token and cost profile, budgets

PRICES = PriceTable.from_mapping({"gpt-4o": {"input": 2.5, "output": 10.0, "cached_input": 1.25}})
# llm2 runs in parallel with llm1 and is off the critical path; gpt-4o-mini has no price.
TOKENS = [
    agent("root", None, 0, 1000),
    llm("llm1", "root", 0, 400, tokens=(1000, 100)),
    llm("llm2", "root", 0, 200, model="gpt-4o-mini", tokens=(2000, 50)),
    llm("llm3", "root", 400, 900, tokens=(3000, 200), cached=800),
]


def test_token_and_cost_profile() -> None:
    trace = profile_trace(TOKENS, prices=PRICES)
    (finding,) = of_kind(find_token_profile(trace), TOKEN_PROFILE)
    # llm1: 1000 * 2.5 + 100 * 10 = 3500 µ$; llm3: 2200 * 2.5 + 800 * 1.25 + 200 * 10 = 8500 µ$.
    assert finding.title == "6,350 tokens ($0.0120) in 3 LLM calls, 68% of them on the critical path."
    evidence = finding.evidence
    assert evidence["cost_usd"] == pytest.approx(0.012)
    assert evidence["tokens"] == {"input": 6000, "output": 350, "cached_input": 800, "reasoning": 0, "total": 6350}
    assert evidence["critical_path_tokens"] == {
        "input": 4000,
        "output": 300,
        "cached_input": 800,
        "reasoning": 0,
        "total": 4300,
    }
    assert evidence["critical_path_token_share"] == 0.6772
    assert evidence["critical_path_cost_usd"] == pytest.approx(0.012)
    operations = evidence["by_operation"]
    assert [(op["operation"], op["calls"], op["total"], op["cost_usd"]) for op in operations] == [
        ("gpt-4o", 2, 4300, pytest.approx(0.012)),
        ("gpt-4o-mini", 1, 2050, None),
    ]
    assert evidence["by_model"]["gpt-4o-mini"]["cost_usd"] is None
    assert evidence["by_model"]["gpt-4o"]["cost_usd"] == pytest.approx(0.012)
    assert evidence["by_category"] == {
        "llm": {
            "input": 6000,
            "output": 350,
            "cached_input": 800,
            "reasoning": 0,
            "total": 6350,
            "cost_usd": pytest.approx(0.012),
        }
    }


def test_token_profile_without_prices_and_without_tokens() -> None:
    (finding,) = find_token_profile(profile(TOKENS))
    assert finding.title == "6,350 tokens in 3 LLM calls, 68% of them on the critical path."
    assert finding.evidence["cost_usd"] is None
    assert find_token_profile(profile(TRAVEL)) == []


def test_budgets_exceeded() -> None:
    trace = profile_trace(TOKENS, prices=PRICES)
    options = FindingOptions(budget_tokens=5000, budget_cost_usd=0.01, budget_latency_ms=800)
    findings = of_kind(find_budget_overruns(trace, options), BUDGET_EXCEEDED)
    assert [f.title for f in findings] == [
        "The trace exceeds its tokens budget: 6,350 tokens, 1,350 over the budget of 5,000.",
        "The trace exceeds its cost budget: $0.0120, $0.0020 over the budget of $0.0100.",
        "The trace exceeds its duration budget: 1.00 s end to end, 200 ms over the budget of 800 ms.",
    ]
    assert findings[0].evidence == {"budget": "tokens", "limit": 5000, "actual": 6350, "over": 1350}
    assert findings[2].evidence == {"budget": "latency_ns", "limit": 800 * MS, "actual": 1000 * MS, "over": 200 * MS}
    assert all(f.saving_ns == 0 for f in findings)


def test_budgets_not_exceeded_or_not_checkable() -> None:
    within = FindingOptions(budget_tokens=6350, budget_cost_usd=0.05, budget_latency_ms=1000)
    assert find_budget_overruns(profile_trace(TOKENS, prices=PRICES), within) == []
    # Without prices the cost is unknown: no finding either way.
    assert find_budget_overruns(profile(TOKENS), FindingOptions(budget_cost_usd=0.0)) == []
    assert find_budget_overruns(profile(TOKENS)) == []


def test_category_budgets() -> None:
    trace = profile_trace(TOKENS, prices=PRICES)
    tight = FindingOptions(category_budgets={"llm": {"tokens": 1000, "cost_usd": 0.001, "critical_path_ms": 1}})
    findings = find_budget_overruns(trace, tight)
    assert [f.evidence["budget"] for f in findings] == ["tokens", "cost_usd", "critical_path_ns"]
    assert all(f.category == "llm" and f.evidence["category"] == "llm" and f.suggestion for f in findings)
    assert findings[0].title.startswith("LLM calls exceed their tokens budget: 6,350 tokens, 5,350 over")
    assert findings[2].title.startswith("LLM calls exceed their duration budget: ")
    assert " on the critical path, " in findings[2].title
    # A category with no such spans keeps any budget; an unknown measure is a programmer error.
    assert find_budget_overruns(trace, FindingOptions(category_budgets={"memory": {"critical_path_ms": 0}})) == []
    with pytest.raises(ValueError, match="unknown budget measure 'speed'"):
        find_budget_overruns(trace, FindingOptions(category_budgets={"llm": {"speed": 1}}))


def test_what_ifs_together_the_last_selector_wins() -> None:
    trace = profile(SUPPORT)
    both = what_ifs_together(trace, [("tool:search_kb", 2.0), ("llm", 1.0)])
    assert both.projected_duration_ns == trace.duration_ns - what_if(trace, "tool:search_kb", 2.0).saving_ns
    # A later, wider selector overrides the earlier one for the spans it picks.
    overridden = what_ifs_together(trace, [("tool:search_kb", 2.0), ("tool", 1.0)])
    assert overridden.saving_ns == 0
    assert [c["matched_spans"] for c in overridden.changes] == [1, len(select(trace, "tool"))]
    assert {step["span_id"] for step in overridden.critical_path} <= {
        s.span_id for s in trace.spans if s.on_critical_path
    }


# ------------------------------------------------------------------------------------------------
# All together


def test_find_all_sorted_by_saving_and_json_ready() -> None:
    options = FindingOptions(what_ifs=[("tool:search_kb", 2.0)], budget_latency_ms=1000)
    findings = find_all(profile(SUPPORT), options)
    # Budget overruns lead, then the largest saving first.
    assert findings[0].kind == BUDGET_EXCEEDED
    savings = [f.saving_ns for f in findings[1:]]
    assert savings == sorted(savings, reverse=True)
    # The gpt-4o operation (both calls) folds in the span-level findings about each call.
    assert findings[1].title.startswith("The 2 gpt-4o calls hold 820 ms")
    assert [d["span_ids"] for d in findings[1].details] == [[sid("llm2")], [sid("llm1")]]
    kinds = {f.kind for f in findings}
    # No token profile (it suggests nothing); the gaps are tools' time, nothing to change either.
    assert {BOTTLENECK, WHAT_IF, BUDGET_EXCEEDED} <= kinds <= set(KINDS)
    assert not kinds & {TOKEN_PROFILE, LLM_GAPS}
    zero = [f for f in findings if f.saving_ns == 0]
    assert all(f.suggestion for f in zero)
    decoded = json.loads(json.dumps([f.to_dict() for f in findings]))
    assert decoded[1]["span_ids"] == [sid("llm1"), sid("llm2")]
    assert [w["name"] for w in decoded[1]["where"]] == ["llm1", "llm2"]
    assert decoded[1]["suggestion"].startswith("Try gpt-4o-mini for these calls")


def test_format_duration() -> None:
    assert [format_duration(ns) for ns in (850, 12_500, 180 * MS, 1250 * MS, 3_600_000 * MS)] == [
        "850 ns",
        "12.5 µs",
        "180 ms",
        "1.25 s",
        "1 h 0 min",
    ]


def test_find_all_on_a_10000_deep_chain() -> None:
    records = [tool(str(i), str(i - 1), 2 * i, 40_000 - 2 * i, "nested") for i in range(1, 10_000)]
    records.insert(0, agent("0", None, 0, 40_000))
    findings = find_all(profile(records), FindingOptions(what_ifs=[("tool", 2.0)]))
    (halved,) = [f for f in findings if f.kind == WHAT_IF]
    assert halved.saving_ns == 20_000 * MS - 2 * MS  # every tool's own time halved; the root's stays


ATTRIBUTE_SETS: list[dict[str, object]] = [
    {},
    {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.usage.input_tokens": 90_000,
        "gen_ai.usage.output_tokens": 5,
        "gen_ai.usage.cache_read.input_tokens": 3,
        "gen_ai.is_streaming": True,
    },
    {"gen_ai.operation.name": "chat", "gen_ai.request.model": "o3-mini", "gen_ai.response.time_to_first_chunk": 0.0},
    {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search", "gen_ai.tool.call.arguments": "{}"},
    {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "fetch", "gen_ai.tool.call.id": "call_1"},
    {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper"},
    {"openinference.span.kind": "RETRIEVER", "output.value": "a document about refunds 42"},
]


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(span_trees(messy=True), st.data())
def test_find_all_on_random_traces(records, data) -> None:
    records = [dataclasses.replace(record, attributes=data.draw(st.sampled_from(ATTRIBUTE_SETS))) for record in records]
    trace = profile_trace(records, prices=PRICES)
    options = FindingOptions(what_ifs=[("tool", 2.0), ("llm:gpt-4o", 3.0)], budget_tokens=0, budget_latency_ms=0)
    findings = find_all(trace, options)
    assert all(f.saving_ns >= 0 for f in findings)
    assert all(f.saving_ns <= trace.duration_ns for f in findings)
    over_budget = [f.kind == BUDGET_EXCEEDED for f in findings]
    assert over_budget == sorted(over_budget, reverse=True)  # budget overruns first
    json.dumps([f.to_dict() for f in findings])
    findings = [f for f in findings if f.kind != BUDGET_EXCEEDED]
    assert [f.saving_ns for f in findings] == sorted((f.saving_ns for f in findings), reverse=True)


def test_a_parallel_group_of_one_tool_is_named_by_its_count() -> None:
    from otel_agent_profiler.core.findings.parallelization import _named

    trace = profile(
        [
            span("root", None, 0, 1000, attributes={"gen_ai.operation.name": "invoke_agent"}),
            *[
                span(
                    f"f{i}",
                    "root",
                    100 * i,
                    100 * i + 90,
                    attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "fetch_url"},
                )
                for i in range(3)
            ],
        ]
    )
    fetches = [s for s in trace.spans if s.name.startswith("f")]
    assert _named(fetches) == "the 3 fetch_url calls"

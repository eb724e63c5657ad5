"""Per-trace totals: category and operation times, LLM call counts, token totals.

All expected numbers are worked out by hand in integer nanoseconds.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from otel_agent_profiler.core import CATEGORIES, CategoryStats, TokenUsage
from tests.core.test_projection import span_trees
from tests.support.span_builders import by_name, profile, span, with_events

# --- span helpers -----------------------------------------------------------------------------


def agent(name: str, parent: str | None, start: int, end: int, **attributes: object) -> object:
    return span(name, parent, start, end, attributes={"gen_ai.operation.name": "invoke_agent", **attributes})


def chat(
    name: str, parent: str | None, start: int, end: int, model: str | None, attributes: dict[str, object] | None = None
) -> object:
    """A GenAI-convention LLM span (as the OpenAI instrumentation records it)."""
    base: dict[str, object] = {"gen_ai.operation.name": "chat"}
    if model is not None:
        base["gen_ai.request.model"] = model
    return span(name, parent, start, end, attributes={**base, **(attributes or {})})


def oi_llm(
    name: str, parent: str | None, start: int, end: int, model: str | None, attributes: dict[str, object] | None = None
) -> object:
    """An OpenInference LLM span (as a framework instrumentation records it around the call)."""
    base: dict[str, object] = {"openinference.span.kind": "LLM"}
    if model is not None:
        base["llm.model_name"] = model
    return span(name, parent, start, end, attributes={**base, **(attributes or {})})


def usage(input_tokens: int, output_tokens: int) -> dict[str, object]:
    return {"gen_ai.usage.input_tokens": input_tokens, "gen_ai.usage.output_tokens": output_tokens}


def oi_usage(input_tokens: int, output_tokens: int) -> dict[str, object]:
    return {"llm.token_count.prompt": input_tokens, "llm.token_count.completion": output_tokens}


def llm_count(trace) -> int:
    return trace.categories["llm"].count


# --- nested LLM spans for one call --------------------------------------------------------------


def test_nested_pair_same_model_counts_once() -> None:
    trace = profile(
        [
            agent("root", None, 0, 1_000),
            oi_llm("outer", "root", 100, 900, "gpt-4o", attributes=oi_usage(100, 20)),
            chat("inner", "outer", 150, 850, "gpt-4o", attributes=usage(100, 20)),
        ]
    )
    nodes = by_name(trace)
    assert trace.llm_calls == 1
    assert llm_count(trace) == 1
    assert trace.tokens == TokenUsage(input=100, output=20)
    assert trace.tokens_by_model == {"gpt-4o": TokenUsage(input=100, output=20)}
    assert trace.operations[("llm", "gpt-4o")].count == 1
    assert trace.operations[("llm", "gpt-4o")].tokens == TokenUsage(input=100, output=20)
    assert trace.critical_path_tokens == TokenUsage(input=100, output=20)
    # The deepest span with usage is the one counted.
    assert (nodes["outer"].counted, nodes["inner"].counted) == (False, True)


def test_nested_pair_the_more_complete_usage_is_counted() -> None:
    # pydantic-ai under zero-code, a streamed call: pydantic-ai's span records the reasoning tokens,
    # Traceloop's inner span of the same call does not.
    reasoning = {"gen_ai.usage.details.reasoning_tokens": 14}
    trace = profile(
        [
            agent("root", None, 0, 1_000),
            chat("pydantic", "root", 100, 900, "o4-mini", attributes={**usage(23, 46), **reasoning}),
            chat("openai.chat", "pydantic", 150, 850, "o4-mini", attributes=usage(23, 46)),
        ]
    )
    nodes = by_name(trace)
    assert (nodes["pydantic"].counted, nodes["openai.chat"].counted) == (True, False)
    assert nodes["openai.chat"].same_call_as is nodes["pydantic"]
    assert trace.tokens == TokenUsage(input=23, output=46, reasoning=14)
    # The call's duration is counted once.
    assert trace.categories["llm"].duration_ns == 800


def test_nested_pair_provider_prefixed_model_is_one_call() -> None:
    # DSPy's LM.acall names gpt-4o-mini, LiteLLM's acompletion inside it openai/gpt-4o-mini.
    trace = profile(
        [
            agent("root", None, 0, 1_000),
            oi_llm("LM.acall", "root", 100, 900, "gpt-4o-mini"),
            chat("acompletion", "LM.acall", 150, 850, "openai/gpt-4o-mini", attributes=usage(120, 12)),
        ]
    )
    assert trace.llm_calls == 1
    assert list(trace.tokens_by_model) == ["gpt-4o-mini"]


def tool(name: str, parent: str, start: int, end: int, tool_name: str) -> object:
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool_name}
    return span(name, parent, start, end, attributes=attributes)


def test_nested_spans_of_one_tool_call_count_once() -> None:
    # AutoGen: a framework span and the tool's own span for each of 3 tool calls.
    records = [agent("root", None, 0, 1_000)]
    for index in range(3):
        start = 100 + index * 300
        records += [
            tool(f"outer{index}", "root", start, start + 200, "lookup"),
            tool(f"inner{index}", f"outer{index}", start + 10, start + 190, "lookup"),
        ]
    trace = profile(records)
    nodes = by_name(trace)
    assert trace.categories["tool"].count == 3
    assert trace.operations[("tool", "lookup")].count == 3
    assert nodes["outer0"].same_call_as is nodes["inner0"]


@pytest.mark.parametrize(
    ("attributes", "operation"),
    [
        ({"gen_ai.operation.name": "execute_tool"}, "(merged)"),
        # ADK 2.x names the tool too
        ({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "(merged tools)"}, "(merged tools)"),
    ],
)
def test_adk_merged_tool_span_is_no_tool_call(attributes: dict[str, str], operation: str) -> None:
    trace = profile(
        [
            agent("root", None, 0, 1_000),
            tool("execute_tool slow", "root", 100, 600, "slow"),
            tool("execute_tool fast", "root", 100, 200, "fast"),
            span("execute_tool (merged)", "root", 600, 601, attributes=attributes),
        ]
    )
    assert trace.categories["tool"].count == 2
    assert trace.operations[("tool", operation)].count == 0


def test_nested_pair_only_inner_has_usage() -> None:
    trace = profile(
        [
            agent("root", None, 0, 1_000),
            oi_llm("outer", "root", 100, 900, "gpt-4o"),
            chat("inner", "outer", 150, 850, "gpt-4o", attributes=usage(70, 9)),
        ]
    )
    assert trace.llm_calls == 1
    assert llm_count(trace) == 1
    assert trace.tokens == TokenUsage(input=70, output=9)


def test_nested_pair_only_outer_has_usage_is_counted_once() -> None:
    trace = profile(
        [
            agent("root", None, 0, 1_000),
            oi_llm("outer", "root", 100, 900, "gpt-4o", attributes=oi_usage(300, 45)),
            chat("inner", "outer", 150, 850, "gpt-4o"),
        ]
    )
    nodes = by_name(trace)
    assert trace.llm_calls == 1
    assert llm_count(trace) == 1
    assert trace.tokens == TokenUsage(input=300, output=45)
    assert trace.tokens_by_model == {"gpt-4o": TokenUsage(input=300, output=45)}
    assert trace.critical_path_tokens == TokenUsage(input=300, output=45)
    assert (nodes["outer"].counted, nodes["inner"].counted) == (True, False)


@pytest.mark.parametrize(
    ("outer_model", "inner_model"),
    [
        pytest.param("gpt-4o", "claude-3-5-sonnet", id="gpt-4o-then-claude"),
        pytest.param("gpt-4o", "gpt-4o-mini", id="gpt-4o-then-gpt-4o-mini"),
        pytest.param("gpt-4o-mini", "gpt-4o", id="gpt-4o-mini-then-gpt-4o"),
    ],
)
def test_nested_pair_different_models_counts_twice(outer_model: str, inner_model: str) -> None:
    # e.g. a router LLM call whose span wraps a call to another model.
    trace = profile(
        [
            agent("root", None, 0, 1_000),
            oi_llm("outer", "root", 100, 900, outer_model, attributes=oi_usage(100, 20)),
            chat("inner", "outer", 150, 850, inner_model, attributes=usage(50, 10)),
        ]
    )
    nodes = by_name(trace)
    assert trace.llm_calls == 2
    assert llm_count(trace) == 2
    assert trace.tokens == TokenUsage(input=150, output=30)
    assert trace.tokens_by_model == {
        outer_model: TokenUsage(input=100, output=20),
        inner_model: TokenUsage(input=50, output=10),
    }
    assert (nodes["outer"].counted, nodes["inner"].counted) == (True, True)


def test_llm_span_with_two_llm_children_counts_three_calls() -> None:
    trace = profile(
        [
            agent("root", None, 0, 1_000),
            oi_llm("outer", "root", 100, 900, "gpt-4o", attributes=oi_usage(10, 1)),
            chat("first", "outer", 150, 400, "gpt-4o", attributes=usage(100, 20)),
            chat("second", "outer", 450, 850, "gpt-4o", attributes=usage(200, 40)),
        ]
    )
    assert trace.llm_calls == 3
    assert llm_count(trace) == 3
    assert trace.operations[("llm", "gpt-4o")].count == 3
    assert trace.tokens == TokenUsage(input=310, output=61)
    assert all(node.counted for node in trace.spans)


def test_llm_child_with_a_non_llm_sibling_is_not_a_duplicate() -> None:
    # The LLM span is not the outer span's only child, so both are calls.
    trace = profile(
        [
            oi_llm("outer", None, 0, 1_000, "gpt-4o", attributes=oi_usage(10, 1)),
            chat("inner", "outer", 100, 800, "gpt-4o", attributes=usage(100, 20)),
            span("parse", "outer", 800, 900),
        ]
    )
    assert trace.llm_calls == 2
    assert trace.tokens == TokenUsage(input=110, output=21)


def test_dated_response_model_matches_its_alias() -> None:
    # The framework span names the alias; the client span only knows the dated snapshot that answered.
    trace = profile(
        [
            agent("root", None, 0, 1_000),
            oi_llm("outer", "root", 100, 900, "gpt-4o"),
            span(
                "inner",
                "outer",
                150,
                850,
                attributes={
                    "gen_ai.operation.name": "chat",
                    "gen_ai.response.model": "gpt-4o-2024-08-06",
                    **usage(100, 20),
                },
            ),
        ]
    )
    assert trace.llm_calls == 1
    assert llm_count(trace) == 1
    assert trace.tokens == TokenUsage(input=100, output=20)
    assert sum(u.total for u in trace.tokens_by_model.values()) == 120


def test_three_nested_spans_for_one_call_count_once() -> None:
    trace = profile(
        [
            oi_llm("a", None, 0, 1_000, "gpt-4o", attributes=oi_usage(100, 20)),
            span(
                "b",
                "a",
                10,
                990,
                attributes={
                    "traceloop.span.kind": "task",
                    "llm.request.type": "chat",
                    "llm.request.model": "gpt-4o",
                    **usage(100, 20),
                },
            ),
            chat("c", "b", 20, 980, "gpt-4o", attributes=usage(100, 20)),
        ]
    )
    nodes = by_name(trace)
    assert trace.llm_calls == 1
    assert trace.tokens == TokenUsage(input=100, output=20)
    assert [nodes[n].counted for n in ("a", "b", "c")] == [False, False, True]


# --- category and operation totals --------------------------------------------------------------


def realistic_trace():
    """An agent run with every token spelling; times in ns.

    root  agent   [0, 10_000]      planner, repeats its children's token totals
    llm1  chat    [1_000, 3_000]   gpt-4o, input 1000 (400 cached), output 200
    toolA tool    [3_000, 6_000]   gen_ai.tool.name = search, carries token usage too
    toolB tool    [3_500, 5_000]   "execute_tool fetch", runs alongside toolA
    llm2  chat    [6_000, 9_000]   gpt-4o-mini, legacy prompt 500 / completion 300, 120 reasoning
    emb   embed   [9_000, 9_500]   text-embedding-3-small, OpenInference prompt 30
    """
    return profile(
        [
            agent("root", None, 0, 10_000, **{"gen_ai.agent.name": "planner", **usage(1_530, 500)}),
            chat(
                "llm1",
                "root",
                1_000,
                3_000,
                "gpt-4o",
                attributes={**usage(1_000, 200), "gen_ai.usage.cache_read.input_tokens": 400},
            ),
            span(
                "toolA",
                "root",
                3_000,
                6_000,
                attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search", **usage(5, 5)},
            ),
            span("execute_tool fetch", "root", 3_500, 5_000, attributes={"gen_ai.operation.name": "execute_tool"}),
            chat(
                "llm2",
                "root",
                6_000,
                9_000,
                "gpt-4o-mini",
                attributes={
                    "gen_ai.usage.prompt_tokens": 500,
                    "gen_ai.usage.completion_tokens": 300,
                    "gen_ai.usage.reasoning_tokens": 120,
                },
            ),
            span(
                "emb",
                "root",
                9_000,
                9_500,
                attributes={
                    "openinference.span.kind": "EMBEDDING",
                    "llm.model_name": "text-embedding-3-small",
                    "llm.token_count.prompt": 30,
                },
            ),
        ]
    )


def test_self_time_and_critical_path_per_span() -> None:
    trace = realistic_trace()
    # root: children cover [1_000, 9_500] -> self 10_000 - 8_500 = 1_500.
    # Critical path from the end: emb [9_000, 9_500], llm2 [6_000, 9_000], toolA [3_000, 6_000]
    # (toolB ends inside toolA), llm1 [1_000, 3_000]; root keeps [0, 1_000] and [9_500, 10_000].
    assert {n: (s.self_time_ns, s.critical_path_ns, s.on_critical_path) for n, s in by_name(trace).items()} == {
        "root": (1_500, 1_500, True),
        "llm1": (2_000, 2_000, True),
        "toolA": (3_000, 3_000, True),
        "execute_tool fetch": (1_500, 0, False),
        "llm2": (3_000, 3_000, True),
        "emb": (500, 500, True),
    }
    assert trace.duration_ns == 10_000
    assert trace.critical_path_ns == 10_000


def test_category_totals() -> None:
    trace = realistic_trace()
    assert trace.categories == {
        "llm": CategoryStats(count=2, duration_ns=5_000, self_time_ns=5_000, critical_path_ns=5_000),
        "embedding": CategoryStats(count=1, duration_ns=500, self_time_ns=500, critical_path_ns=500),
        "tool": CategoryStats(count=2, duration_ns=4_500, self_time_ns=4_500, critical_path_ns=3_000),
        "agent": CategoryStats(count=1, duration_ns=10_000, self_time_ns=1_500, critical_path_ns=1_500),
        "retrieval": CategoryStats(),
        "memory": CategoryStats(),
        "internal": CategoryStats(),
    }
    assert list(trace.categories) == list(CATEGORIES)
    assert trace.llm_calls == 2
    assert sum(stats.critical_path_ns for stats in trace.categories.values()) == trace.critical_path_ns


def test_operation_totals() -> None:
    trace = realistic_trace()
    summary = {
        key: (op.count, op.duration_ns, op.self_time_ns, op.critical_path_ns, op.tokens)
        for key, op in trace.operations.items()
    }
    assert summary == {
        ("agent", "planner"): (1, 10_000, 1_500, 1_500, TokenUsage()),
        ("llm", "gpt-4o"): (1, 2_000, 2_000, 2_000, TokenUsage(input=1_000, output=200, cached_input=400)),
        ("tool", "search"): (1, 3_000, 3_000, 3_000, TokenUsage()),
        ("tool", "fetch"): (1, 1_500, 1_500, 0, TokenUsage()),
        ("llm", "gpt-4o-mini"): (1, 3_000, 3_000, 3_000, TokenUsage(input=500, output=300, reasoning=120)),
        ("embedding", "text-embedding-3-small"): (1, 500, 500, 500, TokenUsage(input=30)),
    }
    for (category, operation), op in trace.operations.items():
        assert (op.category, op.operation) == (category, operation)


def test_token_totals_and_per_model() -> None:
    trace = realistic_trace()
    # The agent's and the tool's own usage attributes are not added.
    assert trace.tokens == TokenUsage(input=1_530, output=500, cached_input=400, reasoning=120)
    assert trace.tokens_by_model == {
        "gpt-4o": TokenUsage(input=1_000, output=200, cached_input=400),
        "gpt-4o-mini": TokenUsage(input=500, output=300, reasoning=120),
        "text-embedding-3-small": TokenUsage(input=30),
    }
    # Every model call is on the critical path.
    assert trace.critical_path_tokens == trace.tokens


def test_operations_of_one_model_add_up() -> None:
    trace = profile(
        [
            agent("root", None, 0, 1_000),
            chat("c1", "root", 0, 300, "gpt-4o", attributes=usage(10, 1)),
            chat("c2", "root", 300, 700, "gpt-4o", attributes=usage(20, 2)),
            chat("c3", "root", 700, 1_000, "gpt-4o", attributes=usage(30, 3)),
        ]
    )
    op = trace.operations[("llm", "gpt-4o")]
    assert (op.count, op.duration_ns, op.self_time_ns, op.critical_path_ns) == (3, 1_000, 1_000, 1_000)
    assert op.tokens == TokenUsage(input=60, output=6)
    assert trace.tokens_by_model == {"gpt-4o": TokenUsage(input=60, output=6)}
    assert trace.llm_calls == 3


def test_agent_and_tool_usage_is_not_added_to_totals() -> None:
    trace = profile(
        [
            agent("root", None, 0, 1_000, **usage(900, 90)),
            span("tool", "root", 100, 500, attributes={"gen_ai.operation.name": "execute_tool", **usage(40, 4)}),
            span("chain", "root", 500, 900, attributes={"openinference.span.kind": "CHAIN", **oi_usage(7, 7)}),
            span("step", "root", 900, 950, attributes=usage(3, 3)),
        ]
    )
    assert trace.tokens == TokenUsage()
    assert trace.tokens_by_model == {}
    assert trace.critical_path_tokens == TokenUsage()
    assert trace.llm_calls == 0
    assert all(op.tokens == TokenUsage() for op in trace.operations.values())


@pytest.mark.parametrize(
    ("attributes", "expected"),
    [
        pytest.param(
            {"gen_ai.usage.input_tokens": 11, "gen_ai.usage.output_tokens": 12},
            TokenUsage(input=11, output=12),
            id="gen_ai.usage.input_tokens/output_tokens",
        ),
        pytest.param(
            {"gen_ai.usage.prompt_tokens": 13, "gen_ai.usage.completion_tokens": 14},
            TokenUsage(input=13, output=14),
            id="gen_ai.usage.prompt_tokens/completion_tokens",
        ),
        pytest.param(
            {"llm.token_count.prompt": 15, "llm.token_count.completion": 16},
            TokenUsage(input=15, output=16),
            id="llm.token_count.prompt/completion",
        ),
        pytest.param(
            {"gen_ai.usage.input_tokens": 17, "gen_ai.usage.cache_read.input_tokens": 8},
            TokenUsage(input=17, cached_input=8),
            id="gen_ai.usage.cache_read.input_tokens",
        ),
        pytest.param(
            {"gen_ai.usage.output_tokens": 19, "gen_ai.usage.reasoning.output_tokens": 9},
            TokenUsage(output=19, reasoning=9),
            id="gen_ai.usage.reasoning.output_tokens",
        ),
        pytest.param(
            {"gen_ai.usage.output_tokens": 21, "gen_ai.usage.reasoning_tokens": 10},
            TokenUsage(output=21, reasoning=10),
            id="gen_ai.usage.reasoning_tokens",
        ),
    ],
)
def test_token_spellings_reach_trace_totals(attributes: dict[str, object], expected: TokenUsage) -> None:
    trace = profile([agent("root", None, 0, 100), chat("llm", "root", 10, 90, "gpt-4o", attributes=attributes)])
    assert trace.tokens == expected
    assert trace.tokens_by_model == {"gpt-4o": expected}
    assert trace.critical_path_tokens == expected


# --- critical-path tokens -----------------------------------------------------------------------


def test_parallel_llm_call_off_the_critical_path_is_excluded() -> None:
    # main [0, 900] decides when root ends; side [100, 500] runs alongside it.
    trace = profile(
        [
            agent("root", None, 0, 1_000),
            chat("main", "root", 0, 900, "gpt-4o", attributes=usage(100, 10)),
            chat("side", "root", 100, 500, "gpt-4o-mini", attributes=usage(50, 5)),
        ]
    )
    nodes = by_name(trace)
    assert (nodes["main"].on_critical_path, nodes["side"].on_critical_path) == (True, False)
    assert trace.tokens == TokenUsage(input=150, output=15)
    assert trace.critical_path_tokens == TokenUsage(input=100, output=10)
    assert trace.categories["llm"] == CategoryStats(
        count=2, duration_ns=1_300, self_time_ns=1_300, critical_path_ns=900
    )


def test_critical_path_tokens_count_a_nested_call_once() -> None:
    trace = profile(
        [
            agent("root", None, 0, 1_000),
            oi_llm("outer", "root", 0, 1_000, "gpt-4o", attributes=oi_usage(100, 20)),
            chat("inner", "outer", 10, 990, "gpt-4o", attributes=usage(100, 20)),
        ]
    )
    assert trace.critical_path_tokens == TokenUsage(input=100, output=20)


# --- time to first token in a profile -----------------------------------------------------------


def test_time_to_first_token_of_streaming_calls() -> None:
    trace = profile(
        [
            agent("root", None, 0, 2_000_000_000),
            with_events(
                chat("stream", "root", 100_000_000, 900_000_000, "gpt-4o", attributes={"gen_ai.is_streaming": True}),
                ("gen_ai.content.completion.chunk", 280_000_000),
                ("gen_ai.content.completion.chunk", 300_000_000),
            ),
            chat(
                "attr",
                "root",
                1_000_000_000,
                1_500_000_000,
                "gpt-4o",
                attributes={"gen_ai.response.time_to_first_chunk": 0.05},
            ),
            chat("plain", "root", 1_500_000_000, 1_900_000_000, "gpt-4o"),
        ]
    )
    nodes = by_name(trace)
    assert nodes["stream"].time_to_first_token_ns == 180_000_000
    assert nodes["attr"].time_to_first_token_ns == 50_000_000
    assert nodes["plain"].time_to_first_token_ns is None
    assert [nodes[n].streaming for n in ("stream", "attr", "plain")] == [True, True, False]


@settings(max_examples=100, deadline=None)
@given(span_trees(messy=True))
def test_the_trace_critical_path_summed_by_aggregate_is_its_spans_sum(records: list) -> None:
    trace = profile(records)
    assert trace.summed_critical_path_ns is not None
    assert trace.critical_path_ns == sum(span.critical_path_ns for span in trace.spans)

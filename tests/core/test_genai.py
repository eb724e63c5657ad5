"""Reading LLM facts off span attributes: model, operation, token usage, time to first token."""

from __future__ import annotations

import pytest

from otel_agent_profiler.core import SpanEvent, TokenUsage
from otel_agent_profiler.core.genai import (
    model_of,
    operation_of,
    same_model,
    time_to_first_token_ns,
    token_usage_of,
)
from tests.support.span_builders import by_name, profile, span, with_events

CHUNK = "gen_ai.content.completion.chunk"

# --- model_of ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attributes", "expected"),
    [
        pytest.param({"gen_ai.request.model": "gpt-4o"}, "gpt-4o", id="request-model"),
        pytest.param({"gen_ai.response.model": "gpt-4o-2024-08-06"}, "gpt-4o-2024-08-06", id="response-model"),
        pytest.param(
            {"gen_ai.request.model": "gpt-4o", "gen_ai.response.model": "gpt-4o-2024-08-06"},
            "gpt-4o",
            id="request-model-beats-response-model",
        ),
        pytest.param({"llm.model_name": "claude-3-5-sonnet"}, "claude-3-5-sonnet", id="openinference-model-name"),
        pytest.param({"llm.request.model": "gemini-1.5-pro"}, "gemini-1.5-pro", id="traceloop-request-model"),
        pytest.param(
            {"gen_ai.request.model": "", "gen_ai.response.model": "gpt-4o-mini"}, "gpt-4o-mini", id="empty-skipped"
        ),
        pytest.param({}, None, id="absent"),
        pytest.param({"gen_ai.request.model": 4}, None, id="non-string-ignored"),
    ],
)
def test_model_of(attributes: dict[str, object], expected: str | None) -> None:
    assert model_of(attributes) == expected


# --- same_model -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        pytest.param("gpt-4o", "gpt-4o", id="identical"),
        pytest.param("gpt-4o-2024-08-06", "gpt-4o", id="dated-snapshot-matches-alias"),
        pytest.param("gpt-4o", "gpt-4o-2024-08-06", id="alias-matches-dated-snapshot"),
        pytest.param("gpt-4o-mini-2024-07-18", "gpt-4o-mini", id="dated-mini-matches-mini"),
    ],
)
def test_same_model_matches(a: str, b: str) -> None:
    assert same_model(a, b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        pytest.param("gpt-4o", "claude-3-5-sonnet", id="different-vendors"),
        pytest.param("gpt-4o", "gpt-4o-mini", id="gpt-4o-vs-gpt-4o-mini"),
        pytest.param("gpt-4o-mini", "gpt-4o", id="gpt-4o-mini-vs-gpt-4o"),
        pytest.param("gpt-4", "gpt-4o", id="gpt-4-vs-gpt-4o"),
        pytest.param("o1", "o1-mini", id="o1-vs-o1-mini"),
        pytest.param("gpt-4o-mini-2024-07-18", "gpt-4o", id="dated-mini-vs-gpt-4o"),
        pytest.param("gpt-4o", None, id="model-vs-unknown"),
        pytest.param(None, "gpt-4o", id="unknown-vs-model"),
    ],
)
def test_same_model_rejects_different_models(a: str | None, b: str | None) -> None:
    assert not same_model(a, b)


# --- operation_of -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("category", "name", "attributes", "expected"),
    [
        pytest.param("llm", "chat gpt-4o", {"gen_ai.request.model": "gpt-4o"}, "gpt-4o", id="llm-model"),
        pytest.param("llm", "ChatOpenAI", {}, "ChatOpenAI", id="llm-without-model-is-name"),
        pytest.param(
            "embedding",
            "embeddings text-embedding-3-small",
            {"gen_ai.request.model": "text-embedding-3-small"},
            "text-embedding-3-small",
            id="embedding-model",
        ),
        pytest.param(
            "tool", "execute_tool get_weather", {"gen_ai.tool.name": "weather"}, "weather", id="tool-attribute-wins"
        ),
        pytest.param("tool", "execute_tool get_weather", {}, "get_weather", id="tool-from-span-name"),
        pytest.param("tool", "run the tool", {}, "run the tool", id="tool-without-name-is-span-name"),
        pytest.param("agent", "invoke_agent", {"gen_ai.agent.name": "planner"}, "planner", id="agent-name"),
        pytest.param("agent", "AgentExecutor", {}, "AgentExecutor", id="agent-without-name-is-span-name"),
        pytest.param("retrieval", "retrieve docs", {}, "retrieve docs", id="retrieval-is-span-name"),
        pytest.param("memory", "memory.search", {"db.system": "redis"}, "memory.search", id="memory-is-span-name"),
        pytest.param(
            "internal", "parse", {"gen_ai.request.model": "gpt-4o"}, "parse", id="internal-is-span-name-not-model"
        ),
        pytest.param(
            "agent",
            "Crew_3f2b9c1e-1234-4abc-9def-0123456789ab.kickoff",
            {},
            "Crew.kickoff",
            id="crewai-per-run-uuid-left-out",
        ),
        pytest.param(
            "agent", "Task_0af7651916cd43dd8448eb211c80319c_execute", {}, "Task_execute", id="undashed-run-id-left-out"
        ),
        pytest.param("tool", "slow_lookup.acall", {}, "slow_lookup", id="dspy-tool-method-suffix-left-out"),
        pytest.param(
            "tool", "FunctionTool.acall", {"tool.name": "slow_search"}, "slow_search", id="tool-name-beats-method-name"
        ),
        pytest.param(
            "tool",
            "haystack.agent.step.tool",
            {"haystack.tool.name": "slow_search"},
            "slow_search",
            id="haystack-tool-name",
        ),
        pytest.param("agent", "Agent.run", {}, "Agent.run", id="agent-keeps-its-method"),
        pytest.param("agent", "build-2024", {}, "build-2024", id="short-numbers-are-not-run-ids"),
    ],
)
def test_operation_of(category: str, name: str, attributes: dict[str, object], expected: str) -> None:
    assert operation_of(category, name, attributes) == expected


# --- token_usage_of ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attributes", "expected"),
    [
        pytest.param(
            {"gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 30},
            TokenUsage(input=120, output=30),
            id="gen_ai.usage.input_tokens/output_tokens",
        ),
        pytest.param(
            {"gen_ai.usage.prompt_tokens": 121, "gen_ai.usage.completion_tokens": 31},
            TokenUsage(input=121, output=31),
            id="gen_ai.usage.prompt_tokens/completion_tokens-legacy",
        ),
        pytest.param(
            {"llm.token_count.prompt": 122, "llm.token_count.completion": 32},
            TokenUsage(input=122, output=32),
            id="llm.token_count.prompt/completion-openinference",
        ),
        pytest.param(
            {
                "gen_ai.usage.input_tokens": 1000,
                "gen_ai.usage.output_tokens": 50,
                "gen_ai.usage.cache_read.input_tokens": 600,
            },
            TokenUsage(input=1000, output=50, cached_input=600),
            id="gen_ai.usage.cache_read.input_tokens",
        ),
        pytest.param(
            {
                "gen_ai.usage.input_tokens": 80,
                "gen_ai.usage.output_tokens": 400,
                "gen_ai.usage.reasoning.output_tokens": 320,
            },
            TokenUsage(input=80, output=400, reasoning=320),
            id="gen_ai.usage.reasoning.output_tokens",
        ),
        pytest.param(
            {
                "gen_ai.usage.input_tokens": 81,
                "gen_ai.usage.output_tokens": 401,
                "gen_ai.usage.reasoning_tokens": 321,
            },
            TokenUsage(input=81, output=401, reasoning=321),
            id="gen_ai.usage.reasoning_tokens",
        ),
        pytest.param(
            # pydantic-ai: the provider's usage details under gen_ai.usage.details.*
            {
                "gen_ai.usage.input_tokens": 82,
                "gen_ai.usage.output_tokens": 402,
                "gen_ai.usage.details.reasoning_tokens": 322,
                "gen_ai.usage.cache_read.input_tokens": 64,
            },
            TokenUsage(input=82, output=402, cached_input=64, reasoning=322),
            id="gen_ai.usage.details.reasoning_tokens-pydantic-ai",
        ),
        pytest.param(
            {
                "gen_ai.usage.input_tokens": 83,
                "gen_ai.usage.output_tokens": 403,
                "gen_ai.usage.reasoning.output_tokens": 323,
                "gen_ai.usage.details.reasoning_tokens": 999,
            },
            TokenUsage(input=83, output=403, reasoning=323),
            id="gen_ai.usage.reasoning.output_tokens-beats-details",
        ),
        pytest.param(
            # the slow path (a count as a string) reads the same spelling
            {
                "gen_ai.usage.input_tokens": "84",
                "gen_ai.usage.output_tokens": 404,
                "gen_ai.usage.details.reasoning_tokens": 324,
            },
            TokenUsage(input=84, output=404, reasoning=324),
            id="gen_ai.usage.details.reasoning_tokens-slow-path",
        ),
        pytest.param(
            {
                "gen_ai.usage.input_tokens": 1200,
                "gen_ai.usage.output_tokens": 40,
                "gen_ai.usage.details.cache_read_tokens": 1088,
            },
            TokenUsage(input=1200, output=40, cached_input=1088),
            id="gen_ai.usage.details.cache_read_tokens-pydantic-ai",
        ),
        pytest.param(
            {
                "gen_ai.usage.input_tokens": 1201,
                "gen_ai.usage.output_tokens": 41,
                "gen_ai.usage.cache_read.input_tokens": 1024,
                "gen_ai.usage.details.cache_read_tokens": 999,
            },
            TokenUsage(input=1201, output=41, cached_input=1024),
            id="gen_ai.usage.cache_read.input_tokens-beats-details",
        ),
        pytest.param(
            # OpenInference (openai, openai-agents, langchain, llama-index, smolagents)
            {
                "llm.token_count.prompt": 1100,
                "llm.token_count.completion": 60,
                "llm.token_count.prompt_details.cache_read": 1024,
                "llm.token_count.completion_details.reasoning": 18,
            },
            TokenUsage(input=1100, output=60, cached_input=1024, reasoning=18),
            id="llm.token_count.prompt_details.cache_read/completion_details.reasoning-openinference",
        ),
        pytest.param(
            # the older Traceloop spelling, next to the input and output counts
            {
                "gen_ai.usage.input_tokens": 1300,
                "gen_ai.usage.output_tokens": 20,
                "gen_ai.usage.cache_read_input_tokens": 1152,
            },
            TokenUsage(input=1300, output=20, cached_input=1152),
            id="gen_ai.usage.cache_read_input_tokens-beside-input-output",
        ),
        pytest.param(
            # OpenInference's details on a span that carries GenAI's input and output counts too
            {
                "gen_ai.usage.input_tokens": 1100,
                "gen_ai.usage.output_tokens": 60,
                "llm.token_count.prompt_details.cache_read": 1024,
                "llm.token_count.completion_details.reasoning": 18,
            },
            TokenUsage(input=1100, output=60, cached_input=1024, reasoning=18),
            id="openinference-details-beside-genai-input-output",
        ),
        pytest.param(
            {"gen_ai.usage.input_tokens": 10},
            TokenUsage(input=10),
            id="input-only",
        ),
        pytest.param(
            {
                "gen_ai.usage.input_tokens": 10,
                "gen_ai.usage.prompt_tokens": 99,
                "gen_ai.usage.output_tokens": 5,
                "llm.token_count.completion": 77,
            },
            TokenUsage(input=10, output=5),
            id="current-spelling-beats-legacy",
        ),
        pytest.param(
            {"gen_ai.usage.input_tokens": "42", "gen_ai.usage.output_tokens": 7.0},
            TokenUsage(input=42, output=7),
            id="string-and-float-values",
        ),
    ],
)
def test_token_usage_of(attributes: dict[str, object], expected: TokenUsage) -> None:
    assert token_usage_of(attributes) == expected


@pytest.mark.parametrize(
    "attributes",
    [
        pytest.param({}, id="no-attributes"),
        pytest.param({"gen_ai.usage.input_tokens": 0, "gen_ai.usage.output_tokens": 0}, id="all-zero"),
        pytest.param({"gen_ai.request.model": "gpt-4o"}, id="model-but-no-usage"),
        pytest.param({"gen_ai.usage.input_tokens": True}, id="bool-is-not-a-count"),
    ],
)
def test_token_usage_of_none(attributes: dict[str, object]) -> None:
    assert token_usage_of(attributes) is None


def test_token_usage_add_total_and_dict() -> None:
    usage = TokenUsage(input=100, output=20, cached_input=40, reasoning=5)
    usage.add(TokenUsage(input=1, output=2, cached_input=3, reasoning=4))
    assert usage == TokenUsage(input=101, output=22, cached_input=43, reasoning=9)
    # Cached input is part of input, reasoning part of output: the total adds neither again.
    assert usage.total == 123
    assert usage.to_dict() == {"input": 101, "output": 22, "cached_input": 43, "reasoning": 9, "total": 123}
    assert TokenUsage().is_empty()
    assert not TokenUsage(reasoning=1).is_empty()


# --- time_to_first_token_ns -------------------------------------------------------------------

START = 1_700_000_000_000_000_000


@pytest.mark.parametrize(
    ("attributes", "events", "expected"),
    [
        pytest.param({}, [SpanEvent(CHUNK, START + 312_500_000)], 312_500_000, id="chunk-event"),
        pytest.param(
            {},
            [
                SpanEvent("gen_ai.content.prompt", START + 1_000),
                SpanEvent(CHUNK, START + 250_000_000),
                SpanEvent(CHUNK, START + 300_000_000),
                SpanEvent(CHUNK, START + 350_000_000),
            ],
            250_000_000,
            id="first-of-several-chunks-other-events-ignored",
        ),
        pytest.param({"gen_ai.response.time_to_first_chunk": 0.25}, [], 250_000_000, id="ttfc-attribute-seconds"),
        pytest.param({"gen_ai.response.time_to_first_chunk": 2}, [], 2_000_000_000, id="ttfc-attribute-int-seconds"),
        pytest.param(
            {"gen_ai.response.time_to_first_chunk": 0.9},
            [SpanEvent(CHUNK, START + 400_000_000)],
            400_000_000,
            id="chunk-event-beats-attribute",
        ),
        pytest.param({}, [], None, id="no-chunk"),
        pytest.param({}, [SpanEvent("gen_ai.content.prompt", START + 5)], None, id="only-non-chunk-events"),
        pytest.param({"gen_ai.response.time_to_first_chunk": -1.0}, [], None, id="negative-attribute-ignored"),
        pytest.param(
            # pydantic-ai writes the GenAI metric's name on the span, in seconds
            {"gen_ai.client.operation.time_to_first_chunk": 0.0625},
            [],
            62_500_000,
            id="client-operation-ttfc-attribute-seconds-pydantic-ai",
        ),
        pytest.param(
            {"gen_ai.response.time_to_first_chunk": 0.5, "gen_ai.client.operation.time_to_first_chunk": 0.25},
            [],
            500_000_000,
            id="response-ttfc-beats-client-operation-ttfc",
        ),
        pytest.param(
            {"gen_ai.response.time_to_first_chunk": -1.0, "gen_ai.client.operation.time_to_first_chunk": 0.25},
            [],
            250_000_000,
            id="unusable-response-ttfc-falls-back-to-client-operation-ttfc",
        ),
        pytest.param(
            {"gen_ai.client.operation.time_to_first_chunk": float("nan")}, [], None, id="nan-client-operation-ttfc"
        ),
        # Strands: the server's time to first token, in milliseconds, on each streamed call's span
        pytest.param({"gen_ai.server.time_to_first_token": 310}, [], 310_000_000, id="strands-server-ttft-ms"),
        pytest.param(
            {"gen_ai.server.time_to_first_token": 310, "gen_ai.response.time_to_first_chunk": 0.4},
            [],
            400_000_000,
            id="client-side-ttfc-beats-server-ttft",
        ),
        pytest.param({"gen_ai.server.time_to_first_token": -5}, [], None, id="negative-server-ttft-ignored"),
    ],
)
def test_time_to_first_token_ns(attributes: dict[str, object], events: list[SpanEvent], expected: int | None) -> None:
    assert time_to_first_token_ns(START, attributes, events) == expected


def test_time_to_first_token_on_profiled_spans() -> None:
    chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}
    trace = profile(
        [
            span("root", None, START, START + 3_000_000_000, attributes={"gen_ai.operation.name": "invoke_agent"}),
            with_events(
                span("stream", "root", START + 100_000_000, START + 1_100_000_000, attributes=chat),
                ("gen_ai.content.completion.chunk", START + 350_000_000),
                ("gen_ai.content.completion.chunk", START + 400_000_000),
            ),
            span(
                "ttfc",
                "root",
                START + 1_200_000_000,
                START + 2_000_000_000,
                attributes={**chat, "gen_ai.response.time_to_first_chunk": 0.125},
            ),
            span("blocking", "root", START + 2_000_000_000, START + 2_900_000_000, attributes=chat),
            # Chunk events on a span that is not an LLM call give no time to first token.
            with_events(
                span("tool", "root", START, START + 50_000_000, attributes={"gen_ai.operation.name": "execute_tool"}),
                ("gen_ai.content.completion.chunk", START + 10_000_000),
            ),
        ]
    )
    nodes = by_name(trace)
    assert nodes["stream"].time_to_first_token_ns == 250_000_000
    assert nodes["stream"].streaming is True
    assert nodes["ttfc"].time_to_first_token_ns == 125_000_000
    assert nodes["ttfc"].streaming is True
    assert nodes["blocking"].time_to_first_token_ns is None
    assert nodes["blocking"].streaming is False
    assert nodes["tool"].time_to_first_token_ns is None
    assert nodes["root"].time_to_first_token_ns is None


def test_time_to_first_token_of_a_stream_object_counts_from_the_request() -> None:
    # LlamaIndex's astream_chat (OpenInference) ends when it returns the stream object; the request goes out
    # when the stream is first read, after the span's end (its first-token event comes later still).
    stream_span = with_events(
        span(
            "astream",
            "root",
            START + 1_409_200_000,
            START + 1_433_700_000,
            attributes={"openinference.span.kind": "LLM", "llm.model_name": "o4-mini"},
        ),
        ("First Token Stream Event", START + 1_590_200_000),
    )
    trace = profile([span("root", None, START, START + 1_800_000_000), stream_span])
    assert by_name(trace)["astream"].time_to_first_token_ns == 156_500_000


def test_time_to_first_token_of_a_span_open_until_its_first_chunk_counts_from_its_start() -> None:
    chunk = [SpanEvent(CHUNK, START + 300)]
    assert time_to_first_token_ns(START, {}, chunk, START + 1_000) == 300

"""Which LLM spans are calls, each counted once, beyond nested pairs (``core.same_call``).

The span shapes are those the real instrumentations wrote in the conformance suite's exports
(tests/conformance): names, instrumentation scopes, attributes and timing, in milliseconds.
"""

from __future__ import annotations

import dataclasses

import pytest

from otel_agent_profiler.core import SpanRecord, StatusCode, TokenUsage, TraceProfile
from otel_agent_profiler.core.same_call import CROWD
from tests.support.span_builders import by_name, profile, span, with_events

MS = 1_000_000
LANGCHAIN = "openinference.instrumentation.langchain"
LLAMA_INDEX = "openinference.instrumentation.llama_index"
OI_OPENAI = "openinference.instrumentation.openai"
OPENAI_V2 = "opentelemetry.util.genai.handler"
TRACELOOP = "opentelemetry.instrumentation.openai.v1"


def oi_llm(
    name: str,
    parent: str,
    start_ms: float,
    end_ms: float,
    scope: str,
    model: str = "o4-mini-2025-04-16",
    tokens: tuple[int, int, int, int] | None = None,
    messages: bool = True,
) -> SpanRecord:
    """An OpenInference LLM span (LangChain's ChatOpenAI, the OpenAI client's ChatCompletion, LlamaIndex's)."""
    attributes: dict[str, object] = {"openinference.span.kind": "LLM", "llm.model_name": model, "llm.system": "openai"}
    if messages:
        attributes["llm.input_messages.0.message.role"] = "user"
        attributes["llm.input_messages.0.message.content"] = "Compare the two searches."
        attributes["llm.output_messages.0.message.role"] = "assistant"
    if tokens is not None:
        prompt, completion, cached, reasoning = tokens
        attributes.update(
            {
                "llm.token_count.prompt": prompt,
                "llm.token_count.completion": completion,
                "llm.token_count.total": prompt + completion,
                "llm.token_count.prompt_details.cache_read": cached,
                "llm.token_count.completion_details.reasoning": reasoning,
            }
        )
    return span(name, parent, round(start_ms * MS), round(end_ms * MS), attributes=attributes, scope=scope)


def genai_chat(
    name: str,
    parent: str,
    start_ms: float,
    end_ms: float,
    scope: str,
    tokens: tuple[int, int, int, int] | None = None,
) -> SpanRecord:
    """A GenAI-convention chat span (Traceloop's openai.chat, openai-v2's ``chat o4-mini``)."""
    attributes: dict[str, object] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "o4-mini",
        "gen_ai.response.model": "o4-mini-2025-04-16",
        "gen_ai.response.id": f"chatcmpl-{name}",
    }
    if tokens is not None:
        prompt, completion, cached, reasoning = tokens
        attributes.update({"gen_ai.usage.input_tokens": prompt, "gen_ai.usage.output_tokens": completion})
        if cached:
            attributes["gen_ai.usage.cache_read.input_tokens"] = cached
        if reasoning:
            attributes["gen_ai.usage.reasoning_tokens"] = reasoning
    return span(name, parent, round(start_ms * MS), round(end_ms * MS), attributes=attributes, scope=scope)


def framework(name: str, parent: str | None, start_ms: float, end_ms: float, scope: str = LANGCHAIN) -> SpanRecord:
    attributes = {"openinference.span.kind": "AGENT" if parent is None or name == "agent" else "CHAIN"}
    return span(name, parent, round(start_ms * MS), round(end_ms * MS), attributes=attributes, scope=scope)


def counted(trace: TraceProfile) -> list[str]:
    return sorted(s.name for s in trace.spans if s.category == "llm" and s.counted)


def unscoped(records: list[SpanRecord]) -> list[SpanRecord]:
    return [dataclasses.replace(record, scope="") for record in records]


def timings(trace: TraceProfile) -> dict[str, tuple[int, int, bool]]:
    return {s.name: (s.self_time_ns, s.critical_path_ns, s.on_critical_path) for s in trace.spans}


# --- side by side: two instrumentations, one call --------------------------------------------------

#: LangGraph under zero-code: LangChain's span deep under the agent, the OpenAI client's spans (Traceloop's
#: openai.chat around OpenInference's ChatCompletion) under the root, where the client's context put them.
LANGGRAPH_ZERO_CODE = [
    framework("conformance run", None, 0, 1508),
    framework("LangGraph", "conformance run", 363, 1303),
    framework("agent", "LangGraph", 365, 593),
    framework("RunnableSequence", "agent", 366, 589),
    oi_llm("ChatOpenAI", "RunnableSequence", 368.2, 587.4, LANGCHAIN, tokens=(1363, 31, 0, 9)),
    genai_chat("openai.chat", "conformance run", 369.8, 586.1, TRACELOOP, tokens=(1363, 31, 0, 9)),
    oi_llm("ChatCompletion", "openai.chat", 372.6, 585.5, OI_OPENAI, tokens=(1363, 31, 0, 9)),
]


def test_langchain_s_span_and_the_client_s_spans_apart_in_the_tree_count_one_call() -> None:
    trace = profile(LANGGRAPH_ZERO_CODE)
    assert trace.llm_calls == 1
    assert trace.tokens == TokenUsage(1363, 31, 0, 9)
    assert trace.tokens_by_model == {"o4-mini": TokenUsage(1363, 31, 0, 9)}
    # equal usage: the span closest to the wire (the latest to start) is the one counted
    assert counted(trace) == ["ChatCompletion"]
    # The critical path runs through LangChain's copy: the call and its tokens are on it all the same.
    assert not by_name(trace)["ChatCompletion"].on_critical_path
    assert trace.critical_path_tokens == TokenUsage(1363, 31, 0, 9)


def test_spans_keep_their_times_and_the_call_s_time_is_counted_once() -> None:
    # Without scopes the spans cannot be told apart as one call: each span's times must not depend on it.
    merged, apart = profile(LANGGRAPH_ZERO_CODE), profile(unscoped(LANGGRAPH_ZERO_CODE))
    assert apart.llm_calls == 2
    assert timings(merged) == timings(apart)
    assert merged.categories["llm"].critical_path_ns == apart.categories["llm"].critical_path_ns
    # Apart, the call's time is LLM time twice: 435.5 ms in a call of 219.2 ms. Merged, LangChain's copy
    # adds only its time outside the counted span (ChatCompletion); openai.chat its own 3.4 ms around it.
    assert apart.categories["llm"].self_time_ns == 435_500_000
    chat_openai_outside = round(((587.4 - 368.2) - (585.5 - 372.6)) * MS)
    assert merged.categories["llm"].self_time_ns == chat_openai_outside + round((586.1 - 369.8) * MS)
    by_span = {s.name: s.same_call_as.name if s.same_call_as else None for s in merged.spans if s.category == "llm"}
    assert by_span == {"ChatOpenAI": "ChatCompletion", "openai.chat": "ChatCompletion", "ChatCompletion": None}


def test_the_span_with_the_most_complete_usage_is_counted() -> None:
    # A streamed call: Traceloop records no reasoning tokens of streams, LangChain's span does.
    trace = profile(
        [
            framework("conformance run", None, 0, 300),
            oi_llm("ChatOpenAI", "conformance run", 100, 290, LANGCHAIN, model="o4-mini", tokens=(23, 46, 0, 14)),
            genai_chat("openai.chat", "conformance run", 101, 289, TRACELOOP, tokens=(23, 46, 0, 0)),
        ]
    )
    assert trace.llm_calls == 1
    assert counted(trace) == ["ChatOpenAI"]
    assert trace.tokens == TokenUsage(23, 46, 0, 14)


#: LlamaIndex's streamed call under zero-code: its span ends when astream_chat returns the stream (its
#: first-token event comes later), and openai-v2's span (around Traceloop's) for the same call starts after.
LLAMA_INDEX_STREAM = [
    framework("conformance run", None, 0, 1618, scope="conformance"),
    with_events(
        oi_llm("OpenAI.astream_chat", "conformance run", 1382.4, 1409.7, LLAMA_INDEX, model="o4-mini"),
        ("First Token Stream Event", round(1569.9 * MS)),
    ),
    genai_chat("chat o4-mini", "conformance run", 1410.1, 1615.0, OPENAI_V2),
    with_events(
        genai_chat("openai.chat", "chat o4-mini", 1410.2, 1614.8, TRACELOOP),
        ("gen_ai.content.completion.chunk", round(1569.3 * MS)),
        ("gen_ai.content.completion.chunk", round(1574.6 * MS)),
    ),
]


def test_a_stream_whose_framework_span_ended_before_the_client_s_began_counts_once() -> None:
    trace = profile(LLAMA_INDEX_STREAM)
    assert trace.llm_calls == 1
    # neither records usage; both a first token: the client's span, closest to the wire, is counted
    assert counted(trace) == ["openai.chat"]
    spans = by_name(trace)
    assert spans["OpenAI.astream_chat"].time_to_first_token_ns is not None


def test_spans_of_different_scopes_apart_in_time_are_different_calls() -> None:
    # The same shape without the first-token event: nothing shows the framework's span lasted into the
    # client's, so they are two calls.
    records = [dataclasses.replace(r, events=()) if r.name == "OpenAI.astream_chat" else r for r in LLAMA_INDEX_STREAM]
    assert profile(records).llm_calls == 2


def test_three_instrumentations_side_by_side_count_one_call() -> None:
    trace = profile(
        [
            framework("conformance run", None, 0, 500),
            oi_llm("ChatOpenAI", "conformance run", 100, 400, LANGCHAIN, tokens=(50, 5, 0, 0)),
            genai_chat("openai.chat", "conformance run", 101, 399, TRACELOOP, tokens=(50, 5, 0, 0)),
            genai_chat("chat o4-mini", "conformance run", 102, 398, OPENAI_V2, tokens=(50, 5, 0, 0)),
        ]
    )
    assert trace.llm_calls == 1
    assert trace.tokens == TokenUsage(50, 5)


def test_parallel_calls_of_one_instrumentation_are_never_merged() -> None:
    # Two parallel calls with the same prompt and answer, one without usage: both are calls.
    trace = profile(
        [
            framework("conformance run", None, 0, 500),
            genai_chat("first", "conformance run", 100, 400, TRACELOOP, tokens=(50, 5, 0, 0)),
            genai_chat("second", "conformance run", 110, 390, TRACELOOP, tokens=(50, 5, 0, 0)),
            genai_chat("third", "conformance run", 120, 380, TRACELOOP),
        ]
    )
    assert trace.llm_calls == 3


def test_parallel_calls_described_by_two_instrumentations_each_count_once() -> None:
    # Two parallel calls, each with LangChain's span and the client's: each framework span goes with
    # the client span of its own usage, not with whichever overlaps.
    trace = profile(
        [
            framework("conformance run", None, 0, 1000),
            oi_llm("chain-a", "conformance run", 100, 600, LANGCHAIN, tokens=(100, 10, 0, 0)),
            oi_llm("chain-b", "conformance run", 105, 900, LANGCHAIN, tokens=(200, 20, 0, 0)),
            genai_chat("client-a", "conformance run", 102, 598, TRACELOOP, tokens=(100, 10, 0, 0)),
            genai_chat("client-b", "conformance run", 107, 898, TRACELOOP, tokens=(200, 20, 0, 0)),
        ]
    )
    assert trace.llm_calls == 2
    assert trace.tokens == TokenUsage(300, 30)


def test_parallel_calls_without_usage_on_one_side_pair_by_overlap() -> None:
    # Framework spans without usage (a streamed call): each goes with the client span it overlaps most.
    trace = profile(
        [
            framework("conformance run", None, 0, 1000),
            oi_llm("chain-a", "conformance run", 100, 500, LANGCHAIN),
            oi_llm("chain-b", "conformance run", 480, 900, LANGCHAIN),
            genai_chat("client-a", "conformance run", 101, 499, TRACELOOP, tokens=(100, 10, 0, 0)),
            genai_chat("client-b", "conformance run", 481, 899, TRACELOOP, tokens=(200, 20, 0, 0)),
        ]
    )
    assert trace.llm_calls == 2
    assert counted(trace) == ["client-a", "client-b"]
    assert trace.tokens == TokenUsage(300, 30)


@pytest.mark.parametrize(
    ("client_model", "client_tokens", "client_scope"),
    [
        pytest.param("o4-mini", (99, 31, 0, 0), TRACELOOP, id="other-tokens"),
        pytest.param("gpt-4o", (1363, 31, 0, 0), TRACELOOP, id="other-model"),
        pytest.param("o4-mini", (1363, 31, 0, 0), LANGCHAIN, id="same-scope"),
        pytest.param("o4-mini", (1363, 31, 0, 0), "", id="scope-unknown"),
    ],
)
def test_overlapping_spans_that_may_not_be_one_call_count_twice(
    client_model: str, client_tokens: tuple[int, int, int, int], client_scope: str
) -> None:
    client = genai_chat("openai.chat", "conformance run", 101, 399, client_scope, tokens=client_tokens)
    client = dataclasses.replace(client, attributes={**client.attributes, "gen_ai.request.model": client_model})
    trace = profile(
        [
            framework("conformance run", None, 0, 500),
            oi_llm("ChatOpenAI", "conformance run", 100, 400, LANGCHAIN, tokens=(1363, 31, 0, 0)),
            client,
        ]
    )
    assert trace.llm_calls == 2


# --- LLM spans that call no model ------------------------------------------------------------------


def prepare_chat_with_tools(parent: str, start_ms: float, end_ms: float) -> SpanRecord:
    """LlamaIndex's ``OpenAI._prepare_chat_with_tools`` as OpenInference marks it: an LLM span, no exchange."""
    record = oi_llm(
        "OpenAI._prepare_chat_with_tools", parent, start_ms, end_ms, LLAMA_INDEX, model="o4-mini", messages=False
    )
    extra = {"input.value": "{}", "output.value": "{}", "llm.invocation_parameters": "{}", "llm.provider": "openai"}
    return dataclasses.replace(record, attributes={**record.attributes, **extra})


LLAMA_INDEX_STEP = [
    framework("FunctionAgent.run", None, 0, 1500, scope=LLAMA_INDEX),
    framework("run_agent_step", "FunctionAgent.run", 194, 807, scope=LLAMA_INDEX),
    prepare_chat_with_tools("run_agent_step", 195.1, 200.0),
    oi_llm("OpenAI.achat", "run_agent_step", 200.2, 806.4, LLAMA_INDEX, model="o4-mini", tokens=(1411, 31, 0, 9)),
]


def test_a_helper_marked_as_an_llm_span_beside_the_call_is_not_a_call() -> None:
    trace = profile(LLAMA_INDEX_STEP)
    assert trace.llm_calls == 1
    assert counted(trace) == ["OpenAI.achat"]
    assert trace.categories["llm"].count == 1
    assert by_name(trace)["OpenAI._prepare_chat_with_tools"].category == "llm"
    # only counting changes
    assert timings(trace) == timings(profile(unscoped(LLAMA_INDEX_STEP)))


def test_a_span_showing_no_exchange_alone_is_still_a_call() -> None:
    # A call whose instrumentation hides content and records no usage: nothing else answers for it.
    trace = profile(LLAMA_INDEX_STEP[:3])
    assert trace.llm_calls == 1


def test_a_failed_attempt_beside_its_retry_is_a_call() -> None:
    failed = dataclasses.replace(prepare_chat_with_tools("run_agent_step", 195, 200), status=StatusCode.ERROR)
    trace = profile([*LLAMA_INDEX_STEP[:2], failed, LLAMA_INDEX_STEP[3]])
    assert trace.llm_calls == 2


def test_a_span_showing_no_exchange_beside_another_model_s_call_is_a_call() -> None:
    other = oi_llm("OpenAI.achat", "run_agent_step", 200.2, 806.4, LLAMA_INDEX, model="gpt-4o", tokens=(10, 1, 0, 0))
    assert profile([*LLAMA_INDEX_STEP[:3], other]).llm_calls == 2


def test_a_span_naming_no_model_beside_the_call_is_not_a_call() -> None:
    helper = prepare_chat_with_tools("run_agent_step", 195.1, 200.0)
    without_model = {key: value for key, value in helper.attributes.items() if key != "llm.model_name"}
    helper = dataclasses.replace(helper, attributes=without_model)
    trace = profile([*LLAMA_INDEX_STEP[:2], helper, LLAMA_INDEX_STEP[3]])
    assert by_name(trace)["OpenAI._prepare_chat_with_tools"].model is None
    assert counted(trace) == ["OpenAI.achat"]


def test_a_span_showing_no_exchange_around_the_call_is_not_a_call() -> None:
    # Not an only child (the nested-pair rule does not apply): the wrapper still calls no model itself.
    trace = profile(
        [
            framework("FunctionAgent.run", None, 0, 1000, scope=LLAMA_INDEX),
            prepare_chat_with_tools("FunctionAgent.run", 100, 900),
            genai_chat("chat o4-mini", "OpenAI._prepare_chat_with_tools", 150, 700, OPENAI_V2, tokens=(5, 1, 0, 0)),
            framework("parse", "OpenAI._prepare_chat_with_tools", 700, 890, scope=LLAMA_INDEX),
        ]
    )
    assert trace.llm_calls == 1
    assert counted(trace) == ["chat o4-mini"]


@pytest.mark.parametrize(("running", "calls"), [(2, 2), (CROWD, CROWD), (CROWD + 1, CROWD + 2)])
def test_a_span_starting_among_a_crowd_of_another_instrumentation_s_calls_is_not_matched(
    running: int, calls: int
) -> None:
    # Parallel calls with equal usage, then a framework span starting while they run: beyond CROWD of
    # them there is no telling which one it describes, so it stays a call of its own.
    clients = [
        genai_chat(f"client-{i}", "conformance run", 100 + i, 400, TRACELOOP, tokens=(50, 5, 0, 0))
        for i in range(running)
    ]
    late = oi_llm("ChatOpenAI", "conformance run", 150, 390, LANGCHAIN, model="o4-mini", tokens=(50, 5, 0, 0))
    trace = profile([framework("conformance run", None, 0, 500), *clients, late])
    assert trace.llm_calls == calls


def test_a_genai_call_recording_no_usage_or_content_beside_another_call_is_a_call() -> None:
    # A streamed call without usage, content capture off: its GenAI operation and request model say a
    # request was made, so it stays a call beside the agent's other call of the same model.
    bare = span(
        "chat o4-mini",
        "run_agent_step",
        810 * MS,
        900 * MS,
        attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "o4-mini"},
        scope=OPENAI_V2,
    )
    assert profile([*LLAMA_INDEX_STEP[:2], LLAMA_INDEX_STEP[3], bare]).llm_calls == 2

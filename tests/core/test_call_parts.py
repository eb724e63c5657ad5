"""The spans that make up one call (``core.call_parts``): its HTTP request, a wrapper written beside it.

The span shapes are those real instrumentations wrote in the conformance suite's exports against the
bundled fake OpenAI server (names, kinds, scopes, attributes and timing in milliseconds): the OpenAI
client with Traceloop's instrumentation and httpx's under zero-code, and LangGraph's prebuilt ReAct
agent with OpenInference's LangChain instrumentation.
"""

from __future__ import annotations

from dataclasses import replace

from otel_agent_profiler.core import SpanRecord, TraceProfile
from otel_agent_profiler.core.call_parts import WRAPPER_SLACK_NS
from otel_agent_profiler.core.findings import find_all, find_sequential_llm_chains
from otel_agent_profiler.core.projection import projected_duration_scaled_ns
from otel_agent_profiler.core.schema import trace_to_dict
from tests.support.span_builders import CLIENT, by_name, profile, span, with_events

MS = 1_000_000
TRACELOOP = "opentelemetry.instrumentation.openai.v1"
HTTPX = "opentelemetry.instrumentation.httpx"
LANGCHAIN = "openinference.instrumentation.langchain"


def at(name: str, parent: str | None, start_ms: float, end_ms: float, **kwargs: object) -> SpanRecord:
    return span(name, parent, round(start_ms * MS), round(end_ms * MS), **kwargs)  # type: ignore[arg-type]


def openai_chat(name: str, parent: str, start_ms: float, end_ms: float, tokens: tuple[int, int]) -> SpanRecord:
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "o4-mini",
        "gen_ai.usage.input_tokens": tokens[0],
        "gen_ai.usage.output_tokens": tokens[1],
    }
    return at(name, parent, start_ms, end_ms, kind=CLIENT, attributes=attributes, scope=TRACELOOP)


def post(name: str, parent: str, start_ms: float, end_ms: float) -> SpanRecord:
    attributes = {"http.request.method": "POST", "url.full": "http://127.0.0.1:8000/v1/chat/completions"}
    return at(name, parent, start_ms, end_ms, kind=CLIENT, attributes=attributes, scope=HTTPX)


def tool(name: str, parent: str, start_ms: float, end_ms: float) -> SpanRecord:
    return at(name, parent, start_ms, end_ms, attributes={"gen_ai.operation.name": "execute_tool"})


#: The OpenAI client under zero-code with httpx instrumented: each openai.chat holds httpx's POST.
HTTPX_ZERO_CODE = [
    at("run", None, 0, 1197.3),
    at("agent", "run", 50.0, 958.4, attributes={"gen_ai.operation.name": "invoke_agent"}),
    openai_chat("chat1", "agent", 50.8, 270.3, (1362, 31)),
    post("POST1", "chat1", 58.8, 264.8),
    tool("execute_tool slow_search", "agent", 270.6, 771.9),
    tool("execute_tool fast_search", "agent", 270.6, 321.0),
    openai_chat("chat2", "agent", 772.2, 958.3, (1466, 34)),
    post("POST2", "chat2", 776.1, 956.7),
    # the streamed answer: httpx's span ends with the response headers, the chunks come later
    with_events(
        openai_chat("chat3", "run", 993.6, 1195.9, (23, 46)),
        ("gen_ai.content.completion.chunk", round(1149.9 * MS)),
        ("gen_ai.content.completion.chunk", round(1150.7 * MS)),
    ),
    post("POST3", "chat3", 996.9, 1000.3),
]


def llm_share(trace: TraceProfile) -> float:
    return trace.categories["llm"].critical_path_ns / trace.critical_path_ns


def test_the_http_request_of_a_call_is_the_call_s_time_not_the_application_s() -> None:
    trace = profile(HTTPX_ZERO_CODE)
    nodes = by_name(trace)
    for name, call in (("POST1", "chat1"), ("POST2", "chat2"), ("POST3", "chat3")):
        assert (nodes[name].category, nodes[name].operation, nodes[name].counted) == ("llm", "o4-mini", False)
        assert nodes[name].same_call_as is nodes[call]
    assert trace.llm_calls == 3
    assert trace.operations[("llm", "o4-mini")].count == 3
    # Before, the POST spans were internal: the LLM held 18% of the critical path, and the top finding blamed
    # 'POST' for the application's own code. Now only the root's own time is internal.
    assert trace.categories["internal"].critical_path_ns == nodes["run"].critical_path_ns
    assert 0.50 < llm_share(trace) < 0.51
    # The calls' duration is counted once, on their own spans.
    assert trace.categories["llm"].duration_ns == round((219.5 + 186.1 + 202.3) * MS)
    top = find_all(trace)[0]
    assert top.title.startswith("The 3 o4-mini calls hold"), top.title


def test_time_to_first_token_is_measured_from_the_request() -> None:
    nodes = by_name(profile(HTTPX_ZERO_CODE))
    # From httpx's request (996.9 ms), not from the client span's start (993.6 ms).
    assert nodes["chat3"].time_to_first_token_ns == round(1149.9 * MS) - round(996.9 * MS)


def test_an_http_span_below_anything_but_a_model_call_is_left_as_it_is() -> None:
    trace = profile(
        [
            at("run", None, 0, 100),
            tool("execute_tool fetch", "run", 0, 90),
            post("GET", "execute_tool fetch", 5, 85),
            # an HTTP span that is not a client's: a server's handling of a request
            at("handler", "run", 90, 99, attributes={"http.request.method": "GET"}),
        ]
    )
    nodes = by_name(trace)
    assert (nodes["GET"].category, nodes["GET"].same_call_as, nodes["GET"].counted) == ("internal", None, True)
    assert nodes["handler"].category == "internal"


# --- a wrapper written beside its call ------------------------------------------------------------------


def chain(name: str, parent: str, start_ms: float, end_ms: float) -> SpanRecord:
    return at(name, parent, start_ms, end_ms, attributes={"openinference.span.kind": "CHAIN"}, scope=LANGCHAIN)


def chat_openai(name: str, parent: str, start_ms: float, end_ms: float, tokens: tuple[int, int]) -> SpanRecord:
    attributes = {
        "openinference.span.kind": "LLM",
        "llm.model_name": "o4-mini",
        "llm.token_count.prompt": tokens[0],
        "llm.token_count.completion": tokens[1],
    }
    return at(name, parent, start_ms, end_ms, attributes=attributes, scope=LANGCHAIN)


#: LangGraph's create_react_agent with OpenInference: the node span call_model has no child; the
#: RunnableSequence holding the model's span is its sibling, starting 0.5 ms after it, ending 5.5 ms before.
LANGGRAPH_REACT = [
    at("run", None, 0, 1255.3),
    chain("LangGraph", "run", 102.1, 1047.7),
    chain("agent", "LangGraph", 104.4, 343.8),
    chain("call_model", "agent", 104.8, 339.3),
    chain("RunnableSequence", "agent", 105.3, 333.8),
    chain("Prompt", "RunnableSequence", 105.6, 105.8),
    chat_openai("ChatOpenAI", "RunnableSequence", 107.1, 332.4, (1363, 31)),
    chain("should_continue", "agent", 340.4, 341.4),
    chain("tools", "LangGraph", 345.5, 852.7),
    tool("execute_tool slow_search", "tools", 349.0, 851.8),
    chain("tools2", "LangGraph", 345.9, 402.0),
    tool("execute_tool fast_search", "tools2", 349.2, 401.0),
    chain("agent2", "LangGraph", 854.1, 1046.8),
    chain("call_model2", "agent2", 854.8, 1045.1),
    chain("RunnableSequence2", "agent2", 855.4, 1044.5),
    chat_openai("ChatOpenAI2", "RunnableSequence2", 857.2, 1043.4, (1467, 34)),
    chain("should_continue2", "agent2", 1045.8, 1046.3),
    chat_openai("ChatOpenAI3", "run", 1049.9, 1252.4, (23, 46)),
]


def test_a_node_span_beside_its_model_call_wraps_it() -> None:
    trace = profile(LANGGRAPH_REACT)
    nodes = by_name(trace)
    assert nodes["RunnableSequence"].parent is nodes["call_model"]
    assert nodes["call_model"].same_call_as is nodes["ChatOpenAI"]
    assert nodes["RunnableSequence"].depth == nodes["call_model"].depth + 1
    # call_model keeps only the framework's own time around the call (0.5 ms before it, 5.5 ms after).
    assert nodes["call_model"].self_time_ns == round(0.5 * MS) + round(5.5 * MS)
    # The model's span is on the critical path, with its tokens (before: 16% and 23 input tokens).
    assert nodes["ChatOpenAI"].on_critical_path and nodes["ChatOpenAI2"].on_critical_path
    assert 0.48 < llm_share(trace) < 0.50
    assert trace.critical_path_tokens.input == 1363 + 1467 + 23
    top = find_all(trace)[0]
    assert top.title.startswith("The 3 o4-mini calls hold"), top.title
    # The JSON says which spans make one call; the recorded parent stays the recorded one.
    spans = {s["name"]: s for s in trace_to_dict(trace)["spans"]}
    assert spans["call_model"]["same_call_as"] == nodes["ChatOpenAI"].span_id
    assert spans["RunnableSequence"]["parent_span_id"] == nodes["agent"].span_id


def shifted(records: list[SpanRecord], name: str, start_ms: float, end_ms: float) -> list[SpanRecord]:
    return [
        at(name, "agent", start_ms, end_ms, attributes=dict(r.attributes)) if r.name == name else r for r in records
    ]


def test_shapes_that_are_not_a_wrapper_are_left_as_they_are() -> None:
    slack_ms = WRAPPER_SLACK_NS / MS
    cases = {
        # starting further before the call than a framework's own work takes
        "starts-early": shifted(LANGGRAPH_REACT, "call_model", 105.3 - slack_ms - 1, 339.3),
        # ending further after it
        "ends-late": shifted(LANGGRAPH_REACT, "call_model", 104.8, 333.8 + slack_ms + 1),
        # not covering it whole
        "ends-inside": shifted(LANGGRAPH_REACT, "call_model", 104.8, 330.0),
        # a second sibling inside it
        "two-inside": [*LANGGRAPH_REACT, chain("other", "agent", 106.0, 107.0)],
        # with a child of its own
        "has-child": [*LANGGRAPH_REACT, chain("own", "call_model", 106.0, 107.0)],
    }
    for case, records in cases.items():
        nodes = by_name(profile(records))
        assert nodes["RunnableSequence"].parent is nodes["agent"], case
        assert nodes["call_model"].same_call_as is None, case
    # a sibling holding no call is not wrapped either
    no_call = [r for r in LANGGRAPH_REACT if r.name != "ChatOpenAI"]
    nodes = by_name(profile(no_call))
    assert nodes["RunnableSequence"].parent is nodes["agent"]


def test_findings_name_each_call_once_however_many_spans_describe_it() -> None:
    # Zero-code pydantic-ai: its chat span, the openai-v2 span and Traceloop's span nest for each call.
    records = [
        at("run", None, 0, 1720),
        at("agent", "run", 0, 1710, attributes={"gen_ai.operation.name": "invoke_agent"}),
    ]
    for index in range(4):
        start = 10 + index * 420
        records += [
            openai_chat(f"chat{index}", "agent", start, start + 400, (1000, 30)),
            openai_chat(f"v2-{index}", f"chat{index}", start + 1, start + 399, (1000, 30)),
            openai_chat(f"openai.chat{index}", f"v2-{index}", start + 2, start + 398, (1000, 30)),
        ]
    trace = profile(records)
    assert trace.llm_calls == 4
    titles = [finding.title for finding in find_all(trace)]
    assert titles[0].startswith("The 4 o4-mini calls hold"), titles
    (chain,) = find_sequential_llm_chains(trace)
    assert chain.title.startswith("4 LLM calls under 'agent' ran one after another"), chain.title


# --- a request written beside its call ------------------------------------------------------------------


def old_post(name: str, parent: str, start_ms: float, end_ms: float, path: str = "/v1/chat/completions") -> SpanRecord:
    """httpx's request span as opentelemetry-instrumentation-httpx 0.66b2 writes it by default (old conventions)."""
    attributes = {"http.method": "POST", "http.url": f"http://127.0.0.1:44873{path}", "http.status_code": 200}
    return at(name, parent, start_ms, end_ms, kind=CLIENT, attributes=attributes, scope=HTTPX)


#: A hand-written LangGraph graph with OpenInference's LangChain instrumentation, installed in code, and
#: httpx's: the ChatOpenAI span is not the current span when the client sends, so each POST is the root's child.
LANGGRAPH_GRAPH_HTTPX = [
    at("run", None, 0, 1210.3),
    chain("LangGraph", "run", 4.0, 1006.0),
    chain("model", "LangGraph", 7.0, 307.0),
    chat_openai("ChatOpenAI", "model", 90.0, 305.0, (1363, 31)),
    chain("after_model", "model", 306.0, 307.0),
    chain("tools", "LangGraph", 308.0, 812.0),
    tool("execute_tool slow_search", "tools", 309.0, 811.0),
    tool("execute_tool fast_search", "tools", 309.0, 360.0),
    chain("model2", "LangGraph", 814.0, 1006.0),
    chat_openai("ChatOpenAI2", "model2", 816.0, 1003.0, (1467, 34)),
    old_post("POST1", "run", 96.0, 299.0),
    old_post("POST2", "run", 822.0, 1002.0),
    chat_openai("ChatOpenAI3", "run", 1008.0, 1208.0, (23, 46)),
    old_post("POST3", "run", 1010.0, 1012.0),
]


def test_a_request_written_beside_its_call_is_the_call_s_time() -> None:
    trace = profile(LANGGRAPH_GRAPH_HTTPX)
    nodes = by_name(trace)
    for name, call in (("POST1", "ChatOpenAI"), ("POST2", "ChatOpenAI2"), ("POST3", "ChatOpenAI3")):
        assert (nodes[name].category, nodes[name].counted, nodes[name].same_call_as) == ("llm", False, nodes[call])
    assert trace.llm_calls == 3
    # Before, the POST spans were internal (0.38 s of the application's own time), and the top finding said
    # removing the calls' time would end the trace only 201 ms sooner, as if the requests ran beside them.
    assert trace.categories["internal"].self_time_ns == nodes["run"].self_time_ns
    assert trace.categories["llm"].self_time_ns == round((215.0 + 187.0 + 200.0) * MS)
    top = find_all(trace)[0]
    assert top.title.startswith("The 3 o4-mini calls hold"), top.title
    saving = trace.duration_ns - top.evidence["projected_duration_without_ns"]
    assert saving > round(580 * MS), top.title


def test_a_request_beside_its_call_is_part_of_it_in_an_export_the_live_profiler_enriched() -> None:
    # the live profiler wrote its verdict on the request: analysed again, it is still the call's request
    records = [
        replace(record, attributes={**record.attributes, "agent_profiler.category": "llm"})
        if record.name.startswith("POST")
        else record
        for record in LANGGRAPH_GRAPH_HTTPX
    ]
    trace = profile(records)
    nodes = by_name(trace)
    for name, call in (("POST1", "ChatOpenAI"), ("POST2", "ChatOpenAI2"), ("POST3", "ChatOpenAI3")):
        assert (nodes[name].model, nodes[name].counted, nodes[name].same_call_as) == ("o4-mini", False, nodes[call])
    assert trace.llm_calls == 3


def test_a_request_beside_calls_is_left_as_it_is_unless_it_asks_the_one_model_call_around_it() -> None:
    records = [
        at("run", None, 0, 1000),
        chat_openai("ChatOpenAI", "run", 0, 400, (10, 5)),
        chat_openai("ChatOpenAI2", "run", 100, 600, (10, 5)),
        old_post("POST during two calls", "run", 150, 350),
        old_post("GET of a tool", "run", 450, 550, path="/search"),
        old_post("POST after the calls", "run", 700, 800),
    ]
    nodes = by_name(profile(records))
    for name in ("POST during two calls", "GET of a tool", "POST after the calls"):
        assert (nodes[name].category, nodes[name].same_call_as, nodes[name].counted) == ("internal", None, True)


def test_a_request_beside_its_call_moves_with_the_call_in_the_projection() -> None:
    trace = profile(LANGGRAPH_GRAPH_HTTPX)
    without_requests = profile([record for record in LANGGRAPH_GRAPH_HTTPX if not record.name.startswith("POST")])
    nodes, plain = by_name(trace), by_name(without_requests)
    for call, post_name, length_ms in (("ChatOpenAI", "POST1", 215.0), ("ChatOpenAI2", "POST2", 187.0)):
        # Removing the call with its request: the whole call is saved, the request no longer holds the run up.
        removed = projected_duration_scaled_ns(trace, {nodes[call]: 0.0, nodes[post_name]: 0.0})
        assert trace.duration_ns - removed == round(length_ms * MS), call
        for scale in (0.0, 0.5):
            # Whether the request is scaled with its call or not, it schedules as if it were not there.
            alone = projected_duration_scaled_ns(trace, {nodes[call]: scale})
            assert alone == projected_duration_scaled_ns(without_requests, {plain[call]: scale}), (call, scale)
    assert projected_duration_scaled_ns(trace, {}) == trace.duration_ns


def test_a_request_below_its_call_is_scheduled_as_the_call_s_child() -> None:
    trace = profile(HTTPX_ZERO_CODE)
    nodes = by_name(trace)
    # chat1 (50.8-270.3 ms) with its POST removed: the tools after it start 219.5 ms sooner.
    removed = projected_duration_scaled_ns(trace, {nodes["chat1"]: 0.0, nodes["POST1"]: 0.0})
    assert trace.duration_ns - removed == round(219.5 * MS)
    # chat1's own time alone (14 ms around its POST): the POST below it still takes its 206 ms.
    assert trace.duration_ns - projected_duration_scaled_ns(trace, {nodes["chat1"]: 0.0}) == round(13.5 * MS)

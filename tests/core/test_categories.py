"""Span categories: one table row per classification rule and value, then the precedence between rules.

The rules are checked in a fixed order and the first match wins:

1. an explicit ``agent_profiler.category`` attribute holding a valid category;
2. ``gen_ai.operation.name`` (known values, or any value ending in ``_memory``);
3. ``openinference.span.kind``;
4. ``traceloop.span.kind``, then ``llm.request.type``, then ``mcp.method.name == "tools/call"``,
   then a Google ADK ``call_llm`` span naming a model, then Haystack's agent run and tool spans, then
   ``db.system`` on a span that mentions memory;
5. otherwise ``internal``.
"""

from __future__ import annotations

import ast
import inspect

import pytest

from otel_agent_profiler.core import CATEGORIES, CATEGORY_OVERRIDE_ATTRIBUTE, categories, classify
from tests.support.span_builders import by_name, profile, span

OVERRIDE = CATEGORY_OVERRIDE_ATTRIBUTE
GENAI_OP = "gen_ai.operation.name"
OI_KIND = "openinference.span.kind"
TL_KIND = "traceloop.span.kind"
TL_REQUEST = "llm.request.type"
MCP_METHOD = "mcp.method.name"
DB_SYSTEM = "db.system"


def case(case_id: str, attributes: dict[str, object], expected: str, name: str = "span") -> object:
    return pytest.param(name, attributes, expected, id=case_id)


RULE_CASES = [
    # 1. The explicit override, for every category.
    *(case(f"override={category}", {OVERRIDE: category}, category) for category in CATEGORIES),
    # 2. gen_ai.operation.name.
    case("gen_ai.operation.name=chat", {GENAI_OP: "chat"}, "llm"),
    case("gen_ai.operation.name=text_completion", {GENAI_OP: "text_completion"}, "llm"),
    case("gen_ai.operation.name=generate_content", {GENAI_OP: "generate_content"}, "llm"),
    case("gen_ai.operation.name=llm_request", {GENAI_OP: "llm_request"}, "llm"),
    case("gen_ai.operation.name=embeddings", {GENAI_OP: "embeddings"}, "embedding"),
    case("gen_ai.operation.name=execute_tool", {GENAI_OP: "execute_tool"}, "tool"),
    case("gen_ai.operation.name=invoke_agent", {GENAI_OP: "invoke_agent"}, "agent"),
    case("gen_ai.operation.name=create_agent", {GENAI_OP: "create_agent"}, "agent"),
    case("gen_ai.operation.name=invoke_workflow", {GENAI_OP: "invoke_workflow"}, "agent"),
    case("gen_ai.operation.name=retrieval", {GENAI_OP: "retrieval"}, "retrieval"),
    case("gen_ai.operation.name=vector_db_retrieve", {GENAI_OP: "vector_db_retrieve"}, "retrieval"),
    case("gen_ai.operation.name=search_memory", {GENAI_OP: "search_memory"}, "memory"),
    case("gen_ai.operation.name=update_memory", {GENAI_OP: "update_memory"}, "memory"),
    case("gen_ai.operation.name=create_memory", {GENAI_OP: "create_memory"}, "memory"),
    case("gen_ai.operation.name=unknown-falls-through", {GENAI_OP: "frobnicate"}, "internal"),
    case("gen_ai.operation.name=memory-without-suffix", {GENAI_OP: "memory"}, "internal"),
    # 3. openinference.span.kind.
    case("openinference.span.kind=LLM", {OI_KIND: "LLM"}, "llm"),
    case("openinference.span.kind=EMBEDDING", {OI_KIND: "EMBEDDING"}, "embedding"),
    case("openinference.span.kind=TOOL", {OI_KIND: "TOOL"}, "tool"),
    case("openinference.span.kind=AGENT", {OI_KIND: "AGENT"}, "agent"),
    case("openinference.span.kind=CHAIN", {OI_KIND: "CHAIN"}, "agent"),
    case("openinference.span.kind=RETRIEVER", {OI_KIND: "RETRIEVER"}, "retrieval"),
    case("openinference.span.kind=RERANKER", {OI_KIND: "RERANKER"}, "retrieval"),
    case("openinference.span.kind=GUARDRAIL-falls-through", {OI_KIND: "GUARDRAIL"}, "internal"),
    case("openinference.span.kind=EVALUATOR-falls-through", {OI_KIND: "EVALUATOR"}, "internal"),
    # 4a. traceloop.span.kind.
    case("traceloop.span.kind=tool", {TL_KIND: "tool"}, "tool"),
    case("traceloop.span.kind=agent", {TL_KIND: "agent"}, "agent"),
    case("traceloop.span.kind=workflow", {TL_KIND: "workflow"}, "agent"),
    case("traceloop.span.kind=task-falls-through", {TL_KIND: "task"}, "internal"),
    case("traceloop.span.kind=unknown-falls-through", {TL_KIND: "something_else"}, "internal"),
    # 4b. llm.request.type.
    case("llm.request.type=chat", {TL_REQUEST: "chat"}, "llm"),
    case("llm.request.type=completion", {TL_REQUEST: "completion"}, "llm"),
    case("llm.request.type=embedding", {TL_REQUEST: "embedding"}, "embedding"),
    case("llm.request.type=unknown-falls-through", {TL_REQUEST: "rerank"}, "internal"),
    # 4c. mcp.method.name.
    case("mcp.method.name=tools/call", {MCP_METHOD: "tools/call"}, "tool"),
    case("mcp.method.name=tools/list-falls-through", {MCP_METHOD: "tools/list"}, "internal"),
    case("mcp.method.name=initialize-falls-through", {MCP_METHOD: "initialize"}, "internal"),
    # 4d. Google ADK 1.x: model calls are ``call_llm`` spans with the model and usage, no operation name.
    case(
        "adk-call_llm",
        {
            "gen_ai.system": "gcp.vertex.agent",
            "gen_ai.request.model": "gemini-2.0-flash",
            "gen_ai.usage.input_tokens": 1024,
            "gen_ai.usage.output_tokens": 30,
            "gcp.vertex.agent.llm_request": "{}",
        },
        "llm",
        name="call_llm",
    ),
    case("call_llm-naming-no-model-falls-through", {"gen_ai.system": "gcp.vertex.agent"}, "internal", "call_llm"),
    case("model-on-another-name-falls-through", {"gen_ai.request.model": "gpt-4o"}, "internal", "call_model"),
    # 4e. Haystack's tracer: the agent's run, and a step's tool call naming its tool (tags as Haystack 3.4 writes them).
    case(
        "haystack-agent-run",
        {"haystack.agent.max_steps": 100, "haystack.agent.steps_taken": 2},
        "agent",
        "haystack.agent.run",
    ),
    case(
        "haystack-tool-call",
        {"haystack.tool.name": "slow_search", "haystack.tool.description": "Search the slow source."},
        "tool",
        name="haystack.agent.step.tool",
    ),
    case("haystack-tool-span-without-tool-name-falls-through", {}, "internal", name="haystack.agent.step.tool"),
    case("haystack-model-call-wrapper-falls-through", {}, "internal", name="haystack.agent.step.llm"),
    # 4f. db.system on a span that says "memory" (in its name, an attribute key or a string value).
    case("db.system+memory-in-name", {DB_SYSTEM: "redis"}, "memory", name="memory.search"),
    case("db.system+memory-in-name-any-case", {DB_SYSTEM: "redis"}, "memory", name="Load Memory"),
    case("db.system+memory-in-attribute-key", {DB_SYSTEM: "postgresql", "agent.memory.kind": "episodic"}, "memory"),
    case("db.system+memory-in-attribute-value", {DB_SYSTEM: "qdrant", "db.collection.name": "agent_memory"}, "memory"),
    case("db.system-without-memory", {DB_SYSTEM: "postgresql", "db.collection.name": "orders"}, "internal", "SELECT"),
    case("memory-in-name-without-db.system", {}, "internal", name="load memory"),
    # 5. Nothing recognised.
    case("no-attributes", {}, "internal"),
    case("llm-looking-name-only", {}, "internal", name="chat gpt-4o"),
    case("unrelated-attributes", {"http.method": "GET", "http.route": "/v1/chat"}, "internal", name="GET"),
]


@pytest.mark.parametrize(("name", "attributes", "expected"), RULE_CASES)
def test_classification_rules(name: str, attributes: dict[str, object], expected: str) -> None:
    assert classify(name, attributes) == expected


PRECEDENCE_CASES = [
    # The override beats everything else the span says.
    case(
        "override-beats-all",
        {
            OVERRIDE: "retrieval",
            GENAI_OP: "chat",
            OI_KIND: "LLM",
            TL_KIND: "tool",
            TL_REQUEST: "chat",
            MCP_METHOD: "tools/call",
            DB_SYSTEM: "redis",
        },
        "retrieval",
        name="memory.lookup",
    ),
    case("override-internal-beats-gen_ai", {OVERRIDE: "internal", GENAI_OP: "chat"}, "internal"),
    # An invalid override is ignored and the next rule decides.
    case("invalid-override-ignored", {OVERRIDE: "database", GENAI_OP: "execute_tool"}, "tool"),
    case("invalid-override-wrong-case-ignored", {OVERRIDE: "LLM", OI_KIND: "TOOL"}, "tool"),
    case("invalid-override-empty-ignored", {OVERRIDE: "", TL_KIND: "agent"}, "agent"),
    case("invalid-override-non-string-ignored", {OVERRIDE: 3, GENAI_OP: "embeddings"}, "embedding"),
    case("invalid-override-alone-is-internal", {OVERRIDE: "gpu"}, "internal"),
    # gen_ai.operation.name beats openinference.span.kind and everything after it.
    case("gen_ai-beats-openinference", {GENAI_OP: "execute_tool", OI_KIND: "LLM"}, "tool"),
    case("gen_ai-chat-beats-openinference-chain", {GENAI_OP: "chat", OI_KIND: "CHAIN"}, "llm"),
    case("gen_ai-memory-beats-openinference", {GENAI_OP: "search_memory", OI_KIND: "RETRIEVER"}, "memory"),
    case("gen_ai-beats-traceloop", {GENAI_OP: "invoke_agent", TL_KIND: "tool", TL_REQUEST: "chat"}, "agent"),
    # An unknown gen_ai.operation.name falls through to the next convention.
    case("unknown-gen_ai-falls-to-openinference", {GENAI_OP: "frobnicate", OI_KIND: "LLM"}, "llm"),
    case("unknown-gen_ai-falls-to-traceloop", {GENAI_OP: "frobnicate", TL_KIND: "workflow"}, "agent"),
    # openinference.span.kind beats the Traceloop attributes.
    case("openinference-beats-traceloop-kind", {OI_KIND: "TOOL", TL_KIND: "agent"}, "tool"),
    case("openinference-beats-llm.request.type", {OI_KIND: "RETRIEVER", TL_REQUEST: "chat"}, "retrieval"),
    case("guardrail-falls-to-traceloop", {OI_KIND: "GUARDRAIL", TL_KIND: "tool"}, "tool"),
    # traceloop.span.kind beats llm.request.type; an unrecognised kind falls through to it.
    case("traceloop-kind-beats-request-type", {TL_KIND: "tool", TL_REQUEST: "chat"}, "tool"),
    case("traceloop-task-falls-to-request-type", {TL_KIND: "task", TL_REQUEST: "chat"}, "llm"),
    # llm.request.type beats mcp.method.name, which beats database memory.
    case("request-type-beats-mcp", {TL_REQUEST: "embedding", MCP_METHOD: "tools/call"}, "embedding"),
    case("mcp-beats-db-memory", {MCP_METHOD: "tools/call", DB_SYSTEM: "redis"}, "tool", name="memory.read"),
    case("unknown-request-type-falls-to-mcp", {TL_REQUEST: "rerank", MCP_METHOD: "tools/call"}, "tool"),
    case("task-falls-to-db-memory", {TL_KIND: "task", DB_SYSTEM: "redis"}, "memory", name="memory.write"),
]


@pytest.mark.parametrize(("name", "attributes", "expected"), PRECEDENCE_CASES)
def test_precedence(name: str, attributes: dict[str, object], expected: str) -> None:
    assert classify(name, attributes) == expected


def test_categories_are_the_seven_in_report_order() -> None:
    assert CATEGORIES == ("llm", "embedding", "tool", "agent", "retrieval", "memory", "internal")


def test_every_span_of_a_profile_gets_its_category() -> None:
    trace = profile(
        [
            span("root", None, 0, 100, attributes={GENAI_OP: "invoke_agent"}),
            span("llm", "root", 10, 20, attributes={OI_KIND: "LLM"}),
            span("emb", "root", 20, 30, attributes={TL_REQUEST: "embedding"}),
            span("tool", "root", 30, 40, attributes={MCP_METHOD: "tools/call"}),
            span("ret", "root", 40, 50, attributes={OI_KIND: "RERANKER"}),
            span("mem", "root", 50, 60, attributes={DB_SYSTEM: "redis", "agent.memory.kind": "semantic"}),
            span("forced", "root", 60, 70, attributes={OVERRIDE: "tool", GENAI_OP: "chat"}),
            span("plain", "root", 70, 80),
        ]
    )
    assert {name: node.category for name, node in by_name(trace).items()} == {
        "root": "agent",
        "llm": "llm",
        "emb": "embedding",
        "tool": "tool",
        "ret": "retrieval",
        "mem": "memory",
        "forced": "tool",
        "plain": "internal",
    }
    assert {name: stats.count for name, stats in trace.categories.items()} == {
        "llm": 1,
        "embedding": 1,
        "tool": 2,
        "agent": 1,
        "retrieval": 1,
        "memory": 1,
        "internal": 1,
    }


def _classify_reads() -> tuple[set[str], set[str]]:
    """The attribute keys ``classify`` reads by name, and the span names it compares with."""
    tree = ast.parse(inspect.getsource(categories.classify))
    keys: set[str] = set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            if node.args and isinstance(node.args[0], ast.Constant):
                keys.add(node.args[0].value)
        elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant):
            if any(isinstance(op, ast.In) for op in node.ops):
                keys.add(node.left.value)
        elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id == "name":
            names.update(c.value for c in node.comparators if isinstance(c, ast.Constant))
    return keys, names


def test_the_shortcut_to_internal_knows_every_key_and_name_the_rules_read() -> None:
    # classify answers "internal" at once for a span with none of _LATER_RULE_KEYS whose name is not in
    # _NAMED_BY_NAME_ALONE: a rule reading another key, or deciding by a name alone, must be added there.
    keys, names = _classify_reads()
    read_before_the_shortcut = {CATEGORY_OVERRIDE_ATTRIBUTE, "gen_ai.operation.name"}
    assert keys - read_before_the_shortcut <= categories._LATER_RULE_KEYS
    assert {key for key, _, _ in categories._ONE_ATTRIBUTE_CONVENTIONS} <= categories._LATER_RULE_KEYS
    # Of these, only haystack.agent.run needs no attribute; a new name here must be looked at.
    assert names == {"call_llm", "haystack.agent.run", "haystack.agent.step.tool"}
    named_alone = categories._NAMED_BY_NAME_ALONE
    assert named_alone == {"haystack.agent.run"}


@pytest.mark.parametrize("key", sorted(categories._LATER_RULE_KEYS))
@pytest.mark.parametrize("name", ["span", "call_llm", "haystack.agent.step.tool", "memory"])
def test_the_shortcut_gives_what_the_rules_give(key: str, name: str) -> None:
    # With a rule key present the rules decide; without, the shortcut: both must agree with the rules'
    # answer for a span carrying only unrelated keys.
    for value in ("LLM", "tool", "chat", "tools/call", "postgresql", "agent_memory", 1):
        attributes = {key: value, "http.request.method": "POST"}
        expected = _rules_only(name, attributes)
        assert classify(name, attributes) == expected
    assert classify(name, {"http.request.method": "POST"}) == _rules_only(name, {"http.request.method": "POST"})


def _rules_only(name: str, attributes: dict[str, object]) -> str:
    # classify with the shortcut made never to apply: a key it looks for is added with a value no rule
    # takes (no convention's table holds it, it is no MCP tool call, and it says nothing of memory).
    probe = "mcp.method.name" if "mcp.method.name" not in attributes else "openinference.span.kind"
    return classify(name, {**attributes, probe: "-"})

"""Which kind of work a span is: llm, embedding, tool, agent, retrieval, memory or internal.

Agent frameworks describe their spans with one of several conventions (OpenTelemetry GenAI,
OpenInference, Traceloop, MCP). The rules are checked in a fixed order and the first match
wins, so a span carrying several conventions is classified the same way every time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .records import AttributeValue

LLM = "llm"
EMBEDDING = "embedding"
TOOL = "tool"
AGENT = "agent"
RETRIEVAL = "retrieval"
MEMORY = "memory"
INTERNAL = "internal"

#: Every category, in the order reports list them.
CATEGORIES: tuple[str, ...] = (LLM, EMBEDDING, TOOL, AGENT, RETRIEVAL, MEMORY, INTERNAL)

#: Attribute that lets the user (or our decorators) force a category. It stays in the core, unlike
#: the attributes the profiler records for itself (``adapters/recorded_attributes.py``): it is an
#: input convention the classification understands, as it understands the GenAI conventions, and
#: public API (``tests/project/test_layout.py`` lists the ``agent_profiler.`` names the core may hold).
CATEGORY_OVERRIDE_ATTRIBUTE = "agent_profiler.category"

_GENAI_OPERATIONS: Mapping[str, str] = {
    "chat": LLM,
    "text_completion": LLM,
    "generate_content": LLM,
    "llm_request": LLM,
    "embeddings": EMBEDDING,
    "execute_tool": TOOL,
    "invoke_agent": AGENT,
    "create_agent": AGENT,
    "invoke_workflow": AGENT,
    "retrieval": RETRIEVAL,
    "vector_db_retrieve": RETRIEVAL,
}

_OPENINFERENCE_KINDS: Mapping[str, str] = {
    "LLM": LLM,
    "EMBEDDING": EMBEDDING,
    "TOOL": TOOL,
    "AGENT": AGENT,
    "CHAIN": AGENT,
    "RETRIEVER": RETRIEVAL,
    "RERANKER": RETRIEVAL,
}

_TRACELOOP_KINDS: Mapping[str, str] = {"tool": TOOL, "agent": AGENT, "workflow": AGENT}

_TRACELOOP_REQUEST_TYPES: Mapping[str, str] = {"chat": LLM, "completion": LLM, "embedding": EMBEDDING}

_CATEGORY_SET = frozenset(CATEGORIES)

#: Conventions that name the kind of work in one attribute, in the order they are checked after the
#: GenAI operation name: the attribute, its values' categories, and how a value is spelled in the table.
_ONE_ATTRIBUTE_CONVENTIONS: tuple[tuple[str, Mapping[str, str], Callable[[str], str]], ...] = (
    ("openinference.span.kind", _OPENINFERENCE_KINDS, str.upper),
    ("traceloop.span.kind", _TRACELOOP_KINDS, str),
    ("llm.request.type", _TRACELOOP_REQUEST_TYPES, str),
)


#: Every attribute key the rules after the GenAI operation name read (``_mentions_memory`` reads any
#: key, but only of a database span): a span with none of them is internal, unless its name alone decides.
#: A new rule's keys belong here (tests/core/test_categories.py checks).
_LATER_RULE_KEYS = frozenset(
    {
        *(key for key, _, _ in _ONE_ATTRIBUTE_CONVENTIONS),
        "gen_ai.request.model",
        "gcp.vertex.agent.llm_request",
        "mcp.method.name",
        "haystack.tool.name",
        "db.system",
        "db.system.name",
    }
)
#: The span names those rules decide a category by without any attribute.
_NAMED_BY_NAME_ALONE = frozenset({"haystack.agent.run"})


def classify(name: str, attributes: Mapping[str, AttributeValue]) -> str:
    """Return the category of a span from its name and attributes."""
    override = attributes.get(CATEGORY_OVERRIDE_ATTRIBUTE)
    if isinstance(override, str) and override in _CATEGORY_SET:
        return override

    operation = attributes.get("gen_ai.operation.name")
    if isinstance(operation, str):
        category = _GENAI_OPERATIONS.get(operation)
        if category is not None:
            return category
        if operation.endswith("_memory"):
            return MEMORY

    # Most other spans (HTTP requests, a framework's own steps) carry none of the keys the rules below
    # read: one set check answers for them instead of each rule in turn.
    if attributes.keys().isdisjoint(_LATER_RULE_KEYS) and name not in _NAMED_BY_NAME_ALONE:
        return INTERNAL

    for key, categories, normalized in _ONE_ATTRIBUTE_CONVENTIONS:
        value = attributes.get(key)
        if isinstance(value, str):
            category = categories.get(normalized(value))
            if category is not None:
                return category

    # Google ADK 1.x writes each model call as a ``call_llm`` span with the model and token usage but
    # no operation name.
    if name == "call_llm" and ("gen_ai.request.model" in attributes or "gcp.vertex.agent.llm_request" in attributes):
        return LLM

    if attributes.get("mcp.method.name") == "tools/call":
        return TOOL

    # Haystack's OpenTelemetry tracer (opentelemetry-haystack) tags its spans with Haystack's own keys and
    # no GenAI ones: the agent's run, and each tool call of a step (the model call inside
    # ``haystack.agent.step.llm`` is the OpenAI client's span, when that is instrumented).
    if name == "haystack.agent.run":
        return AGENT
    if name == "haystack.agent.step.tool" and "haystack.tool.name" in attributes:
        return TOOL

    is_database = "db.system" in attributes or "db.system.name" in attributes
    if is_database and _mentions_memory(name, attributes):
        return MEMORY

    return INTERNAL


def _mentions_memory(name: str, attributes: Mapping[str, AttributeValue]) -> bool:
    # A database span is agent memory when the span says so: in its name, an attribute key
    # (e.g. ``agent.memory.kind``) or a string value such as the collection name.
    if "memory" in name.lower():
        return True
    for key, value in attributes.items():
        if "memory" in key.lower():
            return True
        if isinstance(value, str) and "memory" in value.lower():
            return True
    return False

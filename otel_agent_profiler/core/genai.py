"""Reading LLM facts off span attributes: model, operation name, token usage, time to first token.

Each fact has several spellings across the GenAI, OpenInference and Traceloop conventions
(and older releases of each); the first spelling present wins.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .categories import AGENT, EMBEDDING, LLM, RETRIEVAL, TOOL
from .fast_pickle import pickled_by_fields
from .models import model_family
from .records import AttributeValue, SpanEvent, seconds_as_ns

_MODEL_KEYS = ("gen_ai.request.model", "gen_ai.response.model", "llm.model_name", "llm.request.model")
_TOOL_NAME_KEYS = ("gen_ai.tool.name", "tool.name", "traceloop.entity.name", "haystack.tool.name")
_AGENT_NAME_KEYS = ("gen_ai.agent.name", "gen_ai.workflow.name", "agent.name", "traceloop.entity.name")
_RETRIEVAL_NAME_KEYS = ("gen_ai.data_source.id", "db.collection.name")

_INPUT_TOKEN_KEYS = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt")
_OUTPUT_TOKEN_KEYS = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion")
_CACHED_INPUT_TOKEN_KEYS = (
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_read_input_tokens",
    "llm.token_count.prompt_details.cache_read",
    # pydantic-ai, besides gen_ai.usage.cache_read.input_tokens
    "gen_ai.usage.details.cache_read_tokens",
)
_REASONING_TOKEN_KEYS = (
    "gen_ai.usage.reasoning.output_tokens",
    "gen_ai.usage.reasoning_tokens",
    # pydantic-ai copies the provider's usage details under gen_ai.usage.details.*
    "gen_ai.usage.details.reasoning_tokens",
    "llm.token_count.completion_details.reasoning",
)
#: Every spelling of the cached input and reasoning counts.
_DETAIL_TOKEN_KEYS = frozenset(_CACHED_INPUT_TOKEN_KEYS + _REASONING_TOKEN_KEYS)
_STREAMING_KEYS = ("gen_ai.is_streaming", "llm.is_streaming", "gen_ai.request.stream")
# Seconds, as span attributes: the GenAI convention's attribute, and the name of its metric,
# which pydantic-ai writes on the span as well.
_TTFC_SECONDS_KEYS = ("gen_ai.response.time_to_first_chunk", "gen_ai.client.operation.time_to_first_chunk")
# Milliseconds, as a span attribute: Strands writes the server's time to first token on each streamed call
# under the name of the GenAI metric (whose histogram is in seconds; the attribute is not).
_TTFT_MILLISECONDS_KEYS = ("gen_ai.server.time_to_first_token",)

#: Span events that mark a streamed chunk arriving (OpenLLMetry, OpenInference, our decorators).
#: Ours, ``agent_profiler.chunk``, is an input convention like the others, so it stays in the core.
CHUNK_EVENT_NAMES = frozenset(
    {"gen_ai.content.completion.chunk", "First Token Stream Event", "gen_ai.chunk", "agent_profiler.chunk"}
)


@pickled_by_fields
@dataclass(slots=True)
class TokenUsage:
    """Token counts of one or more LLM calls. Cached input tokens are part of ``input``."""

    input: int = 0
    output: int = 0
    cached_input: int = 0
    reasoning: int = 0

    def add(self, other: TokenUsage) -> None:
        self.input += other.input
        self.output += other.output
        self.cached_input += other.cached_input
        self.reasoning += other.reasoning

    @property
    def total(self) -> int:
        return self.input + self.output

    def is_empty(self) -> bool:
        return not (self.input or self.output or self.cached_input or self.reasoning)

    def to_dict(self) -> dict[str, int]:
        return {
            "input": self.input,
            "output": self.output,
            "cached_input": self.cached_input,
            "reasoning": self.reasoning,
            "total": self.total,
        }


def _first_str(attributes: Mapping[str, AttributeValue], keys: Sequence[str]) -> str | None:
    # The first key is by far the most common spelling: check it without the loop.
    value = attributes.get(keys[0])
    if type(value) is str and value:
        return value
    for key in keys:
        value = attributes.get(key)
        if isinstance(value, str) and value:
            return value
    return None


# Token counts are 64-bit integers wherever they are recorded (OTLP's intValue, Jaeger's int64):
# a count beyond that, like a NaN or an infinity, is corrupt data, not usage.
_COUNT_LIMIT = 2**63


def _usable_count(value: int) -> bool:
    return -_COUNT_LIMIT < value < _COUNT_LIMIT


def _first_int(attributes: Mapping[str, AttributeValue], keys: Sequence[str], unusable: list[str] | None) -> int:
    for key in keys:
        value = attributes.get(key)
        if value is None or isinstance(value, bool):
            continue
        if isinstance(value, int):
            number = value
        elif isinstance(value, float):
            if not math.isfinite(value):
                if unusable is not None:
                    unusable.append(f"{key}={value!r}")
                continue
            number = int(value)
        elif isinstance(value, str):
            try:
                number = int(value)
            except ValueError:
                continue
        else:
            continue
        if not _usable_count(number):
            if unusable is not None:
                unusable.append(f"{key} beyond 64 bits")
            continue
        return number
    return 0


def model_of(attributes: Mapping[str, AttributeValue]) -> str | None:
    """The model a span asked for (or, failing that, the one that answered)."""
    return _first_str(attributes, _MODEL_KEYS)


def strip_snapshot(model: str) -> str:
    """The model's alias: its name without a snapshot date (the rule of ``models.model_family``)."""
    return model_family(model)


def same_model(a: str | None, b: str | None) -> bool:
    """Whether two spans name the same model; a dated snapshot matches its alias."""
    if a is None or b is None:
        return a is b
    return a == b or strip_snapshot(a) == strip_snapshot(b)


#: A per-run id in a span or tool name (CrewAI's ``Crew_<uuid>.kickoff``): a UUID, dashed or not, with the
#: separator before it. Without it, every run of one operation would be an operation of its own.
_RUN_ID = re.compile(
    r"[_\-:.#\s]?(?<![0-9a-fA-F])[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}"
    r"(?![0-9a-fA-F])"
)
_RUN_ID_MIN_LENGTH = 32

#: The method a framework names a tool span after (DSPy's ``slow_lookup.acall``): the tool is what was called.
_TOOL_METHOD_SUFFIXES = (
    ".acall",
    ".call",
    ".__call__",
    ".aforward",
    ".forward",
    ".ainvoke",
    ".invoke",
    ".arun",
    ".run",
)


def without_run_ids(name: str) -> str:
    """``name`` without the per-run ids frameworks put in it: ``Crew_<uuid>.kickoff`` -> ``Crew.kickoff``."""
    if len(name) < _RUN_ID_MIN_LENGTH:
        return name
    stripped = _RUN_ID.sub("", name)
    return stripped or name


def operation_of(category: str, name: str, attributes: Mapping[str, AttributeValue]) -> str:
    """The low-level operation a span stands for: the model, tool, agent or data source.

    Per-run ids are left out of it, and so is the method a tool span is named after.
    """
    found: str | None = None
    if category in (LLM, EMBEDDING):
        found = model_of(attributes)
    elif category == TOOL:
        found = _first_str(attributes, _TOOL_NAME_KEYS)
        if found is None and name.startswith("execute_tool "):
            found = name[len("execute_tool ") :]
        operation = without_run_ids(found or name)
        # Most tool names end in no method: one call tells, not one per suffix.
        if not operation.endswith(_TOOL_METHOD_SUFFIXES):
            return operation
        for suffix in _TOOL_METHOD_SUFFIXES:
            if operation.endswith(suffix) and len(operation) > len(suffix):
                return operation[: -len(suffix)]
        return operation
    elif category == AGENT:
        found = _first_str(attributes, _AGENT_NAME_KEYS)
    elif category == RETRIEVAL:
        found = _first_str(attributes, _RETRIEVAL_NAME_KEYS)
    return without_run_ids(found or name)


def token_usage_of(attributes: Mapping[str, AttributeValue], unusable: list[str] | None = None) -> TokenUsage | None:
    """Token usage recorded on a span, or ``None`` when it records none.

    A count that is not a finite number within 64 bits (a NaN, an infinity, a number hundreds
    of digits long) is treated as absent; when ``unusable`` is given, each such attribute is
    described in it (``"gen_ai.usage.input_tokens=nan"``).
    """
    # Fast path: the spellings opentelemetry-instrumentation-openai writes.
    input_tokens = attributes.get("gen_ai.usage.input_tokens")
    output_tokens = attributes.get("gen_ai.usage.output_tokens")
    if (
        type(input_tokens) is int
        and type(output_tokens) is int
        and -_COUNT_LIMIT < input_tokens < _COUNT_LIMIT
        and -_COUNT_LIMIT < output_tokens < _COUNT_LIMIT
    ):
        # Cached and reasoning counts have several spellings, and a span may carry the input and output
        # counts in one convention and the details in another: every spelling is read, whichever others are present.
        cached, reasoning = _cached_and_reasoning(attributes, unusable)
        if not (input_tokens or output_tokens or cached or reasoning):
            return None
        return TokenUsage(input_tokens, output_tokens, cached, reasoning)
    input_tokens = _first_int(attributes, _INPUT_TOKEN_KEYS, unusable)
    output_tokens = _first_int(attributes, _OUTPUT_TOKEN_KEYS, unusable)
    cached, reasoning = _cached_and_reasoning(attributes, unusable)
    if not (input_tokens or output_tokens or cached or reasoning):
        return None
    return TokenUsage(input_tokens, output_tokens, cached, reasoning)


def _cached_and_reasoning(attributes: Mapping[str, AttributeValue], unusable: list[str] | None) -> tuple[int, int]:
    # Most spans carry no spelling of either count, which one set check tells.
    if attributes.keys().isdisjoint(_DETAIL_TOKEN_KEYS):
        return 0, 0
    return (
        _first_int(attributes, _CACHED_INPUT_TOKEN_KEYS, unusable),
        _first_int(attributes, _REASONING_TOKEN_KEYS, unusable),
    )


def is_streaming(attributes: Mapping[str, AttributeValue]) -> bool:
    # A loop, not any(<generator>): it runs for every LLM span and the generator costs more.
    for key in _STREAMING_KEYS:  # noqa: SIM110
        if attributes.get(key) is True:
            return True
    return False


def time_to_first_token_ns(
    start_ns: int, attributes: Mapping[str, AttributeValue], events: Sequence[SpanEvent], end_ns: int | None = None
) -> int | None:
    """Time from the request of a streaming call to its first chunk, if the span shows it.

    The request is the span's start, except when the span ended before its first chunk arrived
    (``end_ns`` given): the framework returned a stream object (LlamaIndex's ``astream_chat``), and the
    request went out when the stream was first read, after the span's end.
    """
    if events:
        # The earliest chunk, not the first listed: exporters do not promise event order.
        first: int | None = None
        for event in events:
            if event.name in CHUNK_EVENT_NAMES and (first is None or event.time_ns < first):
                first = event.time_ns
        if first is not None:
            requested = end_ns if end_ns is not None and start_ns < end_ns < first else start_ns
            return max(0, first - requested)
    # Most spans record none of these: an absent key is skipped rather than converted.
    for key in _TTFC_SECONDS_KEYS:
        value = attributes.get(key)
        if value is not None and (nanoseconds := seconds_as_ns(value)) is not None:
            return nanoseconds
    for key in _TTFT_MILLISECONDS_KEYS:
        value = attributes.get(key)
        if value is not None and (nanoseconds := seconds_as_ns(value)) is not None:
            return nanoseconds // 1000
    return None


def records_cached_input(attributes: Mapping[str, AttributeValue]) -> bool:
    """Whether a span records its cached input tokens at all, zero included.

    ``TokenUsage.cached_input`` is 0 both when nothing was served from the cache and when the
    instrumentation never says: only the attribute's presence tells them apart.
    """
    return any(key in attributes for key in _CACHED_INPUT_TOKEN_KEYS)

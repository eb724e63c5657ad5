"""Parallelization: sequential siblings with no data dependency between them.

Whether one step needs another's result is decided by the links, inputs and outputs they recorded.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..categories import AGENT, CATEGORIES, INTERNAL, LLM
from ..profile import SpanProfile, TraceProfile
from ..projection import RecordedSchedule
from ..records import AttributeValue
from .base import (
    DEFAULT_OPTIONS,
    Finding,
    FindingOptions,
    JSONValue,
    _percent,
    _projected,
    _share,
    format_duration,
    where,
)

PARALLELIZABLE = "parallelizable"

_PARALLEL_CATEGORIES = frozenset(CATEGORIES) - {INTERNAL}
# Steps that reason over what came before: an LLM call's prompt normally carries the results of
# earlier steps, and the steps after it normally act on its answer.
_REASONING_CATEGORIES = frozenset({LLM, AGENT})
# Where instrumentations record what a span produced and what it was given. Keys match exactly
# or as a prefix of flattened keys ("llm.output_messages.0.message.tool_calls.0.tool_call.id").
_OUTPUT_KEYS = (
    "gen_ai.output.messages",
    "gen_ai.response.tool_calls",
    "gen_ai.completion",
    "gen_ai.tool.call.result",
    "llm.output_messages",
    "output.value",
    "retrieval.documents",
)
_INPUT_KEYS = (
    "gen_ai.input.messages",
    "gen_ai.prompt",
    "gen_ai.tool.call.arguments",
    "llm.input_messages",
    "input.value",
    "reranker.input_documents",
)
_OUTPUT_EVENTS = frozenset({"gen_ai.choice"})
_INPUT_EVENTS = frozenset(
    {"gen_ai.system.message", "gen_ai.user.message", "gen_ai.assistant.message", "gen_ai.tool.message"}
)
_TOOL_CALL_ID_KEYS = ("gen_ai.tool.call.id", "tool_call.id", "tool.call.id")
# Text pieces compared between one span's output and another's input: runs between JSON or
# quoting punctuation, long enough and with a space or digit, so keys and roles never match.
_PIECE_SPLIT = re.compile(r"[\"'{}\[\],:\\]")
_MIN_PIECE = 12


# Attribute keys repeat across spans and traces: whether a key falls under the input or output
# prefixes is remembered (bounded: cleared when full, as keys with indexes are unbounded).
_MATCH_CACHE: dict[tuple[str, tuple[str, ...]], bool] = {}
_MATCH_CACHE_LIMIT = 50_000


def _matches(key: str, prefixes: tuple[str, ...]) -> bool:
    cache_key = (key, prefixes)
    known = _MATCH_CACHE.get(cache_key)
    if known is None:
        known = any(key == prefix or key.startswith(prefix + ".") for prefix in prefixes)
        if len(_MATCH_CACHE) >= _MATCH_CACHE_LIMIT:
            _MATCH_CACHE.clear()
        _MATCH_CACHE[cache_key] = known
    return known


def _text(attributes: Mapping[str, AttributeValue], prefixes: tuple[str, ...] | None) -> list[str]:
    texts: list[str] = []
    for key, value in attributes.items():
        if value is not None and value != "" and (prefixes is None or _matches(key, prefixes)):
            texts.append(value if isinstance(value, str) else repr(value))
    return texts


def recorded_output(span: SpanProfile) -> str | None:
    """Everything the span recorded as its output (messages, tool calls, results), if anything."""
    return _recorded(span, _OUTPUT_KEYS, _OUTPUT_EVENTS)


def recorded_input(span: SpanProfile) -> str | None:
    """Everything the span recorded as its input (messages, arguments), if anything."""
    return _recorded(span, _INPUT_KEYS, _INPUT_EVENTS)


def _recorded(span: SpanProfile, keys: tuple[str, ...], event_names: frozenset[str]) -> str | None:
    record = span.record
    texts = _text(record.attributes, keys)
    for event in record.events:
        texts.extend(_text(event.attributes, None if event.name in event_names else keys))
    return "\n".join(texts) if texts else None


def tool_call_id(span: SpanProfile) -> str | None:
    attributes = span.record.attributes
    for key in _TOOL_CALL_ID_KEYS:
        value = attributes.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _linked(a: SpanProfile, b: SpanProfile) -> bool:
    a_id, b_id = a.record.span_id, b.record.span_id
    return any(link.span_id == b_id for link in a.record.links) or any(link.span_id == a_id for link in b.record.links)


def _shares_text(output: str, input_text: str) -> bool:
    for piece in _PIECE_SPLIT.split(output):
        piece = piece.strip()
        if len(piece) >= _MIN_PIECE and any(c.isspace() or c.isdigit() for c in piece) and piece in input_text:
            return True
    return False


def dependency(earlier: SpanProfile, later: SpanProfile) -> tuple[bool, str]:
    """Whether ``later`` (which started after ``earlier`` ended) may need ``earlier``'s result,
    and why. Recorded evidence decides; without any, only LLM and agent steps are assumed to."""
    return _dependency(earlier, later, recorded_output(earlier), recorded_input(later))


def _dependency(
    earlier: SpanProfile, later: SpanProfile, output: str | None, input_text: str | None
) -> tuple[bool, str]:
    if _linked(earlier, later):
        return True, "linked"
    later_id = tool_call_id(later)
    if later_id is not None and output is not None:
        if later_id in output:
            return True, "tool call id in the earlier span's output"
        if earlier.category == LLM:
            # The call lists the tools it asked for; this one is not among them.
            return False, "tool call id not in the earlier LLM call's output"
    earlier_id = tool_call_id(earlier)
    if earlier_id is not None and input_text is not None and earlier_id in input_text:
        return True, "tool call id in the later span's input"
    if output is not None and input_text is not None:
        if _shares_text(output, input_text):
            return True, "output text in the later span's input"
        return False, "recorded output and input share no text"
    if earlier.category in _REASONING_CATEGORIES or later.category in _REASONING_CATEGORIES:
        return True, "assumed: an LLM or agent step without recorded messages"
    # Two actions (tools, retrievals, ...) of one agent: their arguments come from an LLM call,
    # so one's result reaches the other only through an LLM call between them.
    return False, "no link and no recorded data flow between two actions"


def find_parallelization(
    profile: TraceProfile, options: FindingOptions = DEFAULT_OPTIONS, *, schedule: RecordedSchedule | None = None
) -> list[Finding]:
    """Siblings (tools, retrievals, LLM calls, sub-agents, ...) that ran one after another with
    no data dependency; the saving is the projection with them started together.

    Groups are consecutive siblings in start order; an ``internal`` sibling between them, or a
    sibling that depends on a member, ends a group.
    """
    findings: list[Finding] = []
    # A span's recorded input and output are read once, not once per pair it is compared in.
    outputs: dict[int, str | None] = {}
    inputs: dict[int, str | None] = {}

    def output_of(span: SpanProfile) -> str | None:
        key = id(span)
        if key not in outputs:
            outputs[key] = recorded_output(span)
        return outputs[key]

    def input_of(span: SpanProfile) -> str | None:
        key = id(span)
        if key not in inputs:
            inputs[key] = recorded_input(span)
        return inputs[key]

    for parent in profile.spans:
        group: list[SpanProfile] = []
        reasons: set[str] = set()
        for child in parent.children:
            if child.category not in _PARALLEL_CATEGORIES:
                findings.extend(_parallel_group(profile, parent, group, reasons, schedule))
                group, reasons = [], set()
                continue
            verdicts = [
                _dependency(member, child, output_of(member), input_of(child))
                for member in group
                if member.end_ns <= child.start_ns
            ]
            if any(depends for depends, _ in verdicts):
                findings.extend(_parallel_group(profile, parent, group, reasons, schedule))
                group, reasons = [child], set()
                continue
            group.append(child)
            reasons.update(reason for _, reason in verdicts)
        findings.extend(_parallel_group(profile, parent, group, reasons, schedule))
    return findings


def _parallel_group(
    profile: TraceProfile,
    parent: SpanProfile,
    group: list[SpanProfile],
    reasons: set[str],
    schedule: RecordedSchedule | None,
) -> list[Finding]:
    if len(group) < 2 or not reasons:  # no reasons: no member ran after another
        return []
    ids = frozenset(s.record.span_id for s in group)
    projected, saving = _projected(profile, independent=[ids], schedule=schedule)
    if saving <= 0:
        return []
    categories = {s.category for s in group}
    what = f"{next(iter(categories))} calls" if len(categories) == 1 else "steps"
    located = where(profile, group)
    members: list[JSONValue] = [
        {
            "span_id": s.record.span_id,
            "name": s.name,
            "category": s.category,
            "operation": s.operation,
            "start_offset_ns": s.start_ns - profile.start_ns,
            "duration_ns": s.duration_ns,
        }
        for s in group
    ]
    return [
        Finding(
            kind=PARALLELIZABLE,
            title=(
                f"{len(group)} {what} under '{parent.name}' ran one after another with no data dependency: "
                f"started together they would end the trace {format_duration(saving)} sooner "
                f"({_percent(_share(saving, profile.duration_ns))} of it)."
            ),
            suggestion=f"Run {_named(group)} together, with asyncio.gather or a thread pool.",
            where=located,
            saving_ns=saving,
            span_ids=tuple(s.record.span_id for s in group),
            operation=group[0].operation if len({s.operation for s in group}) == 1 else None,
            category=group[0].category if len(categories) == 1 else None,
            evidence={
                "parent_span_id": parent.record.span_id,
                "members": members,
                "sequential_ns": group[-1].end_ns - group[0].start_ns,
                "longest_member_ns": max(s.duration_ns for s in group),
                "duration_ns": profile.duration_ns,
                "projected_duration_ns": projected,
                "independence": list[JSONValue](sorted(reasons)),
            },
        )
    ]


def _named(group: list[SpanProfile]) -> str:
    """The calls of a group by what they call: "search_flights, search_hotels and get_weather",
    or "the 3 fetch_url calls" when they all call the same thing."""
    names = list(dict.fromkeys(span.operation or span.name for span in group))
    if len(names) == 1:
        return f"the {len(group)} {names[0]} calls"
    if len(names) > 6:
        return f"these {len(group)} calls"
    return ", ".join(names[:-1]) + f" and {names[-1]}"

"""Parallelization: sequential siblings with nothing tying one's result to the other.

Whether one step needs another's result is decided by what they recorded: links, tool call ids,
the LLM response that requested them, a declaration by the application, inputs and outputs.
What decides it is the finding's ``rests_on``; without evidence it is only assumed, and said so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import pairwise

from ..categories import AGENT, CATEGORIES, EMBEDDING, INTERNAL, LLM, RETRIEVAL
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
    names_where,
    where,
    word_ties_in_full,
)
from .rests_on import (
    ASSUMED_NO_RECORDED_FLOW,
    DECLARED_INDEPENDENT,
    INDEPENDENT_GROUP_ATTRIBUTE,
    NO_RECORDED_FLOW,
    REQUESTED_TOGETHER,
)

PARALLELIZABLE = "parallelizable"

# LLM calls are never started together with the steps around them (see ``_dependent_because``).
_PARALLEL_CATEGORIES = frozenset(CATEGORIES) - {INTERNAL, LLM}
# What a query embedding is made for: the search that uses the vector, or the LLM call after it.
_USES_EMBEDDINGS = frozenset({RETRIEVAL, LLM})
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
# Tool call ids are words like "call_3cfc67c4a9" or "toolu_01A-b": how they are found in a response.
_WORD = re.compile(r"[\w-]+")


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


def _declared_group(span: SpanProfile) -> str | None:
    value = span.record.attributes.get(INDEPENDENT_GROUP_ATTRIBUTE)
    return value if isinstance(value, str) and value else None


class _Evidence:
    """What one trace recorded that shows steps independent, each piece read once per trace."""

    def __init__(self, spans: Iterable[SpanProfile]) -> None:
        self._spans = spans
        self._outputs: dict[int, str | None] = {}
        self._inputs: dict[int, str | None] = {}
        self._llm_outputs: list[str] | None = None
        self._requested: dict[str, frozenset[int]] | None = None

    def output_of(self, span: SpanProfile) -> str | None:
        key = id(span)
        if key not in self._outputs:
            self._outputs[key] = recorded_output(span)
        return self._outputs[key]

    def input_of(self, span: SpanProfile) -> str | None:
        key = id(span)
        if key not in self._inputs:
            self._inputs[key] = recorded_input(span)
        return self._inputs[key]

    def requesters(self, call_id: str) -> frozenset[int]:
        """The LLM calls (by position) whose recorded response lists this tool call id."""
        if self._requested is None:
            self._requested = self._index_requests()
        found = self._requested.get(call_id)
        if found is None:
            # An id with characters outside a word: looked for as text, once.
            outputs = self._llm_outputs or []
            found = frozenset(i for i, output in enumerate(outputs) if call_id in output)
            self._requested[call_id] = found
        return found

    def _index_requests(self) -> dict[str, frozenset[int]]:
        # Every LLM response read once: its words that are tool call ids of this trace. Searching
        # every response for every id would cost calls x responses on long runs.
        outputs = (self.output_of(s) for s in self._spans if s.category == LLM)
        self._llm_outputs = [output for output in outputs if output]
        ids = {call_id for s in self._spans if (call_id := tool_call_id(s)) is not None}
        word_ids = {call_id for call_id in ids if _WORD.fullmatch(call_id)}
        requested: dict[str, set[int]] = {call_id: set() for call_id in word_ids}
        for index, output in enumerate(self._llm_outputs):
            for word in word_ids.intersection(_WORD.findall(output)):
                requested[word].add(index)
        return {call_id: frozenset(indexes) for call_id, indexes in requested.items()}


def dependency(earlier: SpanProfile, later: SpanProfile) -> tuple[bool, str]:
    """Whether ``later`` (which started after ``earlier`` ended) may need ``earlier``'s result,
    and why. Recorded evidence decides; without any, LLM and agent steps are taken to need it,
    and two actions (tools, retrievals, ...) are assumed not to, which the reason says."""
    root = earlier
    while root.parent is not None:
        root = root.parent
    basis, reason = _verdict(earlier, later, _Evidence(_subtree(root)))
    return basis is None, reason


def _subtree(root: SpanProfile) -> list[SpanProfile]:
    stack, spans = [root], []
    while stack:
        node = stack.pop()
        spans.append(node)
        stack.extend(node.children)
    return spans


def _verdict(earlier: SpanProfile, later: SpanProfile, evidence: _Evidence) -> tuple[str | None, str]:
    """What shows that ``later`` does not need ``earlier``'s result (a ``rests_on`` value), or None
    when it may need it; and the reason in words."""
    reason = _dependent_because(earlier, later, evidence)
    if reason is not None:
        return None, reason
    earlier_id, later_id = tool_call_id(earlier), tool_call_id(later)
    if (
        earlier_id is not None
        and later_id is not None
        and evidence.requesters(earlier_id) & evidence.requesters(later_id)
    ):
        return REQUESTED_TOGETHER, "both tool call ids in one LLM response"
    group = _declared_group(earlier)
    if group is not None and group == _declared_group(later):
        return DECLARED_INDEPENDENT, f"both declared in independent group {group!r}"
    output, input_text = evidence.output_of(earlier), evidence.input_of(later)
    if output is not None and input_text is not None:
        if _shares_text(output, input_text):
            return None, "output text in the later span's input"
        return NO_RECORDED_FLOW, "recorded output and input share no text"
    if earlier.category == AGENT or later.category == AGENT:
        return None, "assumed: an agent step without recorded messages"
    # Two actions (tools, retrievals, ...) of one agent: their arguments usually come from an LLM
    # call, so one's result usually reaches the other only through an LLM call between them. But
    # code can pass it on directly (summarize(fetch_prices())): without evidence this is a guess.
    return ASSUMED_NO_RECORDED_FLOW, "no link and no recorded data flow between two actions"


def _dependent_because(earlier: SpanProfile, later: SpanProfile, evidence: _Evidence) -> str | None:
    """Why ``later`` may need ``earlier``'s result whatever else was recorded; None if nothing says so."""
    if earlier.category == LLM or later.category == LLM:
        # An LLM call's prompt carries the results of the steps before it, and the steps after it
        # act on its answer: never started together with the step before or after it.
        return "an LLM call and the next step of the same agent"
    if earlier.category == EMBEDDING and later.category in _USES_EMBEDDINGS:
        return "an embedding and the step that uses it"
    if _linked(earlier, later):
        return "linked"
    later_id = tool_call_id(later)
    output = evidence.output_of(earlier)
    if later_id is not None and output is not None and later_id in output:
        return "tool call id in the earlier span's output"
    earlier_id = tool_call_id(earlier)
    input_text = evidence.input_of(later)
    if earlier_id is not None and input_text is not None and earlier_id in input_text:
        return "tool call id in the later span's input"
    return None


# From the weakest to the strongest: a group rests on the weakest evidence any of its pairs has.
_STRENGTH = (ASSUMED_NO_RECORDED_FLOW, NO_RECORDED_FLOW, DECLARED_INDEPENDENT, REQUESTED_TOGETHER)


def find_parallelization(
    profile: TraceProfile, options: FindingOptions = DEFAULT_OPTIONS, *, schedule: RecordedSchedule | None = None
) -> list[Finding]:
    """Siblings (tools, retrievals, sub-agents, ...) that ran one after another with nothing
    recorded tying them together; the saving is the projection with them started together.

    Groups are consecutive siblings in start order. An LLM call or an ``internal`` sibling ends a
    group and is never part of one, and a sibling that may need a member's result starts a new
    one. Each finding says what shows its calls independent (``rests_on``): tool calls requested
    in one LLM response, calls the application declared independent, or recorded inputs and
    outputs that share nothing. Without any of these it is a hedged note: its ``rests_on`` says it
    is assumed, its sentence asks whether the calls really are independent, and the combined
    projection leaves it out.
    """
    return [_parallel_finding(profile, group) for group in _parallel_groups(profile, schedule)]


def find_parallelization_for_summary(
    profile: TraceProfile, options: FindingOptions = DEFAULT_OPTIONS, *, schedule: RecordedSchedule | None = None
) -> list[Finding]:
    """``find_parallelization`` for a summary across traces (``find_all(..., for_summary=True)``): the
    same findings, each with the same saving, suggestion, operation, category, span ids and what it
    rests on, but no title or evidence and only the names of the spans in ``where``.

    ``rank`` orders findings of one kind with equal savings by their titles: a group whose saving
    another one of the trace shares is worded in full.
    """
    return word_ties_in_full(
        _parallel_groups(profile, schedule),
        lambda group: group.saving,
        lambda group: _parallel_finding(profile, group),
        _unworded,
    )


@dataclass(slots=True)
class _Parallel:
    """Siblings that would end the trace sooner started together, before it is put in words."""

    parent: SpanProfile
    spans: list[SpanProfile]
    #: What shows them independent (a ``rests_on`` value, the weakest of its pairs'), and in words.
    rests_on: str
    reasons: set[str]
    #: The trace's duration with them started together, and how much sooner it would end.
    projected: int
    saving: int


def _parallel_groups(profile: TraceProfile, schedule: RecordedSchedule | None) -> list[_Parallel]:
    """Every group of siblings that, started together, would end the trace sooner (see ``find_parallelization``)."""
    groups: list[_Parallel] = []
    evidence = _Evidence(profile.spans)
    for parent in profile.spans:
        if len(parent.children) < 2:
            continue  # no siblings to start together
        group: list[SpanProfile] = []
        bases: set[str] = set()
        reasons: set[str] = set()
        for child in parent.children:
            if child.category not in _PARALLEL_CATEGORIES:
                groups.extend(_measured(profile, parent, group, bases, reasons, schedule))
                group, bases, reasons = [], set(), set()
                continue
            verdicts = [_verdict(member, child, evidence) for member in group if member.end_ns <= child.start_ns]
            if any(basis is None for basis, _ in verdicts):
                groups.extend(_measured(profile, parent, group, bases, reasons, schedule))
                group, bases, reasons = [child], set(), set()
                continue
            group.append(child)
            for basis, reason in verdicts:
                if basis is not None:
                    bases.add(basis)
                    reasons.add(reason)
        groups.extend(_measured(profile, parent, group, bases, reasons, schedule))
    return groups


def _measured(
    profile: TraceProfile,
    parent: SpanProfile,
    group: list[SpanProfile],
    bases: set[str],
    reasons: set[str],
    schedule: RecordedSchedule | None,
) -> list[_Parallel]:
    if len(group) < 2 or not bases:  # no bases: no member ran after another
        return []
    ids = frozenset(s.record.span_id for s in group)
    projected, saving = _projected(profile, independent=[ids], schedule=schedule)
    if saving <= 0:
        return []
    return [_Parallel(parent, group, min(bases, key=_STRENGTH.index), reasons, projected, saving)]


def _suggestion(group: _Parallel) -> str:
    named = _named(group.spans)
    if group.rests_on == ASSUMED_NO_RECORDED_FLOW:
        return f"If they do not need each other's results, run {named} together, with asyncio.gather or a thread pool."
    return f"Run {named} together, with asyncio.gather or a thread pool."


def _operation_and_category(spans: list[SpanProfile]) -> tuple[str | None, str | None]:
    """The operation and the category the spans share, each None when they do not."""
    categories = {s.category for s in spans}
    return (
        spans[0].operation if len({s.operation for s in spans}) == 1 else None,
        spans[0].category if len(categories) == 1 else None,
    )


def _unworded(group: _Parallel) -> Finding:
    operation, category = _operation_and_category(group.spans)
    return Finding(
        kind=PARALLELIZABLE,
        title="",
        suggestion=_suggestion(group),
        where=names_where(group.spans),
        saving_ns=group.saving,
        span_ids=tuple(s.record.span_id for s in group.spans),
        operation=operation,
        category=category,
        rests_on=group.rests_on,
    )


def _parallel_finding(profile: TraceProfile, found: _Parallel) -> Finding:
    group, parent, rests_on, saving = found.spans, found.parent, found.rests_on, found.saving
    categories = {s.category for s in group}
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
    # Members that already overlap ran together; only the others ran one after another.
    ordered = sorted(group, key=lambda s: (s.start_ns, s.record.span_id))
    in_turn = all(a.end_ns <= b.start_ns for a, b in pairwise(ordered))
    sequence = "one after another" if in_turn else "partly one after another"
    sooner = (
        f"would end the trace {format_duration(saving)} sooner ({_percent(_share(saving, profile.duration_ns))} of it)"
    )
    named = _named(group)
    if rests_on == ASSUMED_NO_RECORDED_FLOW:
        if len(group) == 2:
            first, second = (_name(s) for s in ordered)
            condition = f"if {second} does not need {first}'s result"
        else:
            condition = "if none of them needs the result of one before it"
        title = (
            f"No recorded data flow between {named} under '{parent.name}', which ran {sequence}: {condition}, "
            f"starting them together {sooner}. Nothing recorded shows that, so this saving is left out of the "
            f"combined one."
        )
    else:
        what = f"{next(iter(categories))} calls" if len(categories) == 1 else "steps"
        title = (
            f"{len(group)} {what} under '{parent.name}' ran {sequence}, and {_SHOWN_BY[rests_on]}: "
            f"started together they {sooner}."
        )
    operation, category = _operation_and_category(group)
    return Finding(
        kind=PARALLELIZABLE,
        title=title,
        suggestion=_suggestion(found),
        where=located,
        saving_ns=saving,
        span_ids=tuple(s.record.span_id for s in group),
        operation=operation,
        category=category,
        rests_on=rests_on,
        evidence={
            "parent_span_id": parent.record.span_id,
            "members": members,
            "sequential_ns": group[-1].end_ns - group[0].start_ns,
            "longest_member_ns": max(s.duration_ns for s in group),
            "duration_ns": profile.duration_ns,
            "projected_duration_ns": found.projected,
            "independence": list[JSONValue](sorted(found.reasons)),
        },
    )


# What shows a group independent, as the end of its sentence.
_SHOWN_BY = {
    REQUESTED_TOGETHER: "one LLM response requested them together",
    DECLARED_INDEPENDENT: "the application declares them independent",
    NO_RECORDED_FLOW: "what they recorded as inputs and outputs shows no data flow between them",
}


def _name(span: SpanProfile) -> str:
    return span.operation or span.name


def _named(group: list[SpanProfile]) -> str:
    """The calls of a group by what they call: "search_flights, search_hotels and get_weather",
    or "the 3 fetch_url calls" when they all call the same thing."""
    names = list(dict.fromkeys(_name(span) for span in group))
    if len(names) == 1:
        return f"the {len(group)} {names[0]} calls"
    if len(names) > 6:
        return f"these {len(group)} calls"
    return ", ".join(names[:-1]) + f" and {names[-1]}"

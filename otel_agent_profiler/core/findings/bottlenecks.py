"""Bottlenecks and slow tools: where the critical path goes, and what removing it would give."""

from __future__ import annotations

from dataclasses import dataclass

from ..call_anatomy import calls_of
from ..categories import AGENT, EMBEDDING, INTERNAL, LLM, RETRIEVAL, TOOL
from ..model_facts import cheaper_models
from ..profile import SpanProfile, TraceProfile
from ..projection import RecordedSchedule, projected_durations_scaled_ns
from .base import (
    DEFAULT_OPTIONS,
    Finding,
    FindingOptions,
    _at,
    _percent,
    _removed_and_halved,
    _share,
    format_duration,
    names_where,
    where,
    word_ties_in_full,
)

BOTTLENECK = "bottleneck"
SLOW_TOOL = "slow_tool"

#: LLM answers at most this many output tokens on average count as short: a smaller model will do.
SHORT_ANSWER_TOKENS = 300
#: Removing a step saving less than this share of the time it holds is explained: other work takes over.
TAKEN_OVER_BELOW = 0.5


def overrun_caveat(profile: TraceProfile, spans: list[SpanProfile]) -> str | None:
    """Why a verdict on ``spans``' own or critical-path time may be wrong: one of them is a child
    that ran past its parent's end, or took such a child's time as its own (the trace's
    ``child_outlives_parent`` and ``child_starts_after_parent`` anomalies). None otherwise."""
    overruns = [a for a in profile.anomalies if a.parent_span_id is not None]
    if not overruns:
        return None
    ids = {span.record.span_id for span in spans}
    relevant = [a for a in overruns if a.span_id in ids or any(span_id in ids for span_id, _ in a.self_time_of)]
    if not relevant:
        return None
    names = {span.record.span_id: span.name for span in profile.spans}
    first = relevant[0]
    child, parent = names.get(first.span_id, first.span_id), names.get(first.parent_span_id or "", "?")
    took = [names.get(span_id, span_id) for span_id, _ in first.self_time_of]
    where = f"counts as the own time of '{took[0]}'" if took else "is left out of its parent"
    more = f" ({len(relevant) - 1} more spans like it)" if len(relevant) > 1 else ""
    return (
        f"Unreliable: span '{child}' ({first.span_id}) ran {format_duration(first.overrun_ns)} past the end of "
        f"its parent '{parent}'{more}, and the time after that end {where} (see the trace's anomalies)."
    )


def find_bottlenecks(
    profile: TraceProfile, options: FindingOptions = DEFAULT_OPTIONS, *, schedule: RecordedSchedule | None = None
) -> list[Finding]:
    """The top spans and operations by critical-path time, with the saving of removing their
    own time (``saving_ns``) and of making it 2x faster."""
    trace_critical = profile.critical_path_ns
    return [
        _bottleneck(profile, measured, trace_critical) for measured in _measured_bottlenecks(profile, options, schedule)
    ]


def find_bottlenecks_for_summary(
    profile: TraceProfile, options: FindingOptions = DEFAULT_OPTIONS, *, schedule: RecordedSchedule | None = None
) -> list[Finding]:
    """``find_bottlenecks`` for a summary across traces (``find_all(..., for_summary=True)``): the
    same findings, each with the same saving, suggestion, operation, category and span ids, but no
    title, evidence or caveat and only the names of the spans in ``where``.

    The wording is most of the cost of a bottleneck besides its projections, and a summary reads
    none of it, nor the projection of the spans twice as fast (evidence), so neither is made. Except
    where ``rank`` needs them: findings of one kind with equal savings are ordered by their titles,
    so a bottleneck whose saving another one shares is measured and worded in full.
    """
    return word_ties_in_full(
        _measured_bottlenecks(profile, options, schedule, halved=False),
        lambda bottleneck: bottleneck.saving,
        lambda bottleneck: _bottleneck(
            profile, _measure(profile, bottleneck.spans, bottleneck.scope, schedule), profile.critical_path_ns
        ),
        _unworded,
    )


def _measured_bottlenecks(
    profile: TraceProfile, options: FindingOptions, schedule: RecordedSchedule | None, *, halved: bool = True
) -> list[_Measured]:
    """The top spans, then the top operations (each not one of those spans), by critical-path time,
    measured (``halved``: twice as fast too)."""
    ranked = sorted(
        (s for s in profile.spans if s.critical_path_ns > 0),
        key=lambda s: (-s.critical_path_ns, s.start_ns, s.record.span_id),
    )[: options.top_n]
    measured = [_measure(profile, [span], "span", schedule, halved=halved) for span in ranked]
    reported = {(span,) for span in ranked}
    for _, spans in _top_operations(profile, options.top_n):
        if tuple(spans) in reported:
            continue  # the operation is one span, already reported as such
        measured.append(_measure(profile, spans, "operation", schedule, halved=halved))
    return measured


def _top_operations(profile: TraceProfile, top_n: int) -> list[tuple[tuple[str, str], list[SpanProfile]]]:
    spans_of: dict[tuple[str, str], list[SpanProfile]] = {}
    for span in profile.spans:
        spans_of.setdefault((span.category, span.operation), []).append(span)
    ranked = sorted(
        ((key, op.critical_path_ns) for key, op in profile.operations.items() if op.critical_path_ns > 0),
        key=lambda item: (-item[1], item[0]),
    )[:top_n]
    return [(key, spans_of[key]) for key, _ in ranked]


def _subject(category: str, operation: str, count: int, *, own_code: bool = True) -> str:
    """What a bottleneck is about, as the subject of a sentence; ``own_code=False`` when none of its
    time is the span's own code (only gaps between its children), so the subject does not say so."""
    if category in (LLM, EMBEDDING):
        return f"The {operation} call" if count == 1 else f"The {count} {operation} calls"
    if category == TOOL:
        return f"Tool {operation}" if count == 1 else f"The {count} calls of tool {operation}"
    if category == AGENT:
        return f"Agent {operation}'s own code" if own_code else f"Agent {operation}"
    if category == INTERNAL:
        return f"'{operation}'" if count == 1 else f"The {count} '{operation}' spans"
    return f"{category.capitalize()} {operation}" if count == 1 else f"The {count} {category} {operation} calls"


def _suggestion(category: str, operation: str, spans: list[SpanProfile]) -> str:
    """The change that would make a bottleneck (or slow tool) smaller, one sentence."""
    these = "these calls" if len(spans) > 1 else "this call"
    if category == LLM:
        outputs = [s.tokens.output for s in spans if s.tokens is not None and s.tokens.output > 0]
        average = round(sum(outputs) / len(outputs)) if outputs else None
        return _model_suggestion(operation, these, average)
    if category == EMBEDDING:
        return f"Batch the {operation} requests into one call and cache the embeddings of text seen before."
    if category == TOOL:
        return f"Make tool {operation} faster, or cache its results when the same inputs come back."
    if category == AGENT:
        return f"Look at what agent {operation} does between its steps: its own code holds this time."
    if category == RETRIEVAL:
        return f"Cache what {operation} retrieves, or retrieve fewer documents."
    return f"Profile '{operation}': this time is spent in the application's own code."


def _model_suggestion(model: str, these: str, average_output: int | None) -> str:
    """What to change about slow LLM calls: a smaller model only when the price table knows a
    cheaper one of the same line (none is smaller than gpt-4o-mini), else the prompts and answers."""
    smaller = cheaper_models(model)
    if smaller:
        names = " or ".join(smaller[:2])
        cheaper = f"{names} costs" if len(smaller) == 1 else "both cost"
        if average_output is not None and average_output <= SHORT_ANSWER_TOKENS:
            return (
                f"Try {names} for {these}: the answers are short ({average_output:,} output tokens on average), "
                f"and {cheaper} less than {model}."
            )
        return f"Ask for shorter answers, or try {names} for {these}: {cheaper} less than {model}."
    if average_output is not None and average_output <= SHORT_ANSWER_TOKENS:
        return (
            f"Send {model} shorter prompts, or make fewer calls: its answers are already short "
            f"({average_output:,} output tokens on average)."
        )
    if average_output is not None:
        return (
            f"Ask {model} for shorter answers ({average_output:,} output tokens on average), or send shorter prompts."
        )
    return f"Send {model} shorter prompts and ask it for shorter answers."


def _savings_sentence(held_ns: int, saving: int, saving_2x: int, pronoun: str) -> str:
    """The end of a bottleneck's (or slow tool's) title: what removing its time and halving it would give,
    and, when removing it gives far less than the time it holds, why."""
    if saving >= TAKEN_OVER_BELOW * held_ns:
        return (
            f"removing that time would end the trace {format_duration(saving)} sooner, "
            f"and halving it {format_duration(saving_2x)} sooner."
        )
    return (
        f"removing that time would end the trace only {format_duration(saving)} sooner, "
        f"and halving it {format_duration(saving_2x)} sooner: work that ran beside {pronoun} "
        "would take over the critical path."
    )


@dataclass(slots=True)
class _Measured:
    """The numbers of a bottleneck, before it is put in words."""

    spans: list[SpanProfile]
    #: "span" or "operation".
    scope: str
    critical: int
    #: The part of ``critical`` that is gaps between the spans' children (see ``_measure``).
    waiting: int
    #: Projected durations without the spans' own time and with it halved, and their savings; the
    #: halved one None when it was not measured (``_measure``).
    removed: int
    saving: int
    halved: int | None
    saving_2x: int | None
    #: The distinct calls among the spans, and those holding critical-path time.
    calls: list[SpanProfile]
    holding: list[SpanProfile]
    suggestion: str | None

    @property
    def own(self) -> int:
        return self.critical - self.waiting


def _measure(
    profile: TraceProfile,
    spans: list[SpanProfile],
    scope: str,
    schedule: RecordedSchedule | None,
    *,
    halved: bool = True,
) -> _Measured:
    """A bottleneck's numbers; ``halved=False`` leaves out the projection of its spans twice as fast."""
    critical = sum(s.critical_path_ns for s in spans)
    # Critical-path time a span holds while one of its children runs is a gap between children
    # (the next one started late), not its own code: only the rest is blamed on the code.
    waiting = sum(s.critical_path_waiting_ns for s in spans)
    own = critical - waiting
    twice_as_fast: int | None = None
    saving_2x: int | None = None
    if halved:
        removed, saving, twice_as_fast, saving_2x = _removed_and_halved(profile, spans, schedule)
    else:
        (removed,) = projected_durations_scaled_ns(profile, spans, (0.0,), schedule=schedule)
        saving = profile.duration_ns - removed
    if waiting > 0:
        # The projection removes the gaps too; removing the code's time saves at most that time.
        saving = min(saving, own)
        if saving_2x is not None:
            saving_2x = min(saving_2x, own // 2)
    first = spans[0]
    # An inference server's span (and the HTTP span above it) is part of its client's call.
    calls = calls_of(spans)
    # In a fan-out only the slowest calls hold critical-path time: name those, not all of them.
    on_path = [s for s in spans if s.critical_path_ns > 0]
    holding = (calls if len(on_path) == len(spans) else calls_of(on_path)) or calls
    if waiting > 0 and own == 0:
        suggestion: str | None = _GAP_SUGGESTION.format(name=first.name)
    else:
        suggestion = _suggestion(first.category, first.operation, calls) if saving > 0 else None
    return _Measured(
        spans, scope, critical, waiting, removed, saving, twice_as_fast, saving_2x, calls, holding, suggestion
    )


def _unworded(bottleneck: _Measured) -> Finding:
    first = bottleneck.spans[0]
    return Finding(
        kind=BOTTLENECK,
        title="",
        suggestion=bottleneck.suggestion,
        where=names_where(bottleneck.holding),
        saving_ns=bottleneck.saving,
        span_ids=tuple(s.record.span_id for s in bottleneck.spans),
        operation=first.operation,
        category=first.category,
    )


def _bottleneck(profile: TraceProfile, bottleneck: _Measured, trace_critical: int) -> Finding:
    """The bottleneck in words; ``bottleneck`` measured in full (``halved``)."""
    spans, critical, waiting, own = bottleneck.spans, bottleneck.critical, bottleneck.waiting, bottleneck.own
    saving, saving_2x, calls, holding = bottleneck.saving, bottleneck.saving_2x, bottleneck.calls, bottleneck.holding
    assert saving_2x is not None, "a bottleneck is put in words measured in full"
    share = _share(critical, trace_critical)
    first = spans[0]
    subject = _subject(first.category, first.operation, len(calls), own_code=own > 0)
    if len(spans) == 1:
        # One span: say which one, as the span tree and the waterfall show it.
        if first.operation not in first.name:
            subject += f" '{first.name}'"
        subject += f" {_at(profile, first)}"
    if len(calls) > 1 and len(holding) < len(calls):
        subject += f" ({len(holding)} of them on the critical path)"
    verb = "hold" if len(calls) > 1 and first.category != AGENT else "holds"
    pronoun = "them" if verb == "hold" else "it"
    if waiting == 0:
        title = (
            f"{subject} {verb} {format_duration(critical)} of the critical path "
            f"({_percent(critical / trace_critical)}): " + _savings_sentence(critical, saving, saving_2x, pronoun)
        )
    elif own == 0:
        title = (
            f"{subject} {verb} {format_duration(critical)} of the critical path "
            f"({_percent(critical / trace_critical)}) only as gaps between its children, not in its own "
            f"code: a child was still running throughout while the next one had not started."
        )
    else:
        title = (
            f"{subject} {verb} {format_duration(own)} of the critical path "
            f"({_percent(own / trace_critical)}), and {format_duration(waiting)} more as gaps between "
            f"its children while one of them was still running: " + _savings_sentence(own, saving, saving_2x, pronoun)
        )
    return Finding(
        kind=BOTTLENECK,
        title=title,
        suggestion=bottleneck.suggestion,
        where=where(profile, holding),
        saving_ns=saving,
        span_ids=tuple(s.record.span_id for s in spans),
        operation=first.operation,
        category=first.category,
        caveat=overrun_caveat(profile, spans),
        evidence={
            "scope": bottleneck.scope,
            "spans": len(spans),
            "critical_path_ns": critical,
            "critical_path_share": share,
            "critical_path_waiting_ns": waiting,
            "self_time_ns": sum(s.self_time_ns for s in spans),
            "duration_ns": profile.duration_ns,
            "projected_duration_without_ns": bottleneck.removed,
            "projected_duration_2x_faster_ns": bottleneck.halved,
            "saving_if_2x_faster_ns": saving_2x,
        },
    )


#: What to do about time a parent holds only as gaps between its children (``{name}``: the parent).
_GAP_SUGGESTION = (
    "See why '{name}' starts a step while an earlier one still runs but not sooner: if the step does not "
    "need what the earlier one does first, start it sooner."
)


def find_slow_tools(
    profile: TraceProfile, options: FindingOptions = DEFAULT_OPTIONS, *, schedule: RecordedSchedule | None = None
) -> list[Finding]:
    """Tool spans whose self time is at least ``slow_tool_ms`` or ``slow_tool_share`` of the trace."""
    threshold_ns = round(options.slow_tool_ms * 1e6)
    duration = profile.duration_ns
    findings: list[Finding] = []
    tools = [s for s in profile.spans if s.category == TOOL and s.self_time_ns > 0]
    tools.sort(key=lambda s: (-s.self_time_ns, s.start_ns, s.record.span_id))
    for span in tools:
        if span.self_time_ns < threshold_ns and span.self_time_ns < options.slow_tool_share * duration:
            continue
        share = _share(span.self_time_ns, duration)
        removed, saving, halved, saving_2x = _removed_and_halved(profile, [span], schedule)
        took = (
            f"Tool {span.operation} took {format_duration(span.self_time_ns)} itself "
            f"({_percent(span.self_time_ns / duration)} of the trace)"
        )
        if saving > 0:
            title = f"{took}: " + _savings_sentence(span.self_time_ns, saving, saving_2x, "it")
        else:
            title = f"{took}, but beside longer work: making it faster would not end the trace sooner."
        findings.append(
            Finding(
                kind=SLOW_TOOL,
                title=title,
                suggestion=_suggestion(TOOL, span.operation, [span]) if saving > 0 else None,
                where=where(profile, [span]),
                saving_ns=saving,
                span_ids=(span.record.span_id,),
                operation=span.operation,
                category=TOOL,
                caveat=overrun_caveat(profile, [span]),
                evidence={
                    "self_time_ns": span.self_time_ns,
                    "duration_ns": span.duration_ns,
                    "trace_share": share,
                    "on_critical_path": span.on_critical_path,
                    "critical_path_ns": span.critical_path_ns,
                    "threshold_ns": threshold_ns,
                    "threshold_share": options.slow_tool_share,
                    "projected_duration_without_ns": removed,
                    "saving_if_2x_faster_ns": saving_2x,
                    "projected_duration_2x_faster_ns": halved,
                },
            )
        )
    return findings

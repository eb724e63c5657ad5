"""LLM calls split from their agent's trace: found, reported, and counted once across traces.

When two instrumentations do not share context (LangChain with OpenInference, and the
Traceloop OpenAI instrumentation under zero-code), one LLM call is recorded twice: as an LLM
span inside the agent's trace, and as a trace of its own holding only the client's LLM span.
Each trace is right on its own; summed across traces, the call's tokens and cost count twice.

A trace is taken for such a split copy when it holds nothing but LLM spans and each of its
counted calls matches a counted LLM call of another trace that is not LLM-only: the same model
(by family), the same input and output tokens, overlapping in time, and in the same process as
far as the resources say (``service.instance.id``, ``process.pid``, ``host.name``, ``host.id``,
``service.name``: each one both resources record must be equal). This needs no span tree, so it
works on released profiles too.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from .categories import LLM
from .fast_pickle import pickled_by_fields
from .field_values import field_values
from .genai import TokenUsage
from .models import model_family
from .profile import TraceProfile

#: Resource attributes that tell processes apart; a match needs every one both sides record to agree.
PROCESS_ATTRIBUTES = ("service.instance.id", "process.pid", "host.name", "host.id", "service.name")


@dataclass(frozen=True, slots=True)
class SplitLLMCall:
    """An LLM call recorded in a trace of its own that repeats an LLM call of an agent's trace."""

    #: The LLM-only trace and its span.
    trace_id: str
    span_id: str
    #: The agent's trace and the LLM span there that describes the same call.
    agent_trace_id: str
    agent_span_id: str
    model: str | None
    tokens: TokenUsage
    cost_usd: float | None

    def to_dict(self) -> dict[str, object]:
        # The tokens replace their own field in place: the keys keep the fields' order.
        return {**field_values(self), "tokens": self.tokens.to_dict()}


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class CallFacts:
    """What matching reads of one LLM call with token usage."""

    span_id: str
    model: str | None
    tokens: TokenUsage
    cost_usd: float | None
    start_ns: int
    end_ns: int
    #: The values of ``PROCESS_ATTRIBUTES`` in the call's resource (None where not recorded).
    process: tuple[object, ...]


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class TraceCalls:
    """What matching reads of one trace: whether it holds only LLM spans, and its counted calls with usage.

    Small enough to keep for every trace of an input profiled a shard at a time.
    """

    trace_id: str
    llm_only: bool
    calls: tuple[CallFacts, ...]


def is_llm_only(profile: TraceProfile) -> bool:
    """Whether the trace holds nothing but LLM spans (a split copy of a call may be such a trace)."""
    return bool(profile.spans) and all(span.category == LLM for span in profile.spans)


def calls_of(profile: TraceProfile) -> TraceCalls:
    """The facts about ``profile`` that finding split calls needs."""
    llm_only = is_llm_only(profile)
    calls = tuple(
        CallFacts(
            span.span_id,
            span.model,
            span.tokens,
            span.cost_usd,
            span.start_ns,
            span.end_ns,
            tuple(span.record.resource.get(key) for key in PROCESS_ATTRIBUTES),
        )
        for span in profile.spans
        if span.category == LLM and span.counted and span.tokens is not None
    )
    return TraceCalls(profile.trace_id, llm_only, calls)


def _key(call: CallFacts) -> tuple[str | None, int, int]:
    return (model_family(call.model) if call.model else None, call.tokens.input, call.tokens.output)


def _same_process(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    return all(left is None or right is None or left == right for left, right in zip(a, b, strict=True))


def _overlap(a: CallFacts, b: CallFacts) -> int:
    # Two calls of zero length at the same instant overlap too: hence the +1.
    return min(a.end_ns, b.end_ns) - max(a.start_ns, b.start_ns) + 1


def find_split_llm_calls(traces: Iterable[TraceProfile | TraceCalls]) -> list[SplitLLMCall]:
    """The LLM calls that LLM-only traces repeat from agents' traces, in the order of the LLM-only traces.

    A trace is reported only when every counted call in it with token usage has a match; each
    agent's call is matched at most once (the one overlapping most, then starting nearest).
    ``traces`` are profiles, or what ``calls_of`` keeps of them.
    """
    traces = list(traces)
    # Most inputs hold no LLM-only trace: then no call is split, and no trace's calls need listing.
    if not any(trace.llm_only if isinstance(trace, TraceCalls) else is_llm_only(trace) for trace in traces):
        return []
    facts = [trace if isinstance(trace, TraceCalls) else calls_of(trace) for trace in traces]
    llm_only = [trace for trace in facts if trace.llm_only]
    if not llm_only or len(llm_only) == len(facts):
        return []
    targets: dict[tuple[str | None, int, int], list[tuple[str, CallFacts]]] = {}
    for trace in facts:
        if not trace.llm_only:
            for call in trace.calls:
                targets.setdefault(_key(call), []).append((trace.trace_id, call))
    used: set[tuple[str, str]] = set()
    found: list[SplitLLMCall] = []
    for trace in llm_only:
        calls = trace.calls
        matches = [_best_match(call, targets.get(_key(call), ()), used) for call in calls]
        if not calls or any(match is None for match in matches):
            continue
        for call, match in zip(calls, matches, strict=True):
            assert match is not None
            agent_trace_id, agent_call = match
            used.add((agent_trace_id, agent_call.span_id))
            found.append(
                SplitLLMCall(
                    trace.trace_id,
                    call.span_id,
                    agent_trace_id,
                    agent_call.span_id,
                    call.model,
                    call.tokens,
                    call.cost_usd,
                )
            )
    return found


def _best_match(
    call: CallFacts, candidates: Sequence[tuple[str, CallFacts]], used: set[tuple[str, str]]
) -> tuple[str, CallFacts] | None:
    best: tuple[str, CallFacts] | None = None
    best_rank: tuple[int, int] | None = None
    for trace_id, candidate in candidates:
        if (trace_id, candidate.span_id) in used or not _same_process(call.process, candidate.process):
            continue
        overlap = _overlap(call, candidate)
        if overlap <= 0:
            continue
        rank = (-overlap, abs(call.start_ns - candidate.start_ns))
        if best_rank is None or rank < best_rank:
            best, best_rank = (trace_id, candidate), rank
    return best


def repeated_span_ids(splits: Iterable[SplitLLMCall]) -> set[tuple[str, str]]:
    """``(trace id, span id)`` of the split copies: the spans to leave out of cross-trace totals."""
    return {(split.trace_id, split.span_id) for split in splits}


@dataclass(slots=True)
class CrossTraceTotals:
    """Totals over many traces with every LLM call counted once (split copies left out)."""

    traces: int = 0
    llm_calls: int = 0
    tokens: TokenUsage = field(default_factory=TokenUsage)
    #: None when no call has a cost.
    cost_usd: float | None = None
    #: The split copies left out, and their tokens.
    split_llm_calls: int = 0
    split_tokens: TokenUsage = field(default_factory=TokenUsage)

    def to_dict(self) -> dict[str, object]:
        return {
            "traces": self.traces,
            "llm_calls": self.llm_calls,
            "tokens": self.tokens.to_dict(),
            "cost_usd": self.cost_usd,
            "split_llm_calls": self.split_llm_calls,
            "split_tokens": self.split_tokens.to_dict(),
        }


class Counted(Protocol):
    """What the totals read of a trace (a ``TraceProfile`` has it)."""

    @property
    def llm_calls(self) -> int: ...
    @property
    def tokens(self) -> TokenUsage: ...
    @property
    def cost_usd(self) -> float | None: ...


def cross_trace_totals(profiles: Sequence[Counted], splits: Sequence[SplitLLMCall]) -> CrossTraceTotals:
    """LLM calls, tokens and cost summed over ``profiles``, each split copy in ``splits`` left out."""
    totals = CrossTraceTotals(traces=len(profiles))
    for profile in profiles:
        totals.llm_calls += profile.llm_calls
        totals.tokens.add(profile.tokens)
        if profile.cost_usd is not None:
            totals.cost_usd = (totals.cost_usd or 0.0) + profile.cost_usd
    for split in splits:
        totals.llm_calls -= 1
        totals.split_llm_calls += 1
        totals.split_tokens.add(split.tokens)
        totals.tokens.add(
            TokenUsage(-split.tokens.input, -split.tokens.output, -split.tokens.cached_input, -split.tokens.reasoning)
        )
        if split.cost_usd is not None and totals.cost_usd is not None:
            totals.cost_usd -= split.cost_usd
    return totals

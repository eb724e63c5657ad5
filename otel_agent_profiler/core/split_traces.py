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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .categories import LLM
from .genai import TokenUsage
from .models import model_family
from .profile import SpanProfile, TraceProfile

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
        return {
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "agent_trace_id": self.agent_trace_id,
            "agent_span_id": self.agent_span_id,
            "model": self.model,
            "tokens": self.tokens.to_dict(),
            "cost_usd": self.cost_usd,
        }


def _calls(profile: TraceProfile) -> list[SpanProfile]:
    return [span for span in profile.spans if span.category == LLM and span.counted and span.tokens is not None]


def _is_llm_only(profile: TraceProfile) -> bool:
    return bool(profile.spans) and all(span.category == LLM for span in profile.spans)


def _key(span: SpanProfile) -> tuple[str | None, int, int]:
    usage = span.tokens
    assert usage is not None  # only calls with usage are matched
    return (model_family(span.model) if span.model else None, usage.input, usage.output)


def _same_process(a: Mapping[str, object], b: Mapping[str, object]) -> bool:
    if a is b:
        return True
    for key in PROCESS_ATTRIBUTES:
        left, right = a.get(key), b.get(key)
        if left is not None and right is not None and left != right:
            return False
    return True


def _overlap(a: SpanProfile, b: SpanProfile) -> int:
    # Two calls of zero length at the same instant overlap too: hence the +1.
    return min(a.end_ns, b.end_ns) - max(a.start_ns, b.start_ns) + 1


def find_split_llm_calls(profiles: Iterable[TraceProfile]) -> list[SplitLLMCall]:
    """The LLM calls that LLM-only traces repeat from agents' traces, in the order of the LLM-only traces.

    A trace is reported only when every counted call in it with token usage has a match; each
    agent's call is matched at most once (the one overlapping most, then starting nearest).
    """
    profiles = list(profiles)
    llm_only = [profile for profile in profiles if _is_llm_only(profile)]
    if not llm_only or len(llm_only) == len(profiles):
        return []
    targets: dict[tuple[str | None, int, int], list[tuple[TraceProfile, SpanProfile]]] = {}
    for profile in profiles:
        if not _is_llm_only(profile):
            for span in _calls(profile):
                targets.setdefault(_key(span), []).append((profile, span))
    used: set[tuple[str, str]] = set()
    found: list[SplitLLMCall] = []
    for profile in llm_only:
        calls = _calls(profile)
        matches = [_best_match(call, targets.get(_key(call), ()), used) for call in calls]
        if not calls or any(match is None for match in matches):
            continue
        for call, match in zip(calls, matches, strict=True):
            assert match is not None
            agent_trace, agent_span = match
            used.add((agent_trace.trace_id, agent_span.span_id))
            assert call.tokens is not None
            found.append(
                SplitLLMCall(
                    profile.trace_id,
                    call.span_id,
                    agent_trace.trace_id,
                    agent_span.span_id,
                    call.model,
                    call.tokens,
                    call.cost_usd,
                )
            )
    return found


def _best_match(
    call: SpanProfile, candidates: Sequence[tuple[TraceProfile, SpanProfile]], used: set[tuple[str, str]]
) -> tuple[TraceProfile, SpanProfile] | None:
    best: tuple[TraceProfile, SpanProfile] | None = None
    best_rank: tuple[int, int] | None = None
    resource = call.record.resource
    for profile, span in candidates:
        if (profile.trace_id, span.span_id) in used or not _same_process(resource, span.record.resource):
            continue
        overlap = _overlap(call, span)
        if overlap <= 0:
            continue
        rank = (-overlap, abs(call.start_ns - span.start_ns))
        if best_rank is None or rank < best_rank:
            best, best_rank = (profile, span), rank
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


def cross_trace_totals(profiles: Sequence[TraceProfile], splits: Sequence[SplitLLMCall]) -> CrossTraceTotals:
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

"""Sequential LLM chains: sibling LLM calls one after another, a round trip each."""

from __future__ import annotations

from ..call_parts import llm_calls_among
from ..categories import LLM
from ..genai import TokenUsage
from ..profile import SpanProfile, TraceProfile
from ..projection import RecordedSchedule
from .base import (
    DEFAULT_OPTIONS,
    Finding,
    FindingOptions,
    _percent,
    _projected,
    _share,
    _tokens,
    _with_descendants,
    format_duration,
    names_where,
    where,
)

SEQUENTIAL_LLM_CHAIN = "sequential_llm_chain"


def _sequential_runs(spans: list[SpanProfile]) -> list[list[SpanProfile]]:
    """Maximal runs of spans (sorted by start) each starting at or after the previous one ended."""
    runs: list[list[SpanProfile]] = []
    for span in spans:
        if runs and span.start_ns >= runs[-1][-1].end_ns:
            runs[-1].append(span)
        else:
            runs.append([span])
    return runs


def find_sequential_llm_chains(
    profile: TraceProfile, options: FindingOptions = DEFAULT_OPTIONS, *, schedule: RecordedSchedule | None = None
) -> list[Finding]:
    """At least ``min_llm_chain`` sibling LLM calls one after another, none overlapping the next
    (other steps may run between them): a round trip each."""
    return [_chain_finding(profile, parent, run, schedule) for parent, run in _chains(profile, options)]


def find_sequential_llm_chains_for_summary(
    profile: TraceProfile, options: FindingOptions = DEFAULT_OPTIONS, *, schedule: RecordedSchedule | None = None
) -> list[Finding]:
    """``find_sequential_llm_chains`` for a summary across traces (``find_all(..., for_summary=True)``):
    the same findings without title or evidence, and only the names of the spans in ``where``;
    their evidence is most of their cost (a projection each).

    A chain saves nothing, so ``rank`` orders the chains of a trace by their titles: when there
    are several, they are made in full.
    """
    chains = _chains(profile, options)
    if len(chains) > 1:
        return [_chain_finding(profile, parent, run, schedule) for parent, run in chains]
    return [
        Finding(
            kind=SEQUENTIAL_LLM_CHAIN,
            title="",
            suggestion=_SUGGESTION,
            where=names_where(run),
            span_ids=tuple(s.record.span_id for s in run),
            operation=_operation(_models(run)),
            category=LLM,
        )
        for _, run in chains
    ]


def _chains(profile: TraceProfile, options: FindingOptions) -> list[tuple[SpanProfile, list[SpanProfile]]]:
    """Each chain long enough to report, with the parent of its calls."""
    chains = []
    for parent in profile.spans:
        if len(parent.children) < 2:
            continue  # no chain of calls
        # One span per call: copies of a call and spans that call no model are not calls of their own.
        llm_children = llm_calls_among(parent.children)
        for run in _sequential_runs(llm_children):
            if len(run) >= max(options.min_llm_chain, 2):
                chains.append((parent, run))
    return chains


def _models(run: list[SpanProfile]) -> list[str]:
    return sorted({s.model or s.operation for s in run})


def _operation(models: list[str]) -> str | None:
    """The model of a chain's calls (``_models``), when they share one."""
    return models[0] if len(models) == 1 else None


_SUGGESTION = (
    "Merge steps that need no separate round trip into one prompt, "
    "and run the calls that do not need each other's answers together."
)


def _chain_finding(
    profile: TraceProfile, parent: SpanProfile, run: list[SpanProfile], schedule: RecordedSchedule | None
) -> Finding:
    llm_ns = sum(s.duration_ns for s in run)
    chain_ns = run[-1].end_ns - run[0].start_ns
    usage = TokenUsage()
    for span in run:
        if span.tokens is not None:
            usage.add(span.tokens)
    _, saving_2x = _projected(profile, _with_descendants(run), 0.5, schedule=schedule)
    models = _models(run)
    return Finding(
        kind=SEQUENTIAL_LLM_CHAIN,
        title=(
            f"{len(run)} LLM calls under '{parent.name}' ran one after another, a round trip each: "
            f"{format_duration(llm_ns)} in the calls, from the first one's start to the last one's end "
            f"{format_duration(chain_ns)} ({_percent(_share(chain_ns, profile.duration_ns))} of the trace)."
        ),
        suggestion=_SUGGESTION,
        where=where(profile, run),
        span_ids=tuple(s.record.span_id for s in run),
        operation=_operation(models),
        category=LLM,
        evidence={
            "calls": len(run),
            "parent_span_id": parent.record.span_id,
            "models": list(models),
            "llm_time_ns": llm_ns,
            "chain_ns": chain_ns,
            "between_calls_ns": chain_ns - llm_ns,
            "trace_share": _share(chain_ns, profile.duration_ns),
            "on_critical_path": sum(1 for s in run if s.on_critical_path),
            "tokens": _tokens(usage),
            "saving_if_2x_faster_ns": saving_2x,
        },
    )

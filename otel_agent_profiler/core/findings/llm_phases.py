"""Findings from the inside of LLM calls: queueing, prefill and decode (``core.call_anatomy``).

They need an inference server's span below the calls (vLLM's or SGLang's ``llm_request``) and
look only at the critical path, where time decides when the trace ends:

* ``llm_queue``: calls waited in the server's queue for a large share of the critical path: the
  server is saturated. The saving is projected on the tree with every call's queue time removed;
* ``llm_prefill``: prefill is most of the critical path's LLM time: long, uncached prompts;
* ``llm_decode``: decoding is most of it: long answers.

Prefill and decode suggest changes of no definite size (cache prefixes, cap tokens), so their
``saving_ns`` is 0; ``evidence["saving_if_2x_faster_ns"]`` projects that phase twice as fast.
"""

from __future__ import annotations

from ..backend_load import summarize_loads
from ..call_anatomy import server_phases_ns
from ..categories import LLM
from ..model_facts import cheaper_models
from ..profile import SpanProfile, TraceProfile
from ..projection import RecordedSchedule, projected_duration_scaled_ns
from .base import (
    DEFAULT_OPTIONS,
    Evidence,
    Finding,
    FindingOptions,
    _percent,
    _plural,
    _share,
    format_duration,
    where,
)

LLM_QUEUE = "llm_queue"
LLM_PREFILL = "llm_prefill"
LLM_DECODE = "llm_decode"

#: Queue time at least this share of the critical path: the server is saturated.
QUEUE_SHARE_OF_CRITICAL_PATH = 0.1
#: Prefill (or decode) at least this share of the critical path's time in split LLM calls.
PHASE_DOMINATES = 0.5
#: A call queued at least this long counts as queued (a request always waits a moment to be scheduled).
_QUEUED_NS = 1_000_000
#: How many calls ``where`` names, the largest first.
_CALLS_NAMED = 4


def _split_calls_on_path(profile: TraceProfile) -> list[SpanProfile]:
    return [s for s in profile.spans if s.llm_phases is not None and s.llm_call_critical_path_ns > 0]


def _saving_without(profile: TraceProfile, phase: int, factor: float, schedule: RecordedSchedule | None) -> int:
    """How much sooner the trace ends with one phase (0 queue, 1 prefill, 2 decode) of every split call scaled."""
    scales: dict[SpanProfile, float] = {}
    for span in profile.spans:
        if span.same_call_as is None or span.children:
            continue
        own = span.self_time_ns
        if own <= 0:
            continue
        removed = server_phases_ns(span.record.attributes)[phase] * (1 - factor)
        if removed > 0:
            scales[span] = max(0.0, (own - removed) / own)
    if not scales:
        return 0
    return max(0, profile.duration_ns - projected_duration_scaled_ns(profile, scales, schedule=schedule))


def find_llm_phases(
    profile: TraceProfile, options: FindingOptions = DEFAULT_OPTIONS, *, schedule: RecordedSchedule | None = None
) -> list[Finding]:
    """Queue, prefill or decode holding much of the critical path, from the inference server's spans."""
    phases = profile.critical_path_llm_phases
    critical = profile.critical_path_ns
    if phases is None or critical <= 0:
        return []
    calls = _split_calls_on_path(profile)
    llm_on_path = phases.total_ns
    findings: list[Finding] = []
    queue_share = _share(phases.queue_ns, critical)
    if queue_share >= QUEUE_SHARE_OF_CRITICAL_PATH:
        queued = sorted(
            (s for s in calls if s.llm_phases is not None and s.llm_phases.queue_ns >= _QUEUED_NS),
            key=lambda s: (-(s.llm_phases.queue_ns if s.llm_phases else 0), s.start_ns),
        )
        saving = _saving_without(profile, 0, 0.0, schedule)
        evidence: Evidence = {
            "queue_ns": phases.queue_ns,
            "critical_path_share": queue_share,
            "calls": len(queued),
            "projected_duration_without_queue_ns": profile.duration_ns - saving,
        }
        # The server's own metrics, when they were polled, say how full it was while the calls queued.
        load = summarize_loads(queued)
        seen = ""
        if load is not None:
            evidence["server_load"] = load.to_dict()
            if load.waiting_max is not None:
                seen = f" (its metrics showed up to {_plural(round(load.waiting_max), 'request')} waiting)"
        findings.append(
            Finding(
                kind=LLM_QUEUE,
                title=(
                    f"{_plural(len(queued), 'LLM call')} on the critical path waited "
                    f"{format_duration(phases.queue_ns)} in the inference server's queue "
                    f"({_percent(queue_share)} of the critical path): the server is saturated{seen}; without the "
                    f"wait the trace would end {format_duration(saving)} sooner."
                ),
                suggestion=(
                    "Add replicas or capacity to the server, lower the number of requests the agent sends at "
                    "once, or give the agent's critical calls priority (vLLM: --scheduling-policy priority)."
                ),
                where=where(profile, queued[:_CALLS_NAMED]),
                saving_ns=saving,
                span_ids=tuple(s.record.span_id for s in queued),
                category=LLM,
                evidence=evidence,
            )
        )
    for phase, kind, index, what, suggestion in (
        (
            phases.prefill_ns,
            LLM_PREFILL,
            1,
            "prefilling prompts",
            "Long prompts dominate: turn on prefix caching (vLLM: --enable-prefix-caching) and keep the shared "
            "start of every prompt identical so it is served from the cache, or send shorter context.",
        ),
        (
            phases.decode_ns,
            LLM_DECODE,
            2,
            "decoding answers",
            "Long outputs dominate: cap the output tokens (max_tokens) or ask for shorter answers.",
        ),
    ):
        share = _share(phase, llm_on_path)
        if share < PHASE_DOMINATES:
            continue
        ranked = sorted(calls, key=lambda span: (-_phase_of(span, index), span.start_ns))
        saving_2x = _saving_without(profile, index, 0.5, schedule)
        findings.append(
            Finding(
                kind=kind,
                title=(
                    f"The inference server spent {format_duration(phase)} of the critical path {what} "
                    f"({_percent(share)} of the LLM calls' time on it, {_percent(_share(phase, critical))} "
                    f"of the critical path)."
                ),
                suggestion=suggestion + _smaller_models(ranked) if kind == LLM_DECODE else suggestion,
                where=where(profile, ranked[:_CALLS_NAMED]),
                span_ids=tuple(s.record.span_id for s in ranked),
                category=LLM,
                evidence={
                    "phase_ns": phase,
                    "llm_critical_path_share": share,
                    "critical_path_share": _share(phase, critical),
                    "calls": len(ranked),
                    "saving_if_2x_faster_ns": saving_2x,
                },
            )
        )
    return findings


def _phase_of(span: SpanProfile, index: int) -> int:
    phases = span.llm_phases
    if phases is None:
        return 0
    return (phases.queue_ns, phases.prefill_ns, phases.decode_ns)[index]


def _smaller_models(calls: list[SpanProfile]) -> str:
    """The end of the decode suggestion naming cheaper models of the calls' own lines, when the price
    table knows any; nothing otherwise (a model with no smaller sibling gets no such advice)."""
    models = dict.fromkeys(s.model or s.operation for s in calls)
    smaller = [name for model in models for name in cheaper_models(model)[:1] if name not in models]
    if not smaller:
        return ""
    return f" Or try {' or '.join(dict.fromkeys(smaller))} for these calls, at a lower price per token."

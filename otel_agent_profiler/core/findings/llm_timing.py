"""LLM timing, gaps between calls, prefix cache.

Streaming calls split into time to first token and decoding, the time between consecutive calls
of one agent, and the share of input tokens served from the prefix cache.
"""

from __future__ import annotations

from ..call_parts import llm_calls_among
from ..categories import LLM
from ..genai import TokenUsage, records_cached_input
from ..intervals import union_length
from ..model_facts import caching_minimum, provider_of
from ..profile import SpanProfile, TraceProfile
from ..projection import RecordedSchedule
from .base import (
    DEFAULT_OPTIONS,
    Finding,
    FindingOptions,
    JSONValue,
    _by_start,
    _llm_calls,
    _percent,
    _plural,
    _share,
    format_duration,
    where,
)

LLM_TIMING = "llm_timing"
LLM_GAPS = "llm_gaps"
PREFIX_CACHE = "prefix_cache"

#: Time to first token at least this share of the streaming calls' time: streaming to the user pays.
FIRST_TOKEN_DOMINATES = 0.5
#: Prefix caching is suggested below this hit rate, when at least this many input tokens were not cached.
LOW_CACHE_HIT_RATE = 0.5
MIN_UNCACHED_TOKENS = 1024


def find_llm_timing(
    profile: TraceProfile, options: FindingOptions = DEFAULT_OPTIONS, *, schedule: RecordedSchedule | None = None
) -> list[Finding]:
    """Streaming LLM calls split into time to first token (waiting) and decoding, per call and in total."""
    streaming = [s for s in _by_start(_llm_calls(profile)) if s.streaming]
    timed = [s for s in streaming if s.time_to_first_token_ns is not None]
    if not timed:
        return []
    calls: list[JSONValue] = []
    total_first = total_decode = 0
    for span in timed:
        assert span.time_to_first_token_ns is not None
        first = min(span.time_to_first_token_ns, span.duration_ns)
        decode = span.duration_ns - first
        total_first += first
        total_decode += decode
        output = span.tokens.output if span.tokens is not None else 0
        calls.append(
            {
                "span_id": span.record.span_id,
                "model": span.model or span.operation,
                "time_to_first_token_ns": first,
                "decode_ns": decode,
                "output_tokens": output,
                "decode_tokens_per_s": round(output / (decode / 1e9), 1) if decode > 0 and output else None,
                "on_critical_path": span.on_critical_path,
            }
        )
    share = _share(total_first, total_first + total_decode)
    return [
        Finding(
            kind=LLM_TIMING,
            title=(
                f"{_plural(len(timed), 'streaming LLM call')} waited {format_duration(total_first)} for the "
                f"first token and spent {format_duration(total_decode)} decoding "
                f"({_percent(share)} of the time waiting)."
            ),
            suggestion=(
                "Stream the answer on to the user as it arrives: most of these calls' time is the wait "
                "for the first token."
                if share >= FIRST_TOKEN_DOMINATES
                else None
            ),
            where=where(profile, timed),
            span_ids=tuple(s.record.span_id for s in timed),
            category=LLM,
            evidence={
                "calls": calls,
                "time_to_first_token_ns": total_first,
                "decode_ns": total_decode,
                "first_token_share": share,
                "streaming_without_first_token": len(streaming) - len(timed),
            },
        )
    ]


def find_llm_gaps(
    profile: TraceProfile, options: FindingOptions = DEFAULT_OPTIONS, *, schedule: RecordedSchedule | None = None
) -> list[Finding]:
    """Time between consecutive LLM calls of one agent (a span's LLM children one after another):
    how much of it other steps (tools, retrievals, ...) cover, and how much is the agent's own."""
    found = _llm_gaps(profile)
    gaps: list[JSONValue] = []
    span_ids: list[str] = []
    spans: dict[str, SpanProfile] = {}
    total = total_covered = 0
    for parent, before, after, covered in found:
        gap = after.start_ns - before.end_ns
        total += gap
        total_covered += covered
        span_ids.extend((before.record.span_id, after.record.span_id))
        spans.update({before.record.span_id: before, after.record.span_id: after})
        gaps.append(
            {
                "parent_span_id": parent.record.span_id,
                "after_span_id": before.record.span_id,
                "before_span_id": after.record.span_id,
                "gap_ns": gap,
                "other_steps_ns": covered,
                "own_ns": gap - covered,
            }
        )
    if total <= 0:
        # Calls back to back: no time passed between them, so there is nothing to report.
        return []
    own = total - total_covered
    return [
        Finding(
            kind=LLM_GAPS,
            title=(
                f"{format_duration(total)} passed between consecutive LLM calls "
                f"({_plural(len(gaps), 'gap')}): {format_duration(total_covered)} in tools and other steps, "
                f"{format_duration(own)} in the agents' own code."
            ),
            suggestion=_gaps_suggestion(profile, options, total, own),
            where=where(profile, spans.values()),
            span_ids=tuple(dict.fromkeys(span_ids)),
            category=LLM,
            evidence={
                "gaps": gaps,
                "gap_ns": total,
                "other_steps_ns": total_covered,
                "own_ns": total - total_covered,
                "trace_share": _share(total, profile.duration_ns),
            },
        )
    ]


def find_llm_gaps_for_summary(
    profile: TraceProfile, options: FindingOptions = DEFAULT_OPTIONS, *, schedule: RecordedSchedule | None = None
) -> list[Finding]:
    """``find_llm_gaps`` for a summary across traces (``find_all(..., for_summary=True)``): the same
    finding without title, evidence or ``where`` (the summary groups it by its kind alone)."""
    found = _llm_gaps(profile)
    total = sum(after.start_ns - before.end_ns for _, before, after, _ in found)
    if total <= 0:
        return []
    own = total - sum(covered for _, _, _, covered in found)
    span_ids = (span.record.span_id for _, before, after, _ in found for span in (before, after))
    return [
        Finding(
            kind=LLM_GAPS,
            title="",
            suggestion=_gaps_suggestion(profile, options, total, own),
            span_ids=tuple(dict.fromkeys(span_ids)),
            category=LLM,
        )
    ]


def _llm_gaps(profile: TraceProfile) -> list[tuple[SpanProfile, SpanProfile, SpanProfile, int]]:
    """Each gap between consecutive LLM calls of one span: the span, the calls before and after the
    gap, and how much of it the span's other steps cover."""
    gaps = []
    for parent in profile.spans:
        if len(parent.children) < 2:
            continue  # no consecutive calls
        # One span per call: copies of a call and spans that call no model are not calls of their own.
        llm_children = llm_calls_among(parent.children)
        if len(llm_children) < 2:
            continue
        other_steps = [(c.start_ns, c.end_ns) for c in parent.children if c.category != LLM]
        for index in range(1, len(llm_children)):
            before, after = llm_children[index - 1], llm_children[index]
            if after.start_ns < before.end_ns:
                continue  # overlapping calls: no gap
            start, end = before.end_ns, after.start_ns
            # The steps within the gap, clipped to it (those outside it would cover nothing).
            others = [(max(s, start), min(e, end)) for s, e in other_steps if s < end and e > start]
            gaps.append((parent, before, after, union_length(others)))
    return gaps


def _gaps_suggestion(profile: TraceProfile, options: FindingOptions, total: int, own: int) -> str | None:
    # The agents' own code is worth a look only when it is a real part of the trace and of the gaps.
    if own >= options.min_saving * profile.duration_ns and 2 * own >= total:
        return f"Look at what the agents' own code does between LLM calls: {format_duration(own)} goes there."
    return None


def find_prefix_cache(
    profile: TraceProfile, options: FindingOptions = DEFAULT_OPTIONS, *, schedule: RecordedSchedule | None = None
) -> list[Finding]:
    """Prefix-cache hit rate: cached input tokens over input tokens, per model and in total, over the
    calls the cache could serve.

    A call counts only when its provider's calls record cached input tokens (an instrumentation that
    never records them says nothing about the cache, and 0 would be a guess) and its prompt reaches
    the provider's caching minimum (``model_facts.caching_minimum``): shorter prompts are never cached.
    """
    with_input = [s for s in _by_start(_llm_calls(profile)) if s.tokens is not None and s.tokens.input > 0]
    providers = {s.record.span_id: provider_of(s.record.attributes, s.model or s.operation) for s in with_input}
    recording = {providers[s.record.span_id] for s in with_input if records_cached_input(s.record.attributes)}
    recorded = [s for s in with_input if providers[s.record.span_id] in recording]
    calls = [s for s in recorded if _long_enough_to_cache(s)]
    if not calls:
        return []
    by_model: dict[str, TokenUsage] = {}
    for span in calls:
        assert span.tokens is not None
        by_model.setdefault(span.model or span.operation, TokenUsage()).add(span.tokens)
    total = TokenUsage()
    models: dict[str, JSONValue] = {}
    for model in sorted(by_model):
        usage = by_model[model]
        total.add(usage)
        cached = min(usage.cached_input, usage.input)
        models[model] = {"input": usage.input, "cached_input": cached, "hit_rate": _share(cached, usage.input)}
    cached = min(total.cached_input, total.input)
    rate = _share(cached, total.input)
    worth_caching = len(calls) > 1 and rate < LOW_CACHE_HIT_RATE and total.input - cached >= MIN_UNCACHED_TOKENS
    short = len(recorded) - len(calls)
    of_which = "the input tokens"
    if short:
        # Say which calls the rate is about when some were too short to count.
        of_which += f" of the {_plural(len(calls), 'call')} with prompts long enough to cache"
    return [
        Finding(
            kind=PREFIX_CACHE,
            title=(
                f"The provider's prefix cache served {_percent(rate)} of {of_which} ({cached:,} of {total.input:,})."
            ),
            suggestion=(
                "Reuse the shared prompt prefix: put what the calls share (system prompt, tool definitions) first "
                "and keep it unchanged between calls, so the provider can cache it."
                if worth_caching
                else None
            ),
            span_ids=tuple(s.record.span_id for s in calls),
            where=where(profile, calls),
            category=LLM,
            evidence={
                "input": total.input,
                "cached_input": cached,
                "uncached_input": total.input - cached,
                "hit_rate": rate,
                "by_model": models,
                "calls": len(calls),
                "calls_below_caching_minimum": short,
                "calls_without_cache_counts": len(with_input) - len(recorded),
            },
        )
    ]


def _long_enough_to_cache(span: SpanProfile) -> bool:
    # A provider whose minimum is not known (a self-hosted server) is taken at its word: it records
    # cached tokens, so it caches, whatever the prompt's length.
    minimum = caching_minimum(span.model or span.operation)
    return span.tokens is not None and span.tokens.input >= (minimum or 0)

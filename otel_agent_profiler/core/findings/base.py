"""What every finder shares: the ``Finding`` type, ``FindingOptions`` and helpers.

The helpers format durations and shares, label spans and project savings on the span tree.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar, Union

from ..categories import LLM
from ..fast_pickle import pickled_by_fields
from ..genai import TokenUsage
from ..profile import SpanProfile, TraceProfile
from ..projection import RecordedSchedule, projected_duration_scaled_ns, projected_durations_scaled_ns
from ..units import format_duration as format_duration  # findings write durations as the reports do
from .rests_on import MEASURED_TIMES

_Found = TypeVar("_Found")

JSONValue = Union[str, int, float, bool, None, list["JSONValue"], dict[str, "JSONValue"]]  # noqa: UP007
Evidence = dict[str, JSONValue]

#: What a per-category budget (``FindingOptions.category_budgets``) can limit: the category's
#: tokens, its cost in US dollars, and its critical-path time in milliseconds (the part of the
#: trace's duration its spans account for; self time would count parallel calls several times).
CATEGORY_BUDGET_MEASURES: tuple[str, ...] = ("tokens", "cost_usd", "critical_path_ms")

#: Context windows in tokens, by model alias (snapshots match their alias); every model of
#: ``core.pricing.BUILT_IN_PRICES`` has one. Extend with ``--context-windows``,
#: ``OTEL_AGENT_PROFILER_CONTEXT_WINDOWS`` or
#: ``FindingOptions(context_windows={**DEFAULT_CONTEXT_WINDOWS, "my-model": 32_000})``.
DEFAULT_CONTEXT_WINDOWS: Mapping[str, int] = {
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    # The GPT-4.1 family's "1M" window is 1,047,576 tokens.
    "gpt-4.1": 1_047_576,
    "gpt-4.1-mini": 1_047_576,
    "gpt-4.1-nano": 1_047_576,
    # GPT-5 and GPT-5 mini: a 400,000-token window (of which at most 272,000 input), per
    # platform.openai.com/docs/models/gpt-5 and /gpt-5-mini.
    "gpt-5": 400_000,
    "gpt-5-mini": 400_000,
    # Embedding models take at most 8,191 input tokens (platform.openai.com/docs/guides/embeddings).
    "text-embedding-3-small": 8_191,
    "text-embedding-3-large": 8_191,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o3": 200_000,
    "o3-mini": 200_000,
    "o4-mini": 200_000,
    "claude-3-5-sonnet": 200_000,
    "claude-3-5-haiku": 200_000,
    "claude-3-7-sonnet": 200_000,
    # Claude 4.x: 200K tokens (Sonnet 4 and 4.5 offer 1M only as a beta, on request), per
    # platform.claude.com/docs/en/about-claude/models/overview.
    "claude-sonnet-4": 200_000,
    "claude-sonnet-4-5": 200_000,
    "claude-opus-4": 200_000,
    "claude-opus-4-1": 200_000,
    "claude-opus-4-5": 200_000,
    "claude-haiku-4-5": 200_000,
    "gemini-1.5-pro": 2_097_152,
    "gemini-1.5-flash": 1_048_576,
    "gemini-2.0-flash": 1_048_576,
}


@pickled_by_fields
@dataclass(slots=True)
class Finding:
    """One thing worth acting on in a trace."""

    kind: str
    #: One readable line.
    title: str
    #: Estimated saving of end-to-end time; 0 when the finding saves no latency.
    saving_ns: int = 0
    span_ids: tuple[str, ...] = ()
    operation: str | None = None
    category: str | None = None
    #: The numbers behind the finding, as plain JSON values (times in ns, costs in USD).
    evidence: Evidence = field(default_factory=dict)
    #: What to change, one plain sentence; ``None`` when the finding suggests nothing.
    suggestion: str | None = None
    #: Where: one entry per span (``span_id``, ``name``, ``category``, ``operation``: the model or
    #: tool, ``start_offset_ns`` from the trace's start, ``duration_ns``), in start order.
    where: list[Evidence] = field(default_factory=list)
    #: Findings about the same spans folded into this one by ``find_all``: ``kind``, ``title``,
    #: ``saving_ns``, ``span_ids`` each.
    details: list[Evidence] = field(default_factory=list)
    #: Why the verdict may be wrong, one sentence (a child span ran past its parent's end and
    #: moved time into another span's own time); ``None`` when nothing casts doubt on it.
    caveat: str | None = None
    #: What the finding rests on, one of ``rests_on.RESTS_ON``: "measured" for the trace's recorded
    #: times; a parallelization's evidence of independence, or that it is assumed; "estimated
    #: timing" when the adapter laid the times out. Assumed and estimated ones are left out of
    #: ``combined_projection``.
    rests_on: str = MEASURED_TIMES

    def to_dict(self) -> dict[str, JSONValue]:
        return {
            "kind": self.kind,
            "title": self.title,
            "saving_ns": self.saving_ns,
            "span_ids": list(self.span_ids),
            "operation": self.operation,
            "category": self.category,
            "suggestion": self.suggestion,
            "where": list[JSONValue](self.where),
            "details": list[JSONValue](self.details),
            "evidence": self.evidence,
            "rests_on": self.rests_on,
            # Only when there is one: findings without a caveat keep their shape.
            **({"caveat": self.caveat} if self.caveat is not None else {}),
        }


def _default_context_windows() -> dict[str, int]:
    return dict(DEFAULT_CONTEXT_WINDOWS)


@dataclass(frozen=True, slots=True)
class FindingOptions:
    """Thresholds and budgets of the findings."""

    #: Bottlenecks: how many spans and how many operations to report.
    top_n: int = 3
    #: Slow tools: self time at least this many milliseconds, or at least this share of the trace.
    slow_tool_ms: float = 1000.0
    slow_tool_share: float = 0.2
    #: Large prompts: input tokens at least this share of the model's context window.
    large_prompt_share: float = 0.5
    #: Context windows by model; replaces the defaults (see ``DEFAULT_CONTEXT_WINDOWS``).
    context_windows: Mapping[str, int] = field(default_factory=_default_context_windows)
    #: Sequential LLM chains: at least this many calls in a row.
    min_llm_chain: int = 4
    #: What-ifs that ``find_all`` evaluates: ``(selector, speedup)`` pairs, see ``what_if``.
    what_ifs: Sequence[tuple[str, float]] = ()
    budget_tokens: int | None = None
    budget_cost_usd: float | None = None
    budget_latency_ms: float | None = None
    #: Budgets per category: ``{"llm": {"tokens": 100_000, "cost_usd": 0.10}, "tool": {"critical_path_ms": 500}}``,
    #: the measures of ``CATEGORY_BUDGET_MEASURES``.
    category_budgets: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    #: The noise floor of ``find_all``: a finding saving more than nothing but less than this share
    #: of the trace's duration is left out (0 keeps every one). What-ifs are always kept.
    min_saving: float = 0.01


DEFAULT_OPTIONS = FindingOptions()


# --------------------------------------------------------------------------------------------
# Shared helpers


def _share(part: float, whole: float) -> float:
    return round(part / whole, 4) if whole > 0 else 0.0


def _percent(share: float) -> str:
    # A share that rounds to 0% but is not nothing says so, rather than "0%".
    return "under 1%" if 0 < share < 0.005 else f"{share:.0%}"


def _at(profile: TraceProfile, span: SpanProfile) -> str:
    """When a span started, for a sentence: "at the start", "at 1.18 s"."""
    offset = span.start_ns - profile.start_ns
    return "at the start" if offset == 0 else f"at {format_duration(offset)}"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def where(profile: TraceProfile, spans: Iterable[SpanProfile]) -> list[Evidence]:
    """Where a finding is: each span's id, name, category, operation (model or tool), start offset
    from the trace's start and duration, in start order."""
    return [
        {
            "span_id": span.record.span_id,
            "name": span.name,
            "category": span.category,
            "operation": span.operation,
            "start_offset_ns": span.start_ns - profile.start_ns,
            "duration_ns": span.duration_ns,
        }
        for span in _by_start(spans)
    ]


def names_where(spans: Iterable[SpanProfile]) -> list[Evidence]:
    """``where`` for a summary across traces (``find_all(..., for_summary=True)``), which reads only
    the spans' names: each span's name, in start order."""
    return [{"name": span.name} for span in _by_start(spans)]


def word_ties_in_full(
    found: Sequence[_Found],
    saving: Callable[[_Found], int],
    worded: Callable[[_Found], Finding],
    unworded: Callable[[_Found], Finding],
) -> list[Finding]:
    """A summary finder's findings (``find_all(..., for_summary=True)``): each ``unworded``, except
    those whose saving another one of ``found`` shares, ``worded`` in full: ``rank`` orders findings
    of one kind with equal savings by their titles."""
    savings = Counter(saving(item) for item in found)
    return [worded(item) if savings[saving(item)] > 1 else unworded(item) for item in found]


def describe_location(location: Mapping[str, JSONValue]) -> str:
    """One entry of ``Finding.where`` in words: "'openai.chat' (gpt-4o-mini) at 1.18 s"; the model or
    tool is left out when the span's name already says it."""
    name, operation, offset = location.get("name"), location.get("operation"), location.get("start_offset_ns")
    text = f"'{name}'"
    if isinstance(operation, str) and isinstance(name, str) and operation not in name:
        text += f" ({operation})"
    if isinstance(offset, int):
        text += " at the start" if offset == 0 else f" at {format_duration(offset)}"
    return text


def describe_where(locations: Sequence[Mapping[str, JSONValue]], limit: int = 4) -> str:
    """``Finding.where`` in words: up to ``limit`` spans, then how many more; spans of one name and
    operation are named once ("'openai.chat' (gpt-4o) at 1.67 s and 2.54 s")."""
    if len(locations) > 1 and len({(loc.get("name"), loc.get("operation")) for loc in locations}) == 1:
        first = describe_location({**locations[0], "start_offset_ns": None})
        offsets = [loc.get("start_offset_ns") for loc in locations[:limit]]
        times = ["the start" if t == 0 else format_duration(t) for t in offsets if isinstance(t, int)]
        if len(locations) > limit:
            times.append(_plural(len(locations) - limit, "more time"))
        return f"{first} at {', '.join(times[:-1])} and {times[-1]}" if len(times) > 1 else first
    shown = [describe_location(location) for location in locations[:limit]]
    if len(locations) > limit:
        shown.append(f"{len(locations) - limit} more")
    if len(shown) <= 1:
        return "".join(shown)
    return ", ".join(shown[:-1]) + " and " + shown[-1]


def _by_start(spans: Iterable[SpanProfile]) -> list[SpanProfile]:
    return sorted(spans, key=lambda s: (s.start_ns, s.record.span_id))


def _with_descendants(spans: Iterable[SpanProfile]) -> set[SpanProfile]:
    selected: set[SpanProfile] = set()
    stack = list(spans)
    while stack:
        span = stack.pop()
        if span not in selected:
            selected.add(span)
            stack.extend(span.children)
    return selected


def _projected(
    profile: TraceProfile,
    selected: Collection[SpanProfile] = (),
    scale: float = 1.0,
    independent: Collection[frozenset[str]] | None = None,
    schedule: RecordedSchedule | None = None,
) -> tuple[int, int]:
    """Projected duration with ``selected`` spans' own time scaled, and the saving it makes."""
    if independent:
        projected = projected_duration_scaled_ns(
            profile, dict.fromkeys(selected, scale), independent, schedule=schedule
        )
    else:
        # One factor for every span: checked once, not per span.
        (projected,) = projected_durations_scaled_ns(profile, selected, (scale,), schedule=schedule)
    return projected, profile.duration_ns - projected


def _removed_and_halved(
    profile: TraceProfile, selected: Collection[SpanProfile], schedule: RecordedSchedule | None
) -> tuple[int, int, int, int]:
    """``_projected`` with ``selected`` removed, then twice as fast: both durations and their savings."""
    removed, halved = projected_durations_scaled_ns(profile, selected, (0.0, 0.5), schedule=schedule)
    return removed, profile.duration_ns - removed, halved, profile.duration_ns - halved


def _tokens(usage: TokenUsage | None) -> dict[str, JSONValue]:
    return dict(usage.to_dict()) if usage is not None else dict(TokenUsage().to_dict())


def _llm_calls(profile: TraceProfile) -> list[SpanProfile]:
    # ``counted`` leaves out the outer span of two nested spans describing one call.
    return [s for s in profile.spans if s.category == LLM and s.counted]

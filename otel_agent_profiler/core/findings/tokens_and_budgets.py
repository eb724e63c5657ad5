"""Tokens, cost and budgets: where the tokens (and dollars) go, and which budgets the trace exceeds."""

from __future__ import annotations

from collections.abc import Mapping

from ..genai import TokenUsage
from ..profile import TraceProfile
from ..projection import RecordedSchedule
from .base import (
    CATEGORY_BUDGET_MEASURES,
    DEFAULT_OPTIONS,
    Finding,
    FindingOptions,
    JSONValue,
    _percent,
    _share,
    _tokens,
    format_duration,
)

TOKEN_PROFILE = "token_profile"
BUDGET_EXCEEDED = "budget_exceeded"


def find_token_profile(
    profile: TraceProfile, options: FindingOptions = DEFAULT_OPTIONS, *, schedule: RecordedSchedule | None = None
) -> list[Finding]:
    """Tokens (and cost, when the profile was made with prices) per operation, model and category,
    and how much of it lies on the critical path."""
    if profile.tokens.is_empty() and profile.cost_usd is None:
        return []
    costs: dict[tuple[str, str], float] = {}
    for span in profile.spans:
        if span.counted and span.cost_usd is not None:
            key = (span.category, span.operation)
            costs[key] = costs.get(key, 0.0) + span.cost_usd
    operations: list[JSONValue] = []
    categories: dict[str, JSONValue] = {}
    category_tokens: dict[str, TokenUsage] = {}
    for (category, operation), op in sorted(profile.operations.items()):
        if op.tokens.is_empty() and (category, operation) not in costs:
            continue
        category_tokens.setdefault(category, TokenUsage()).add(op.tokens)
        entry: dict[str, JSONValue] = {"category": category, "operation": operation, "calls": op.count}
        entry.update(_tokens(op.tokens))
        entry["cost_usd"] = costs.get((category, operation))
        operations.append(entry)
    for category, usage in category_tokens.items():
        category_cost = [cost for (cat, _), cost in costs.items() if cat == category]
        categories[category] = {**_tokens(usage), "cost_usd": sum(category_cost) if category_cost else None}
    models: dict[str, JSONValue] = {
        model: {**_tokens(usage), "cost_usd": profile.cost_by_model.get(model)}
        for model, usage in sorted(profile.tokens_by_model.items())
    }
    total = profile.tokens.total
    critical_share = _share(profile.critical_path_tokens.total, total)
    cost = f" (${profile.cost_usd:.4f})" if profile.cost_usd is not None else ""
    return [
        Finding(
            kind=TOKEN_PROFILE,
            title=(
                f"{total:,} tokens{cost} in {profile.llm_calls} LLM call{'s' if profile.llm_calls != 1 else ''}, "
                f"{_percent(critical_share)} of them on the critical path."
            ),
            evidence={
                "tokens": _tokens(profile.tokens),
                "cost_usd": profile.cost_usd,
                "by_operation": operations,
                "by_model": models,
                "by_category": categories,
                "critical_path_tokens": _tokens(profile.critical_path_tokens),
                "critical_path_token_share": critical_share,
                "critical_path_cost_usd": profile.critical_path_cost_usd,
            },
        )
    ]


def find_token_profile_for_summary(
    profile: TraceProfile, options: FindingOptions = DEFAULT_OPTIONS, *, schedule: RecordedSchedule | None = None
) -> list[Finding]:
    """``find_token_profile`` for a summary across traces (``find_all(..., for_summary=True)``): nothing.
    A token profile saves no time and suggests nothing, so ``rank`` leaves it out of every trace's findings."""
    return []


def find_budget_overruns(
    profile: TraceProfile, options: FindingOptions = DEFAULT_OPTIONS, *, schedule: RecordedSchedule | None = None
) -> list[Finding]:
    """A finding per budget the trace, or one of its categories, exceeds.

    A cost budget needs a profile made with prices: a trace (or category) with no priced call is
    not checked. A category's duration is the time its spans hold on the critical path.
    Raises ``ValueError`` for a measure not in ``CATEGORY_BUDGET_MEASURES``.
    """
    findings: list[Finding] = []
    tokens = profile.tokens.total
    if options.budget_tokens is not None and tokens > options.budget_tokens:
        over = tokens - options.budget_tokens
        findings.append(
            _budget(
                "tokens",
                f"{tokens:,} tokens, {over:,} over the budget of {options.budget_tokens:,}",
                tokens,
                options.budget_tokens,
            )
        )
    cost = profile.cost_usd
    if options.budget_cost_usd is not None and cost is not None and cost > options.budget_cost_usd:
        title = f"${cost:.4f}, ${cost - options.budget_cost_usd:.4f} over the budget of ${options.budget_cost_usd:.4f}"
        findings.append(_budget("cost_usd", title, cost, options.budget_cost_usd))
    if options.budget_latency_ms is not None:
        limit_ns = round(options.budget_latency_ms * 1e6)
        duration = profile.duration_ns
        if duration > limit_ns:
            title = (
                f"{format_duration(duration)} end to end, {format_duration(duration - limit_ns)} over the budget "
                f"of {format_duration(limit_ns)}"
            )
            findings.append(_budget("latency_ns", title, duration, limit_ns))
    for category, limits in options.category_budgets.items():
        findings.extend(_category_overruns(profile, category, limits))
    return findings


# How a category's spans are called in a sentence.
_CATEGORY_NOUNS = {"llm": "LLM calls", "embedding": "embedding calls", "tool": "tool calls"}


def _category_overruns(profile: TraceProfile, category: str, limits: Mapping[str, float]) -> list[Finding]:
    unknown = set(limits) - set(CATEGORY_BUDGET_MEASURES)
    if unknown:
        raise ValueError(f"unknown budget measure {sorted(unknown)[0]!r}; one of {', '.join(CATEGORY_BUDGET_MEASURES)}")
    noun = _CATEGORY_NOUNS.get(category, f"{category} spans")
    findings: list[Finding] = []
    tokens_limit = limits.get("tokens")
    if tokens_limit is not None:
        tokens = sum(op.tokens.total for (cat, _), op in profile.operations.items() if cat == category)
        if tokens > tokens_limit:
            detail = f"{tokens:,} tokens, {tokens - tokens_limit:,.0f} over the budget of {tokens_limit:,.0f}"
            findings.append(_budget("tokens", detail, tokens, tokens_limit, category, noun))
    cost_limit = limits.get("cost_usd")
    if cost_limit is not None:
        costs = [s.cost_usd for s in profile.spans if s.category == category and s.counted and s.cost_usd is not None]
        cost = sum(costs)
        if costs and cost > cost_limit:
            detail = f"${cost:.4f}, ${cost - cost_limit:.4f} over the budget of ${cost_limit:.4f}"
            findings.append(_budget("cost_usd", detail, cost, cost_limit, category, noun))
    time_limit = limits.get("critical_path_ms")
    if time_limit is not None:
        limit_ns = round(time_limit * 1e6)
        held = profile.categories[category].critical_path_ns if category in profile.categories else 0
        if held > limit_ns:
            detail = (
                f"{format_duration(held)} on the critical path, {format_duration(held - limit_ns)} over the budget "
                f"of {format_duration(limit_ns)}"
            )
            findings.append(_budget("critical_path_ns", detail, held, limit_ns, category, noun))
    return findings


_BUDGET_SUGGESTIONS = {
    "tokens": "Send fewer tokens: trim or summarise the context, and cache identical calls.",
    "cost_usd": "Use a cheaper model where the answers are short, and send less context.",
    "latency_ns": "Make the changes the other findings suggest, the largest saving first.",
    "critical_path_ns": "Make these calls faster or run them together: the other findings say which.",
}

# The word for a budget's measure in a title.
_MEASURE_WORDS = {"tokens": "tokens", "cost_usd": "cost", "latency_ns": "duration", "critical_path_ns": "duration"}


def _budget(
    budget: str, detail: str, actual: float, limit: float, category: str | None = None, noun: str = ""
) -> Finding:
    over: JSONValue = actual - limit
    evidence: dict[str, JSONValue] = {"budget": budget, "limit": limit, "actual": actual, "over": over}
    if category is None:
        title = f"The trace exceeds its {_MEASURE_WORDS[budget]} budget: {detail}."
    else:
        title = f"{noun[0].upper()}{noun[1:]} exceed their {_MEASURE_WORDS[budget]} budget: {detail}."
        evidence["category"] = category
    return Finding(
        kind=BUDGET_EXCEEDED,
        title=title,
        category=category,
        suggestion=_BUDGET_SUGGESTIONS[budget],
        evidence=evidence,
    )

"""Tokens, cost and budgets: where the tokens (and dollars) go, and which budgets the trace exceeds."""

from __future__ import annotations

from ..genai import TokenUsage
from ..profile import TraceProfile
from .base import (
    BUDGET_EXCEEDED,
    DEFAULT_OPTIONS,
    TOKEN_PROFILE,
    Finding,
    FindingOptions,
    JSONValue,
    _percent,
    _share,
    _tokens,
    format_duration,
)


def find_token_profile(profile: TraceProfile, options: FindingOptions = DEFAULT_OPTIONS) -> list[Finding]:
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


def find_budget_overruns(profile: TraceProfile, options: FindingOptions = DEFAULT_OPTIONS) -> list[Finding]:
    """A finding per budget the trace exceeds. A cost budget needs a profile made with prices."""
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
    return findings


_BUDGET_SUGGESTIONS = {
    "tokens": "Send fewer tokens: trim or summarise the context, and cache identical calls.",
    "cost_usd": "Use a cheaper model where the answers are short, and send less context.",
    "latency_ns": "Make the changes the other findings suggest, the largest saving first.",
}


def _budget(budget: str, detail: str, actual: float, limit: float) -> Finding:
    over: JSONValue = actual - limit
    return Finding(
        kind=BUDGET_EXCEEDED,
        title=f"The trace exceeds its {budget.split('_')[0]} budget: {detail}.",
        suggestion=_BUDGET_SUGGESTIONS[budget],
        evidence={"budget": budget, "limit": limit, "actual": actual, "over": over},
    )

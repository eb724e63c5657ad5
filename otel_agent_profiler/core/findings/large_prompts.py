"""Large prompts: LLM calls whose input fills much of the model's context window."""

from __future__ import annotations

from collections.abc import Mapping

from ..categories import LLM
from ..genai import strip_snapshot
from ..profile import TraceProfile
from ..projection import RecordedSchedule
from .base import (
    DEFAULT_OPTIONS,
    Finding,
    FindingOptions,
    _at,
    _by_start,
    _llm_calls,
    _percent,
    _share,
    where,
)

LARGE_PROMPT = "large_prompt"


def context_window(model: str, windows: Mapping[str, int]) -> int | None:
    """The context window of ``model``: by exact name, then by its alias without snapshot date."""
    window = windows.get(model)
    if window is None:
        window = windows.get(strip_snapshot(model))
    return window


def find_large_prompts(
    profile: TraceProfile, options: FindingOptions = DEFAULT_OPTIONS, *, schedule: RecordedSchedule | None = None
) -> list[Finding]:
    """LLM calls whose input fills at least ``large_prompt_share`` of the model's context window."""
    findings: list[Finding] = []
    for span in _by_start(_llm_calls(profile)):
        model = span.model or span.operation
        window = context_window(model, options.context_windows)
        usage = span.tokens
        if window is None or window <= 0 or usage is None or usage.input <= 0:
            continue
        share = _share(usage.input, window)
        if usage.input < options.large_prompt_share * window:
            continue
        findings.append(
            Finding(
                kind=LARGE_PROMPT,
                title=(
                    f"The {model} call {_at(profile, span)} sends "
                    f"{usage.input:,} input tokens, {_percent(share)} of its {window:,}-token context window."
                ),
                suggestion=(
                    "Trim or summarise the context (older turns, long tool results) before this call: "
                    "the window is mostly used."
                ),
                where=where(profile, [span]),
                span_ids=(span.record.span_id,),
                operation=span.operation,
                category=LLM,
                evidence={
                    "model": model,
                    "input_tokens": usage.input,
                    "cached_input_tokens": usage.cached_input,
                    "context_window": window,
                    "window_share": share,
                    "threshold_share": options.large_prompt_share,
                    "cost_usd": span.cost_usd,
                },
            )
        )
    return findings

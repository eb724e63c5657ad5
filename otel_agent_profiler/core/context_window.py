"""How much of its model's context window an LLM call used: input tokens ÷ the model's window."""

from __future__ import annotations

from collections.abc import Mapping

from .categories import LLM
from .findings.base import DEFAULT_CONTEXT_WINDOWS
from .findings.large_prompts import context_window
from .profile import SpanProfile


def context_window_use(span: SpanProfile, windows: Mapping[str, int] = DEFAULT_CONTEXT_WINDOWS) -> float | None:
    """The share of its model's context window (0.42 is 42%) that ``span``'s input filled.

    None unless ``span`` is an LLM call with input tokens to a model whose window ``windows``
    knows (by name, or by the alias of a dated snapshot). Cached input tokens are input too:
    they fill the window as any other.
    """
    if span.category != LLM or span.tokens is None or span.tokens.input <= 0:
        return None
    model = span.model or span.operation
    window = context_window(model, windows)
    if window is None or window <= 0:
        return None
    return round(span.tokens.input / window, 4)

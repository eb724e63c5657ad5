"""How much of its model's context window an LLM call used: input tokens ÷ the model's window."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from .categories import LLM
from .findings.base import DEFAULT_CONTEXT_WINDOWS
from .findings.large_prompts import context_window
from .json_tables import json_table
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


def parse_context_windows(value: object) -> dict[str, int]:
    """Context windows by model from a mapping, JSON text or the path of a JSON file:
    ``{"my-model": 32000}``, in tokens (the format of ``--context-windows`` and
    ``OTEL_AGENT_PROFILER_CONTEXT_WINDOWS``). Raises ``ValueError`` saying what is wrong."""
    if isinstance(value, (str, Path)):
        value = json_table(value, "context-window table", "windows in tokens")
    if not isinstance(value, Mapping):
        raise ValueError(f"expected context windows (mapping, JSON text or file path), got {type(value).__name__}")
    windows: dict[str, int] = {}
    for model, tokens in value.items():
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
            raise ValueError(f"context window of {model!r} must be a whole number of tokens above 0, got {tokens!r}")
        windows[str(model)] = tokens
    return windows


def with_built_in_context_windows(user: Mapping[str, int] | None) -> dict[str, int]:
    """The built-in windows (``DEFAULT_CONTEXT_WINDOWS``) with ``user``'s on top."""
    return {**DEFAULT_CONTEXT_WINDOWS, **(user or {})}

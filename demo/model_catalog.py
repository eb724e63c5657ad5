"""The models the fake LLM server knows, and how fast each answers.

``ModelTiming`` and ``DEFAULT_TIMINGS`` are the per-model timings (time to first token, per-token decode and
prefill), next to the dated snapshot names responses carry, the embedding models with their latency, and the
helpers that tell a dated snapshot's alias and whether a model reasons before it answers. Everything else in
the server looks models up here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class ModelTiming:
    """How fast one model answers, in seconds (before ``time_scale``).

    ``ttft`` is the time to first token for a short prompt, ``decode_per_token`` the time per further output
    token, ``prefill_per_token`` what each uncached prompt token adds to the time to first token.
    """

    ttft: float
    decode_per_token: float
    prefill_per_token: float = 0.0


# Small enough that a demo run of a dozen calls takes a few seconds, in the ratios real models show
# (mini models answer sooner and decode faster; reasoning models think before their first visible token).
DEFAULT_TIMINGS: Mapping[str, ModelTiming] = {
    "gpt-4o-mini": ModelTiming(ttft=0.25, decode_per_token=0.006, prefill_per_token=40e-6),
    "gpt-4o": ModelTiming(ttft=0.40, decode_per_token=0.010, prefill_per_token=60e-6),
    "gpt-4.1-mini": ModelTiming(ttft=0.30, decode_per_token=0.006, prefill_per_token=40e-6),
    "gpt-4.1": ModelTiming(ttft=0.45, decode_per_token=0.011, prefill_per_token=60e-6),
    "o3-mini": ModelTiming(ttft=0.50, decode_per_token=0.007, prefill_per_token=50e-6),
    "o4-mini": ModelTiming(ttft=0.50, decode_per_token=0.006, prefill_per_token=50e-6),
}

# Real responses name a dated snapshot rather than the alias that was asked for.
_SNAPSHOTS: Mapping[str, str] = {
    "gpt-4o-mini": "gpt-4o-mini-2024-07-18",
    "gpt-4o": "gpt-4o-2024-08-06",
    "gpt-4.1-mini": "gpt-4.1-mini-2025-04-14",
    "gpt-4.1": "gpt-4.1-2025-04-14",
    "o3-mini": "o3-mini-2025-01-31",
    "o4-mini": "o4-mini-2025-04-16",
}

# Embedding models: fixed latency plus a little per input token.
_EMBEDDING_MODELS: Mapping[str, tuple[float, float]] = {
    "text-embedding-3-small": (0.03, 2e-6),
    "text-embedding-3-large": (0.05, 4e-6),
    "text-embedding-ada-002": (0.04, 3e-6),
}

_FALLBACK_MODEL = "gpt-4o-mini"
_MODEL_CREATED = 1_700_000_000

_DATED_SUFFIX = re.compile(r"-\d{4}-\d{2}-\d{2}$")
_REASONING_MODEL = re.compile(r"^o\d")


def _base_model(model: str) -> str:
    return _DATED_SUFFIX.sub("", model)


def _is_reasoning_model(model: str) -> bool:
    return bool(_REASONING_MODEL.match(_base_model(model)))

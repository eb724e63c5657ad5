"""What findings may say about a call's model (core.model_facts): provider, caching minimum, cheaper siblings."""

from __future__ import annotations

import pytest

from otel_agent_profiler.core.model_facts import (
    ANTHROPIC,
    OPENAI,
    caching_minimum,
    cheaper_models,
    model_line,
    provider_of,
)
from otel_agent_profiler.core.pricing import ModelPrice


@pytest.mark.parametrize(
    ("attributes", "model", "provider"),
    [
        ({"gen_ai.provider.name": "openai"}, "my-deployment", "openai"),
        ({"gen_ai.system": "Anthropic"}, None, "anthropic"),
        ({}, "gpt-4o-mini-2024-07-18", OPENAI),
        ({}, "o3-mini", OPENAI),
        ({}, "claude-3-5-haiku-20241022", ANTHROPIC),
        ({}, "meta-llama/Llama-3.1-8B-Instruct", None),
        ({}, None, None),
    ],
)
def test_provider_of(attributes: dict[str, object], model: str | None, provider: str | None) -> None:
    assert provider_of(attributes, model) == provider  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("model", "minimum"),
    [
        ("gpt-4o", 1024),
        ("gpt-4.1-nano-2025-04-14", 1024),
        ("o1", 1024),
        ("claude-sonnet-4-5", 1024),
        ("claude-opus-4-1", 1024),
        ("claude-3-5-haiku-20241022", 2048),
        ("claude-3-haiku-20240307", 2048),
        ("claude-sonnet-4-6", 2048),
        ("claude-haiku-4-5", 4096),
        ("claude-opus-4-5", 4096),
        ("meta-llama/Llama-3.1-8B-Instruct", None),
        (None, None),
    ],
)
def test_caching_minimum(model: str | None, minimum: int | None) -> None:
    assert caching_minimum(model) == minimum


@pytest.mark.parametrize(
    ("model", "line"),
    [
        ("gpt-4o", "gpt-4o"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o"),
        ("gpt-4.1-nano", "gpt-4.1"),
        ("o3-mini", "o3"),
        ("claude-haiku-4-5", "claude-4-5"),
        ("claude-sonnet-4-5-20250929", "claude-4-5"),
        ("claude-3-5-haiku", "claude-3-5"),
        ("my-llm", "my-llm"),
    ],
)
def test_model_line(model: str, line: str) -> None:
    assert model_line(model) == line


@pytest.mark.parametrize(
    ("model", "cheaper"),
    [
        ("gpt-4o", ["gpt-4o-mini"]),
        ("gpt-4o-2024-08-06", ["gpt-4o-mini"]),
        ("gpt-4o-mini", []),
        ("gpt-4.1", ["gpt-4.1-mini", "gpt-4.1-nano"]),
        ("gpt-5", ["gpt-5-mini"]),
        ("claude-opus-4-5", ["claude-sonnet-4-5", "claude-haiku-4-5"]),
        ("claude-haiku-4-5", []),
        # Priced, but no cheaper Claude 4 model is.
        ("claude-sonnet-4", []),
        ("my-llm", []),
    ],
)
def test_cheaper_models_from_the_built_in_prices(model: str, cheaper: list[str]) -> None:
    assert cheaper_models(model) == cheaper


def test_a_sibling_must_be_cheaper_for_input_and_output_alike() -> None:
    prices = {
        "acme-large": ModelPrice(2.0, 8.0),
        "acme-large-mini": ModelPrice(1.0, 9.0),  # cheaper input, dearer output
        "acme-large-nano": ModelPrice(0.5, 2.0),
    }
    assert cheaper_models("acme-large", prices) == ["acme-large-nano"]

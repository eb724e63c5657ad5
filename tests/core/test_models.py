"""One name per model: snapshots grouped under their family, whichever convention named the call."""

from __future__ import annotations

import pytest

from otel_agent_profiler.core import PriceTable, profile_trace
from otel_agent_profiler.core.genai import same_model
from otel_agent_profiler.core.models import is_snapshot, model_family
from otel_agent_profiler.core.pricing import BUILT_IN_PRICES, with_built_in_prices
from otel_agent_profiler.core.schema import trace_to_dict
from tests.support.span_builders import by_name, span


@pytest.mark.parametrize(
    ("model", "family", "snapshot"),
    [
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini", True),  # OpenAI, -YYYY-MM-DD
        ("o1-2024-12-17", "o1", True),
        ("gpt-4-0613", "gpt-4", True),  # OpenAI's older -MMDD
        ("gpt-3.5-turbo-0125", "gpt-3.5-turbo", True),
        ("claude-3-5-sonnet-20241022", "claude-3-5-sonnet", True),  # Anthropic, -YYYYMMDD
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5", True),
        ("claude-3-5-sonnet@20241022", "claude-3-5-sonnet", True),  # Vertex AI
        ("mistral-large-2407", "mistral-large", True),  # Mistral, -YYMM
        ("claude-3-5-sonnet-latest", "claude-3-5-sonnet", False),  # a moving alias is not a snapshot
        ("llama3:latest", "llama3", False),  # Ollama's default tag
        ("gpt-4o", "gpt-4o", False),
        ("text-embedding-3-small", "text-embedding-3-small", False),
        ("gpt-4-1106-preview", "gpt-4-1106-preview", False),
        ("gemini-1.5-pro-002", "gemini-1.5-pro-002", False),
        # Azure deployment names are the user's own: kept whole, a number is not a date.
        ("my-gpt4o-deployment", "my-gpt4o-deployment", False),
        ("gpt4o-prod-2024", "gpt4o-prod-2024", False),
        ("deployment-2048", "deployment-2048", False),
        ("gpt-4o-2024-13-01", "gpt-4o-2024-13-01", False),  # no 13th month
        # LiteLLM's provider prefixes (ADK, DSPy) name who served the model, not another model.
        ("openai/gpt-4o-mini", "gpt-4o-mini", False),
        ("openai/gpt-4o-mini-2024-07-18", "gpt-4o-mini", True),
        ("openrouter/anthropic/claude-3-5-sonnet-20241022", "claude-3-5-sonnet", True),
        ("gemini/gemini-2.0-flash", "gemini-2.0-flash", False),
        # An organisation's model on a hub is a name of its own.
        ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct", False),
        ("openai/", "openai/", False),
    ],
)
def test_model_family(model: str, family: str, snapshot: bool) -> None:
    assert model_family(model) == family
    assert is_snapshot(model) is snapshot


def test_same_model_follows_the_family_rule() -> None:
    assert same_model("gpt-4o", "gpt-4o-2024-08-06")
    assert same_model("claude-3-5-sonnet-latest", "claude-3-5-sonnet-20241022")
    assert not same_model("my-deployment", "my-deployment-2048")


def test_built_in_prices_match_every_snapshot_form() -> None:
    prices = with_built_in_prices(None)
    for snapshot, family in (
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-3-5-haiku-20241022", "claude-3-5-haiku"),
        ("claude-3-5-haiku-latest", "claude-3-5-haiku"),
    ):
        assert prices.price_of(snapshot) == BUILT_IN_PRICES[family], snapshot


def _mixed_sources_trace() -> list[object]:
    """One agent whose calls to one model three instrumentations describe, as each writes them."""
    return [
        span("agent", None, 0, 10_000_000, attributes={"gen_ai.operation.name": "invoke_agent"}),
        # GenAI (openai-v2, pydantic-ai): the requested model, and the snapshot that answered.
        span(
            "chat gpt-4o-mini",
            "agent",
            0,
            3_000_000,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
                "gen_ai.usage.input_tokens": 100,
                "gen_ai.usage.output_tokens": 10,
            },
        ),
        # OpenInference: only the answering model.
        span(
            "ChatCompletion",
            "agent",
            3_000_000,
            6_000_000,
            attributes={
                "openinference.span.kind": "LLM",
                "llm.model_name": "gpt-4o-mini-2024-07-18",
                "llm.token_count.prompt": 200,
                "llm.token_count.completion": 20,
            },
        ),
        # Traceloop (OpenLLMetry): request and response model.
        span(
            "openai.chat",
            "agent",
            6_000_000,
            9_000_000,
            attributes={
                "llm.request.type": "chat",
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
                "gen_ai.usage.input_tokens": 300,
                "gen_ai.usage.output_tokens": 30,
            },
        ),
    ]


def test_one_model_is_one_name_whichever_convention_described_it() -> None:
    trace = profile_trace(_mixed_sources_trace(), prices=with_built_in_prices(None))  # type: ignore[arg-type]
    llm_operations = [op for (category, op) in trace.operations if category == "llm"]
    assert llm_operations == ["gpt-4o-mini"]
    assert trace.operations[("llm", "gpt-4o-mini")].count == 3
    assert list(trace.tokens_by_model) == ["gpt-4o-mini"]
    assert trace.tokens_by_model["gpt-4o-mini"].input == 600
    assert list(trace.cost_by_model) == ["gpt-4o-mini"]
    # The detail keeps the snapshot that answered each call.
    spans = {s["name"]: s for s in trace_to_dict(trace)["spans"]}
    for name in ("chat gpt-4o-mini", "ChatCompletion", "openai.chat"):
        assert spans[name]["model"] == "gpt-4o-mini"
        assert spans[name]["model_snapshot"] == "gpt-4o-mini-2024-07-18"
    assert spans["agent"]["model_snapshot"] is None


def test_a_snapshot_priced_apart_from_its_family_gets_its_own_price() -> None:
    # gpt-4o-2024-05-13 was priced above gpt-4o: a user's table naming it wins for that call.
    prices = PriceTable.from_mapping(
        {"gpt-4o": {"input": 2.5, "output": 10}, "gpt-4o-2024-05-13": {"input": 5, "output": 15}}
    )
    records = [
        span(
            "old",
            None,
            0,
            1_000,
            attributes={
                "openinference.span.kind": "LLM",
                "llm.model_name": "gpt-4o-2024-05-13",
                "llm.token_count.prompt": 1_000_000,
                "llm.token_count.completion": 0,
            },
        )
    ]
    trace = profile_trace(records, prices=prices)
    assert by_name(trace)["old"].model == "gpt-4o"
    assert trace.cost_by_model == {"gpt-4o": pytest.approx(5.0)}


def test_a_provider_prefixed_model_is_priced_and_grouped_with_its_model() -> None:
    # DSPy's LM.acall names gpt-4o-mini, LiteLLM's acompletion below it openai/gpt-4o-mini: one model, one price.
    records = [
        span("root", None, 0, 10_000),
        span(
            "dspy",
            "root",
            0,
            4_000,
            attributes={"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini"},
        ),
        span(
            "litellm",
            "root",
            5_000,
            9_000,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "openai/gpt-4o-mini",
                "gen_ai.usage.input_tokens": 1_000_000,
                "gen_ai.usage.output_tokens": 0,
            },
        ),
    ]
    trace = profile_trace(records, prices=with_built_in_prices(None))
    assert by_name(trace)["litellm"].model == "gpt-4o-mini"
    assert [op for (category, op) in trace.operations if category == "llm"] == ["gpt-4o-mini"]
    assert trace.cost_by_model == {"gpt-4o-mini": pytest.approx(BUILT_IN_PRICES["gpt-4o-mini"].input)}


def test_azure_deployment_name_is_kept() -> None:
    records = [
        span(
            "chat",
            None,
            0,
            1_000,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "contoso-gpt4o-prod",
                "gen_ai.response.model": "gpt-4o-2024-08-06",
            },
        )
    ]
    node = by_name(profile_trace(records))["chat"]
    assert node.model == "contoso-gpt4o-prod"
    assert node.model_snapshot is None  # the answering snapshot is of another name

"""One name per model: a call's model is named by its family, whichever convention described it.

GenAI spans usually name the model the application asked for (``gen_ai.request.model``:
``gpt-4o-mini``), OpenInference names the one that answered (``llm.model_name``: the dated
snapshot ``gpt-4o-mini-2024-07-18``). Reports group a call under its family, the name without
the snapshot's date; the snapshot is kept as a detail of the span.

The forms providers use for snapshots:

* OpenAI: ``gpt-4o-2024-08-06`` (``-YYYY-MM-DD``) and the older ``gpt-4-0613`` (``-MMDD``);
* Mistral: ``mistral-large-2407`` (``-YYMM``);
* Anthropic: ``claude-3-5-sonnet-20241022`` (``-YYYYMMDD``), and ``@20241022`` on Vertex AI;
* moving aliases: ``claude-3-5-sonnet-latest``, Ollama's ``llama3:latest``.

A provider prefix, as LiteLLM-based frameworks (Google ADK, DSPy) write it (``openai/gpt-4o-mini``,
``openrouter/anthropic/claude-3-5-sonnet``), names who served the model, not another model: the family
leaves it out, so the call is priced and grouped with the same model named without it. Only known
providers' names are taken off: ``meta-llama/Llama-3.1-8B`` names an organisation's model and stays.

Anything else, such as an Azure deployment name (``my-gpt4o-prod``), is a name of its own and
stays as it is: a date is only taken off when it is a real calendar date.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache

from .records import AttributeValue

# The dated forms above; the date is checked separately, so "-2048" in a deployment name stays.
_FULL_DATE = re.compile(r"^(?P<family>.+?)[-@](?P<year>20\d\d)-?(?P<month>\d\d)-?(?P<day>\d\d)$")
_SHORT_DATE = re.compile(r"^(?P<family>.+?)-(?P<first>\d\d)(?P<second>\d\d)$")
_MOVING_ALIAS = re.compile(r"^(?P<family>.+?)[-:]latest$")

#: Attributes naming the model that answered, in every convention: where a snapshot is found.
_RESPONSE_MODEL_KEYS = ("gen_ai.response.model", "llm.model_name", "llm.response.model")


#: Provider prefixes of LiteLLM's ``provider/model`` names (and OpenRouter's ``openrouter/vendor/model``).
PROVIDER_PREFIXES = frozenset(
    {
        "anthropic",
        "azure",
        "azure_ai",
        "bedrock",
        "cohere",
        "deepseek",
        "fireworks_ai",
        "gemini",
        "groq",
        "hosted_vllm",
        "litellm_proxy",
        "mistral",
        "ollama",
        "ollama_chat",
        "openai",
        "openrouter",
        "perplexity",
        "together_ai",
        "vertex_ai",
        "vllm",
        "xai",
    }
)


def without_provider(model: str) -> str:
    """``model`` without the provider prefixes LiteLLM-style names carry: ``openai/gpt-4o-mini`` -> ``gpt-4o-mini``."""
    while "/" in model:
        prefix, _, rest = model.partition("/")
        if prefix.lower() not in PROVIDER_PREFIXES or not rest:
            break
        model = rest
    return model


def _is_month(month: int) -> bool:
    return 1 <= month <= 12


def _without_date(model: str) -> str | None:
    match = _FULL_DATE.match(model)
    if match is not None:
        return match["family"] if _is_month(int(match["month"])) and 1 <= int(match["day"]) <= 31 else None
    match = _SHORT_DATE.match(model)
    if match is None:
        return None
    first, second = int(match["first"]), int(match["second"])
    # Four digits are a snapshot when they read as a month and day (OpenAI) or as a year from
    # 2020 and a month (Mistral); the two readings never overlap.
    if (_is_month(first) and 1 <= second <= 31) or (20 <= first <= 39 and _is_month(second)):
        return match["family"]
    return None


@lru_cache(maxsize=4096)
def model_family(model: str) -> str:
    """The family a model name belongs to: the name without a snapshot date or a ``latest`` tag.

    ``gpt-4o-mini-2024-07-18`` -> ``gpt-4o-mini``, ``claude-3-5-sonnet-20241022`` ->
    ``claude-3-5-sonnet``, ``gpt-4-0613`` -> ``gpt-4``, ``claude-3-5-sonnet-latest`` ->
    ``claude-3-5-sonnet``, ``openai/gpt-4o-mini`` -> ``gpt-4o-mini``; ``gpt-4o``,
    ``my-gpt4o-deployment`` and ``o1-preview`` are unchanged.
    """
    model = without_provider(model)
    alias = _MOVING_ALIAS.match(model)
    if alias is not None:
        return alias["family"]
    family = _without_date(model)
    return model if family is None else family


@lru_cache(maxsize=4096)
def is_snapshot(model: str) -> bool:
    """Whether ``model`` names a dated snapshot (``gpt-4o-2024-08-06``), not a family or alias."""
    return _without_date(without_provider(model)) is not None


def snapshot_of(attributes: Mapping[str, AttributeValue], model: str | None) -> str | None:
    """The dated snapshot of ``model`` that a span records (the requested or the answering model), if any."""
    if model is None:
        return None
    if is_snapshot(model):
        return without_provider(model)
    family = model_family(model)
    for key in _RESPONSE_MODEL_KEYS:
        value = attributes.get(key)
        if isinstance(value, str) and is_snapshot(value) and model_family(value) == family:
            return without_provider(value)
    return None

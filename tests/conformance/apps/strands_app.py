"""Strands Agents 1.x with its built-in OpenTelemetry tracing, on its OpenAI model provider.

Strands streams every model call, so all three calls of the app stream.
"""

from __future__ import annotations

import os

import common
from strands import Agent, tool
from strands.models.openai import OpenAIModel


def instrument() -> None:
    pass  # Strands traces itself, through the global tracer provider


@tool
async def slow_search(query: str) -> str:
    """Search the slow source.

    Args:
        query: What to search for.
    """
    return await common.slow_search_body(query)


@tool
async def medium_search(query: str) -> str:
    """Search the medium source.

    Args:
        query: What to search for.
    """
    return await common.medium_search_body(query)


@tool
async def fast_search(query: str) -> str:
    """Search the fast source.

    Args:
        query: What to search for.
    """
    return await common.fast_search_body(query)


def model() -> OpenAIModel:
    client_args = {"api_key": os.environ["OPENAI_API_KEY"], "base_url": os.environ["OPENAI_BASE_URL"]}
    return OpenAIModel(client_args=client_args, model_id=common.MODEL)


async def agent_run() -> None:
    agent = Agent(
        model=model(),
        system_prompt=common.SYSTEM_PROMPT,
        tools=[slow_search, medium_search, fast_search],
        callback_handler=None,
    )
    await agent.invoke_async(common.AGENT_QUESTION)


async def stream_call() -> None:
    await Agent(model=model(), callback_handler=None).invoke_async(common.STREAM_QUESTION)


if __name__ == "__main__":
    common.run("strands", instrument, agent_run, stream_call)

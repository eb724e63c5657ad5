"""pydantic-ai with its own OpenTelemetry instrumentation (``Agent.instrument_all``), GenAI conventions."""

from __future__ import annotations

import common
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider


def instrument() -> None:
    # pydantic-ai has no instrumentor entry point: even under zero-code the app turns it on
    Agent.instrument_all(True)


def model() -> OpenAIChatModel:
    return OpenAIChatModel(common.MODEL, provider=OpenAIProvider())  # base URL and key from OPENAI_* variables


async def agent_run() -> None:
    agent = Agent(model(), name="researcher", instructions=common.SYSTEM_PROMPT)

    @agent.tool_plain
    async def slow_search(query: str) -> str:
        """Search the slow source."""
        return await common.slow_search_body(query)

    @agent.tool_plain
    async def medium_search(query: str) -> str:
        """Search the medium source."""
        return await common.medium_search_body(query)

    @agent.tool_plain
    async def fast_search(query: str) -> str:
        """Search the fast source."""
        return await common.fast_search_body(query)

    await agent.run(common.AGENT_QUESTION)


async def stream_call() -> None:
    agent = Agent(model(), name="summariser")
    async with agent.run_stream(common.STREAM_QUESTION) as result:
        async for _text in result.stream_text():
            pass


if __name__ == "__main__":
    common.run("pydantic-ai", instrument, agent_run, stream_call)

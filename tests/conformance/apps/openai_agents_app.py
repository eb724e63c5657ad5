"""The OpenAI Agents SDK, instrumented by openinference-instrumentation-openai-agents."""

from __future__ import annotations

import common
from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, Runner, function_tool
from openai import AsyncOpenAI


def instrument() -> None:
    # The instrumentor takes the place of the SDK's own trace processor (exclusive by default), so nothing is
    # sent to OpenAI's tracing service.
    if common.zero_code():
        return  # opentelemetry-instrument loaded the instrumentor
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    OpenAIAgentsInstrumentor().instrument()


@function_tool
async def slow_search(query: str) -> str:
    """Search the slow source."""
    return await common.slow_search_body(query)


@function_tool
async def medium_search(query: str) -> str:
    """Search the medium source."""
    return await common.medium_search_body(query)


@function_tool
async def fast_search(query: str) -> str:
    """Search the fast source."""
    return await common.fast_search_body(query)


def model() -> OpenAIChatCompletionsModel:
    # the fake server speaks Chat Completions, not the Responses API the SDK uses by default
    return OpenAIChatCompletionsModel(model=common.MODEL, openai_client=AsyncOpenAI())


async def agent_run() -> None:
    agent = Agent(
        name="researcher",
        instructions=common.SYSTEM_PROMPT,
        model=model(),
        tools=[slow_search, medium_search, fast_search],
        model_settings=ModelSettings(parallel_tool_calls=True),
    )
    await Runner.run(agent, common.AGENT_QUESTION)


async def stream_call() -> None:
    agent = Agent(name="summariser", model=model())
    result = Runner.run_streamed(agent, common.STREAM_QUESTION)
    async for _event in result.stream_events():
        pass


if __name__ == "__main__":
    common.run("openai-agents", instrument, agent_run, stream_call)

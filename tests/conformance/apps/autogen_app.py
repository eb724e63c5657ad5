"""AutoGen AgentChat's AssistantAgent on autogen-ext's OpenAI client, traced by AutoGen's own OpenTelemetry spans.

AutoGen writes the agent and tool spans itself (``invoke_agent``, ``execute_tool``, GenAI conventions) through
the global tracer provider; its model client writes none, so the LLM spans come from
openinference-instrumentation-openai, as an AutoGen user who wants model calls traced adds it.
"""

from __future__ import annotations

import common
from autogen_agentchat.agents import AssistantAgent
from autogen_core.models import UserMessage
from autogen_core.tools import FunctionTool
from autogen_ext.models.openai import OpenAIChatCompletionClient


def instrument() -> None:
    if common.zero_code():
        return  # opentelemetry-instrument loaded the instrumentor
    from openinference.instrumentation.openai import OpenAIInstrumentor

    OpenAIInstrumentor().instrument()


async def slow_search(query: str) -> str:
    """Search the slow source."""
    return await common.slow_search_body(query)


async def medium_search(query: str) -> str:
    """Search the medium source."""
    return await common.medium_search_body(query)


async def fast_search(query: str) -> str:
    """Search the fast source."""
    return await common.fast_search_body(query)


def model() -> OpenAIChatCompletionClient:
    return OpenAIChatCompletionClient(model=common.MODEL)  # base URL and key from OPENAI_* variables


async def agent_run() -> None:
    client = model()
    agent = AssistantAgent(
        "researcher",
        model_client=client,
        tools=[
            FunctionTool(slow_search, description="Search the slow source."),
            FunctionTool(medium_search, description="Search the medium source."),
            FunctionTool(fast_search, description="Search the fast source."),
        ],
        system_message=common.SYSTEM_PROMPT,
        # the second model call: the agent answers from the tools' results instead of returning them
        reflect_on_tool_use=True,
    )
    await agent.run(task=common.AGENT_QUESTION)
    await client.close()


async def stream_call() -> None:
    client = model()
    # include_usage: without it the client does not ask for a streamed call's usage
    async for _chunk in client.create_stream(
        [UserMessage(content=common.STREAM_QUESTION, source="user")], include_usage=True
    ):
        pass
    await client.close()


if __name__ == "__main__":
    common.run("autogen", instrument, agent_run, stream_call)

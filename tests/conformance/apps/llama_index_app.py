"""LlamaIndex's FunctionAgent on its OpenAI LLM, instrumented by openinference-instrumentation-llama-index."""

from __future__ import annotations

import os

import common
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.llms import ChatMessage
from llama_index.core.tools import FunctionTool
from llama_index.llms.openai import OpenAI


def instrument() -> None:
    if common.zero_code():
        return  # opentelemetry-instrument loaded the instrumentor
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    LlamaIndexInstrumentor().instrument()


async def slow_search(query: str) -> str:
    """Search the slow source."""
    return await common.slow_search_body(query)


async def medium_search(query: str) -> str:
    """Search the medium source."""
    return await common.medium_search_body(query)


async def fast_search(query: str) -> str:
    """Search the fast source."""
    return await common.fast_search_body(query)


def model() -> OpenAI:
    # llama-index reads OPENAI_API_BASE, not the client's OPENAI_BASE_URL
    return OpenAI(model=common.MODEL, api_base=os.environ["OPENAI_BASE_URL"])


async def agent_run() -> None:
    agent = FunctionAgent(
        name="researcher",
        tools=[
            FunctionTool.from_defaults(async_fn=slow_search),
            FunctionTool.from_defaults(async_fn=medium_search),
            FunctionTool.from_defaults(async_fn=fast_search),
        ],
        llm=model(),
        system_prompt=common.SYSTEM_PROMPT,
        streaming=False,  # the agent's calls plain, the streamed call below streamed
    )
    await agent.run(common.AGENT_QUESTION)


async def stream_call() -> None:
    async for _chunk in await model().astream_chat([ChatMessage(role="user", content=common.STREAM_QUESTION)]):
        pass


if __name__ == "__main__":
    common.run("llama-index", instrument, agent_run, stream_call)

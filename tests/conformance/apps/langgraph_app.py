"""LangGraph's prebuilt ReAct agent on langchain-openai, instrumented by openinference-instrumentation-langchain."""

from __future__ import annotations

import common
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent


def instrument() -> None:
    if common.zero_code():
        return  # opentelemetry-instrument loaded the instrumentor
    from openinference.instrumentation.langchain import LangChainInstrumentor

    LangChainInstrumentor().instrument()


@tool
async def slow_search(query: str) -> str:
    """Search the slow source."""
    return await common.slow_search_body(query)


@tool
async def medium_search(query: str) -> str:
    """Search the medium source."""
    return await common.medium_search_body(query)


@tool
async def fast_search(query: str) -> str:
    """Search the fast source."""
    return await common.fast_search_body(query)


def model() -> ChatOpenAI:
    # stream_usage: without it langchain-openai does not ask for a streamed call's usage
    return ChatOpenAI(model=common.MODEL, stream_usage=True)


async def agent_run() -> None:
    agent = create_react_agent(
        model(), [slow_search, medium_search, fast_search], prompt=SystemMessage(common.SYSTEM_PROMPT)
    )
    await agent.ainvoke({"messages": [HumanMessage(common.AGENT_QUESTION)]})


async def stream_call() -> None:
    async for _chunk in model().astream([HumanMessage(common.STREAM_QUESTION)]):
        pass


if __name__ == "__main__":
    common.run("langgraph", instrument, agent_run, stream_call)

"""LangChain's ``create_agent`` on langchain-openai, instrumented by openinference-instrumentation-langchain."""

from __future__ import annotations

import common
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph_app import fast_search, instrument, medium_search, model, slow_search, stream_call


async def agent_run() -> None:
    agent = create_agent(model(), [slow_search, medium_search, fast_search], system_prompt=common.SYSTEM_PROMPT)
    await agent.ainvoke({"messages": [HumanMessage(common.AGENT_QUESTION)]})


if __name__ == "__main__":
    common.run("langchain-agent", instrument, agent_run, stream_call)

"""A hand-written LangGraph graph (a model node and a tool node in a StateGraph) on langchain-openai,
instrumented by openinference-instrumentation-langchain; the prebuilt agent is langgraph_app.py."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, TypedDict

import common
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph_app import fast_search, instrument, medium_search, model, slow_search, stream_call

TOOLS = {t.name: t for t in (slow_search, medium_search, fast_search)}


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


async def call_model(state: State) -> dict[str, Any]:
    llm = model().bind_tools(list(TOOLS.values()))
    return {"messages": [await llm.ainvoke([SystemMessage(common.SYSTEM_PROMPT), *state["messages"]])]}


async def run_tools(state: State) -> dict[str, Any]:
    # the model's tool calls run side by side, as the prebuilt ToolNode runs them
    last = state["messages"][-1]
    assert isinstance(last, AIMessage)
    results = await asyncio.gather(*(TOOLS[call["name"]].ainvoke(call) for call in last.tool_calls))
    return {"messages": [r if isinstance(r, ToolMessage) else ToolMessage(str(r)) for r in results]}


def after_model(state: State) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


def graph() -> Any:
    builder = StateGraph(State)
    builder.add_node("model", call_model)
    builder.add_node("tools", run_tools)
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", after_model, ["tools", END])
    builder.add_edge("tools", "model")
    return builder.compile()


async def agent_run() -> None:
    await graph().ainvoke({"messages": [HumanMessage(common.AGENT_QUESTION)]})


if __name__ == "__main__":
    common.run("langgraph-graph", instrument, agent_run, stream_call)

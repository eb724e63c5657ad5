"""smolagents' ToolCallingAgent on its OpenAI model, instrumented by openinference-instrumentation-smolagents."""

from __future__ import annotations

import os

import common
from smolagents import OpenAIServerModel, ToolCallingAgent, tool

# A ToolCallingAgent ends only by calling its final_answer tool. smolagents hands the tools' results back to the
# model in a user message, so each result carries the fake server's directive for the second round: it calls
# final_answer instead of answering in text.


def instrument() -> None:
    if common.zero_code():
        return  # opentelemetry-instrument loaded the instrumentor
    from openinference.instrumentation.smolagents import SmolagentsInstrumentor

    SmolagentsInstrumentor().instrument()


@tool
def slow_search(query: str) -> str:
    """Search the slow source.

    Args:
        query: what to look for.
    """
    return common.slow_search_sync(query) + " [[call: final_answer]]"


@tool
def medium_search(query: str) -> str:
    """Search the medium source.

    Args:
        query: what to look for.
    """
    return common.medium_search_sync(query) + " [[call: final_answer]]"


@tool
def fast_search(query: str) -> str:
    """Search the fast source.

    Args:
        query: what to look for.
    """
    return common.fast_search_sync(query) + " [[call: final_answer]]"


def model() -> OpenAIServerModel:
    return OpenAIServerModel(common.MODEL, api_base=os.environ["OPENAI_BASE_URL"], api_key=os.environ["OPENAI_API_KEY"])


def agent_run() -> None:
    agent = ToolCallingAgent(
        tools=[slow_search, medium_search, fast_search],
        model=model(),
        name="researcher",
        max_steps=3,
        instructions=common.SYSTEM_PROMPT,
    )
    agent.run(common.AGENT_QUESTION)


def stream_call() -> None:
    for _delta in model().generate_stream(
        [{"role": "user", "content": [{"type": "text", "text": common.STREAM_QUESTION}]}]
    ):
        pass


if __name__ == "__main__":
    common.run("smolagents", instrument, agent_run, stream_call)

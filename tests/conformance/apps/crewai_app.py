"""CrewAI's Crew on its native OpenAI LLM, instrumented by openinference-instrumentation-crewai.

CrewAI's spans (crew kickoff, task, agent, tool) come from its OpenInference instrumentation; its OpenAI
provider calls the OpenAI client, whose spans come from openinference-instrumentation-openai, as a CrewAI user
who wants model calls traced adds it. CrewAI runs the tool calls of one native tool-calling response in a
thread pool, side by side.
"""

from __future__ import annotations

import os

# CrewAI's own telemetry and its trace service stay off (no network but the fake server's)
os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")

import common
from crewai import LLM, Agent, Crew, Task
from crewai.tools import tool


def instrument() -> None:
    if common.zero_code():
        return  # opentelemetry-instrument loaded the instrumentors
    from openinference.instrumentation.crewai import CrewAIInstrumentor
    from openinference.instrumentation.openai import OpenAIInstrumentor

    CrewAIInstrumentor().instrument()
    OpenAIInstrumentor().instrument()


@tool("slow_search")
def slow_search(query: str) -> str:
    """Search the slow source."""
    return common.slow_search_sync(query)


@tool("medium_search")
def medium_search(query: str) -> str:
    """Search the medium source."""
    return common.medium_search_sync(query)


@tool("fast_search")
def fast_search(query: str) -> str:
    """Search the fast source."""
    return common.fast_search_sync(query)


def model(stream: bool = False) -> LLM:
    return LLM(
        model=f"openai/{common.MODEL}",
        base_url=os.environ["OPENAI_BASE_URL"],
        api_key=os.environ["OPENAI_API_KEY"],
        stream=stream,
    )


async def agent_run() -> None:
    researcher = Agent(
        role="researcher",
        goal="Compare the sources",
        backstory=common.SYSTEM_PROMPT,
        tools=[slow_search, medium_search, fast_search],
        llm=model(),
        max_iter=3,
    )
    task = Task(description=common.AGENT_QUESTION, expected_output="A short comparison.", agent=researcher)
    await Crew(agents=[researcher], tasks=[task]).kickoff_async()


async def stream_call() -> None:
    await model(stream=True).acall(common.STREAM_QUESTION)


if __name__ == "__main__":
    common.run("crewai", instrument, agent_run, stream_call)

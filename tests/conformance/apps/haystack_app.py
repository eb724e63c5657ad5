"""Haystack's Agent on its OpenAIChatGenerator, traced by Haystack's OpenTelemetry tracer (opentelemetry-haystack).

Haystack writes the agent, step and tool spans (``haystack.agent.run``, ``haystack.agent.step.tool``) and
``haystack.chat_generator.run`` around each model call, with no GenAI attributes; the LLM spans come from
openinference-instrumentation-openai, as a Haystack user who wants model calls traced adds it. Haystack has no
instrumentor entry point: the tracer is enabled by the app in both modes.
"""

from __future__ import annotations

import os

# Haystack's own usage telemetry stays off (no network but the fake server's)
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

import common
from haystack import tracing
from haystack.components.agents import Agent
from haystack.components.generators.chat import OpenAIChatGenerator
from haystack.dataclasses import ChatMessage, StreamingChunk
from haystack.tools import create_tool_from_function
from haystack_integrations.tracing.opentelemetry import OpenTelemetryTracer
from opentelemetry import trace


def instrument() -> None:
    tracing.enable_tracing(OpenTelemetryTracer(trace.get_tracer("haystack")))
    if common.zero_code():
        return  # opentelemetry-instrument loaded the OpenAI instrumentor
    from openinference.instrumentation.openai import OpenAIInstrumentor

    OpenAIInstrumentor().instrument()


def slow_search(query: str) -> str:
    """Search the slow source."""
    return common.slow_search_sync(query)


def medium_search(query: str) -> str:
    """Search the medium source."""
    return common.medium_search_sync(query)


def fast_search(query: str) -> str:
    """Search the fast source."""
    return common.fast_search_sync(query)


def model() -> OpenAIChatGenerator:
    return OpenAIChatGenerator(model=common.MODEL)  # base URL and key from OPENAI_* variables


def agent_run() -> None:
    # the ToolInvoker part of the agent runs a step's tool calls in a thread pool, side by side
    agent = Agent(
        chat_generator=model(),
        tools=[
            create_tool_from_function(slow_search),
            create_tool_from_function(medium_search),
            create_tool_from_function(fast_search),
        ],
        system_prompt=common.SYSTEM_PROMPT,
    )
    agent.run(messages=[ChatMessage.from_user(common.AGENT_QUESTION)])


def _ignore(_chunk: StreamingChunk) -> None:
    pass


def stream_call() -> None:
    # a streaming callback makes the call stream; the usage only comes with include_usage
    model().run(
        messages=[ChatMessage.from_user(common.STREAM_QUESTION)],
        streaming_callback=_ignore,
        generation_kwargs={"stream_options": {"include_usage": True}},
    )


if __name__ == "__main__":
    common.run("haystack", instrument, agent_run, stream_call)

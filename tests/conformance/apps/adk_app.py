"""Google ADK 2.x with its built-in OpenTelemetry tracing, its model reached through LiteLLM (``LiteLlm``)."""

from __future__ import annotations

import os

# LiteLLM would fetch its model price map from the network on import; its bundled copy does here.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import common
from google.adk.agents import LlmAgent
from google.adk.agents.run_config import RunConfig, StreamingMode
from google.adk.models.lite_llm import LiteLlm
from google.adk.runners import InMemoryRunner
from google.genai import types

APP = "conformance"
USER = "user"


def instrument() -> None:
    pass  # ADK traces itself, through the global tracer provider


async def slow_search(query: str) -> str:
    """Search the slow source."""
    return await common.slow_search_body(query)


async def medium_search(query: str) -> str:
    """Search the medium source."""
    return await common.medium_search_body(query)


async def fast_search(query: str) -> str:
    """Search the fast source."""
    return await common.fast_search_body(query)


def model() -> LiteLlm:
    return LiteLlm(model=f"openai/{common.MODEL}", api_base=os.environ["OPENAI_BASE_URL"])


async def run_agent(agent: LlmAgent, question: str, config: RunConfig | None = None) -> None:
    runner = InMemoryRunner(agent=agent, app_name=APP)
    session = await runner.session_service.create_session(app_name=APP, user_id=USER)
    message = types.Content(role="user", parts=[types.Part(text=question)])
    async for _event in runner.run_async(user_id=USER, session_id=session.id, new_message=message, run_config=config):
        pass


async def agent_run() -> None:
    agent = LlmAgent(
        name="researcher",
        model=model(),
        instruction=common.SYSTEM_PROMPT,
        tools=[slow_search, medium_search, fast_search],
    )
    await run_agent(agent, common.AGENT_QUESTION)


async def stream_call() -> None:
    agent = LlmAgent(name="summariser", model=model())
    await run_agent(agent, common.STREAM_QUESTION, RunConfig(streaming_mode=StreamingMode.SSE))


if __name__ == "__main__":
    common.run("adk", instrument, agent_run, stream_call)

"""A hand-written agent loop on the OpenAI client; the instrumentation is the source under test.

``CONFORMANCE_INSTRUMENTATION`` picks it: ``openinference`` (openinference-instrumentation-openai),
``openai-v2`` (opentelemetry-instrumentation-openai-v2), ``genai-openai``
(opentelemetry-instrumentation-genai-openai) or ``traceloop`` (opentelemetry-instrumentation-openai).
The agent and tool spans come from otel-agent-profiler's decorators, as a user without a framework writes them.
"""

from __future__ import annotations

import asyncio
import json
import os

import common
from openai import AsyncOpenAI

from otel_agent_profiler import agent_span, tool

INSTRUMENTATION = os.environ.get("CONFORMANCE_INSTRUMENTATION", "traceloop")

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"Search the {name.split('_')[0]} source.",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
        },
    }
    for name in ("slow_search", "medium_search", "fast_search")
]


def instrument() -> None:
    if common.zero_code():
        return  # opentelemetry-instrument loaded every installed instrumentor
    if INSTRUMENTATION == "openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor
    elif INSTRUMENTATION == "openai-v2":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    elif INSTRUMENTATION == "genai-openai":
        from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor
    else:
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor
    OpenAIInstrumentor().instrument()


slow_search = tool("slow_search")(common.slow_search_body)
medium_search = tool("medium_search")(common.medium_search_body)
fast_search = tool("fast_search")(common.fast_search_body)
TOOL_BODIES = {"slow_search": slow_search, "medium_search": medium_search, "fast_search": fast_search}


async def agent_run() -> None:
    client = AsyncOpenAI()
    messages: list[dict[str, object]] = [
        {"role": "system", "content": common.SYSTEM_PROMPT},
        {"role": "user", "content": common.AGENT_QUESTION},
    ]
    async with agent_span("openai_loop"):
        while True:
            response = await client.chat.completions.create(model=common.MODEL, messages=messages, tools=TOOLS)
            message = response.choices[0].message
            if not message.tool_calls:
                return
            messages.append(message.model_dump(exclude_none=True))
            results = await asyncio.gather(
                *(TOOL_BODIES[c.function.name](**json.loads(c.function.arguments)) for c in message.tool_calls)
            )
            messages += [
                {"role": "tool", "tool_call_id": call.id, "content": result}
                for call, result in zip(message.tool_calls, results, strict=True)
            ]


async def stream_call() -> None:
    client = AsyncOpenAI()
    stream = await client.chat.completions.create(
        model=common.MODEL,
        messages=[{"role": "user", "content": common.STREAM_QUESTION}],
        stream=True,
        stream_options={"include_usage": True},
    )
    async for _chunk in stream:
        pass


if __name__ == "__main__":
    common.run(f"openai-{INSTRUMENTATION}", instrument, agent_run, stream_call)

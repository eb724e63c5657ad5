"""The demo agent: what a user's ``agent.py`` looks like, instrumented with our decorators.

A research assistant answers a question in four steps, against any OpenAI-compatible server
(``OPENAI_BASE_URL``):

1. a chat call plans three tool calls, which run in parallel (``asyncio.gather``);
2. a streaming chat call asks for two more tools, which run one after another;
3. a sub-agent researches a detail: a streaming chat call, then a tool that embeds and searches;
4. a final streaming chat call writes the answer.

Every call shares one long system prompt, so the provider's prefix cache serves later calls.
With ``DEMO_TOOLS_SUMMARISE=1`` (``python -m demo --server-spans``) the three parallel tools each
ask the model to summarise what they found, so three chat calls reach the server at once.
Run it profiled with ``opentelemetry-instrument python -m demo.agent``;
``python -m demo`` does that for you against a local fake server.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

from openai import AsyncOpenAI

from otel_agent_profiler import agent, tool

MODEL = os.environ.get("DEMO_MODEL", "gpt-4o-mini")
SUB_AGENT_MODEL = os.environ.get("DEMO_SUB_AGENT_MODEL", "gpt-4o")
EMBEDDING_MODEL = "text-embedding-3-small"

# Long enough (over 1,024 tokens) for the provider's prefix cache to apply from the second call.
SYSTEM_PROMPT = "You are a careful research assistant. " + " ".join(
    f"Rule {i}: cite the source of every figure, prefer primary sources, and say when data is missing."
    for i in range(1, 60)
)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": {param: {"type": "string"}}, "required": [param]},
        },
    }
    for name, param, description in (
        ("search_kb", "query", "Search the internal knowledge base"),
        ("fetch_url", "url", "Fetch a web page"),
        ("get_weather", "city", "Current weather in a city"),
        ("run_sql", "query", "Run a read-only SQL query on the sales database"),
        ("calculator", "expression", "Evaluate an arithmetic expression"),
    )
]


def _client() -> AsyncOpenAI:
    return AsyncOpenAI(
        base_url=os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1"),
        api_key=os.environ.get("OPENAI_API_KEY", "demo"),
    )


# -- tools: the waits stand in for real I/O ---------------------------------------------------


async def _summarised(found: str) -> str:
    """``found``, or with DEMO_TOOLS_SUMMARISE=1 the model's summary of it (a chat call inside the tool)."""
    if os.environ.get("DEMO_TOOLS_SUMMARISE") != "1":
        return found
    response = await _client().chat.completions.create(
        model=MODEL,
        messages=[
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": f"Summarise for the report: {found} [[answer_tokens: 60]]"},
        ],
    )
    return response.choices[0].message.content or found


@tool(call_id_param="call_id")
async def search_kb(query: str, call_id: str | None = None) -> list[str]:
    embedding = await _client().embeddings.create(model=EMBEDDING_MODEL, input=query)
    await asyncio.sleep(0.12)  # the vector search
    found = [f"kb-doc-{i}: {query} ({len(embedding.data[0].embedding)}-d match)" for i in range(3)]
    if os.environ.get("DEMO_TOOLS_SUMMARISE") == "1":
        return [await _summarised("; ".join(found))]
    return found


@tool(call_id_param="call_id")
async def fetch_url(url: str, call_id: str | None = None) -> str:
    await asyncio.sleep(0.35)
    return await _summarised(f"<html>{url}: quarterly report, revenue up 12%</html>")


@tool(call_id_param="call_id")
async def get_weather(city: str, call_id: str | None = None) -> str:
    await asyncio.sleep(0.08)
    return await _summarised(f"{city}: 18 C, light rain")


@tool(call_id_param="call_id")
async def run_sql(query: str, call_id: str | None = None) -> list[tuple[str, int]]:
    await asyncio.sleep(0.2)
    return [("north", 1200), ("south", 950)]


@tool(call_id_param="call_id")
def calculator(expression: str, call_id: str | None = None) -> str:
    time.sleep(0.005)
    return "42"


TOOL_FUNCTIONS: dict[str, Any] = {
    "search_kb": search_kb,
    "fetch_url": fetch_url,
    "get_weather": get_weather,
    "run_sql": run_sql,
    "calculator": calculator,
}


async def _call_tool(call: Any) -> dict[str, Any]:
    function = TOOL_FUNCTIONS[call.function.name]
    arguments = json.loads(call.function.arguments or "{}")
    value = function(**arguments, call_id=call.id)
    if asyncio.iscoroutine(value):
        value = await value
    return {"role": "tool", "tool_call_id": call.id, "content": json.dumps(value)}


def _assistant_message(calls: list[Any]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
            for c in calls
        ],
    }


async def _stream(
    client: AsyncOpenAI, model: str, messages: list[dict[str, Any]], **extra: Any
) -> tuple[str, list[Any]]:
    """A streaming chat call; returns its text and its tool calls, assembled from the chunks."""
    request: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
        **extra,
    }
    stream = await client.chat.completions.create(**request)
    text: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    async for chunk in stream:
        for choice in chunk.choices:
            delta = choice.delta
            if delta.content:
                text.append(delta.content)
            for part in delta.tool_calls or ():
                entry = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
                entry["id"] = part.id or entry["id"]
                if part.function is not None:
                    entry["name"] = part.function.name or entry["name"]
                    entry["arguments"] += part.function.arguments or ""
    tool_calls = [_StreamedCall(entry) for _, entry in sorted(calls.items())]
    return "".join(text), tool_calls


class _StreamedCall:
    """A tool call assembled from stream chunks, shaped like the client's non-streaming one."""

    def __init__(self, entry: dict[str, str]) -> None:
        self.id = entry["id"]
        self.function = type("Function", (), {"name": entry["name"], "arguments": entry["arguments"]})()


@agent("researcher")
async def research(client: AsyncOpenAI, topic: str) -> str:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": f"Find the source behind: {topic} [[call: search_kb]] [[answer_tokens: 30]]"},
    ]
    _, calls = await _stream(client, SUB_AGENT_MODEL, messages, tools=TOOLS)
    messages.append(_assistant_message(calls))
    messages.extend([await _call_tool(call) for call in calls])
    text, _ = await _stream(client, SUB_AGENT_MODEL, messages, tools=TOOLS)
    return text


@agent("research_assistant")
async def answer(question: str) -> str:
    client = _client()
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {
            "role": "user",
            "content": f"{question} [[call: search_kb, fetch_url, get_weather]] [[call: run_sql, calculator]]",
        },
    ]
    # 1. Plan, then run the three independent tools at once.
    request: dict[str, Any] = {"model": MODEL, "messages": messages, "tools": TOOLS}
    response = await client.chat.completions.create(**request)
    calls = response.choices[0].message.tool_calls or []
    messages.append(_assistant_message(calls))
    messages.extend(await asyncio.gather(*(_call_tool(call) for call in calls)))

    # 2. Two more tools; the second needs the first's result, so one after another.
    _, calls = await _stream(client, MODEL, messages, tools=TOOLS)
    messages.append(_assistant_message(calls))
    for call in calls:
        messages.append(await _call_tool(call))

    # 3. A sub-agent checks one detail.
    detail = await research(client, "revenue up 12%")

    # 4. The answer.
    messages.append({"role": "user", "content": f"Researcher says: {detail}. Answer now. [[answer_tokens: 80]]"})
    text, _ = await _stream(client, MODEL, messages)
    return text


def main() -> None:
    started = time.perf_counter()
    text = asyncio.run(answer("How did our sales do this quarter, and will the weather affect the launch?"))
    print(f"answer ({time.perf_counter() - started:.3f} s): {text[:100]}...")


if __name__ == "__main__":
    main()

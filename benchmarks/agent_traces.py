"""Synthetic agent traces in OTLP JSON, shaped like what real agent runs export.

Each run is an ``invoke_agent`` root with a loop of LLM calls (some streaming, with chunk
events), tool calls that run in parallel or one after another, retrieval and memory spans,
sub-agents, and now and then a long chain of sequential LLM calls. Attributes follow the
OpenTelemetry GenAI conventions as opentelemetry-instrumentation-openai writes them.
"""

from __future__ import annotations

import random
from typing import Any

MS = 1_000_000
MODELS = ("gpt-4o-mini", "gpt-4o", "o3-mini")
TOOLS = ("search_kb", "fetch_url", "run_sql", "calculator", "read_file", "get_weather")


def _kv(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    if isinstance(value, (list, tuple)):
        return {"key": key, "value": {"arrayValue": {"values": [{"stringValue": str(v)} for v in value]}}}
    return {"key": key, "value": {"stringValue": str(value)}}


_WORDS = [
    "the",
    "agent",
    "looks",
    "up",
    "the",
    "customer",
    "order",
    "history",
    "and",
    "checks",
    "the",
    "refund",
    "policy",
    "before",
    "it",
    "answers",
    "with",
    "a",
    "short",
    "summary",
    "of",
    "the",
    "shipping",
    "status",
    "and",
    "the",
    "next",
    "steps",
    "for",
    "the",
    "support",
    "ticket",
]


def _text(rng: random.Random, chars: int) -> str:
    words: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(_WORDS)
        words.append(word)
        size += len(word) + 1
    return " ".join(words)


class _Run:
    def __init__(self, rng: random.Random, trace_number: int, content: bool = False) -> None:
        self.content = content
        self.rng = rng
        self.trace_id = f"{trace_number + 1:032x}"
        self.next_span = 1
        self.spans: list[dict[str, Any]] = []

    def span(
        self, name: str, parent: str | None, start: int, end: int, kind: int, attrs: dict[str, Any], events=()
    ) -> str:
        span_id = f"{self.next_span:016x}"
        self.next_span += 1
        span: dict[str, Any] = {
            "traceId": self.trace_id,
            "spanId": span_id,
            "name": name,
            "kind": kind,
            "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(end),
            "attributes": [_kv(k, v) for k, v in attrs.items()],
            "status": {},
        }
        if parent is not None:
            span["parentSpanId"] = parent
        if events:
            span["events"] = list(events)
        self.spans.append(span)
        return span_id

    def chat(self, parent: str, start: int, model: str | None = None) -> int:
        rng = self.rng
        model = model or rng.choice(MODELS)
        streaming = rng.random() < 0.5
        ttft = int(rng.uniform(150, 600) * MS)
        output_tokens = rng.randint(20, 400)
        end = start + ttft + int(output_tokens * rng.uniform(8, 20) * MS)
        input_tokens = rng.randint(300, 9000)
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": model,
            "gen_ai.response.model": f"{model}-2025-01-01",
            "gen_ai.response.id": f"chatcmpl-{rng.getrandbits(48):x}",
            "gen_ai.usage.input_tokens": input_tokens,
            "gen_ai.usage.output_tokens": output_tokens,
            "gen_ai.usage.cache_read.input_tokens": rng.randint(0, input_tokens // 2),
            "gen_ai.request.temperature": 0.2,
            "gen_ai.is_streaming": streaming,
            "gen_ai.response.finish_reasons": ["tool_calls" if rng.random() < 0.6 else "stop"],
        }
        if self.content:
            # What opentelemetry-instrumentation-openai records with content capture on
            # (its default): the messages as JSON strings.
            prompt = _text(rng, rng.randint(400, 3000))
            attrs["gen_ai.input.messages"] = (
                '[{"role": "system", "parts": [{"type": "text", "content": "You are a support agent."}]}, '
                f'{{"role": "user", "parts": [{{"type": "text", "content": "{prompt}"}}]}}]'
            )
            answer = _text(rng, rng.randint(100, 1200))
            attrs["gen_ai.output.messages"] = (
                f'[{{"role": "assistant", "parts": [{{"type": "text", "content": "{answer}"}}]}}]'
            )
        events = ()
        if streaming:
            first = start + ttft
            events = [
                {"timeUnixNano": str(first + i * (end - first) // 4), "name": "gen_ai.content.completion.chunk"}
                for i in range(4)
            ]
        self.span(f"chat {model}", parent, start, end, 3, attrs, events)
        return end

    def tool(self, parent: str, start: int) -> int:
        rng = self.rng
        name = rng.choice(TOOLS)
        end = start + int(rng.uniform(20, 800) * MS)
        tool_id = self.span(
            f"execute_tool {name}",
            parent,
            start,
            end,
            1,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": name,
                "gen_ai.tool.call.id": f"call_{rng.getrandbits(40):x}",
                "gen_ai.tool.type": "function",
            },
        )
        if name == "search_kb":
            middle = start + (end - start) // 3
            self.span(
                "embeddings text-embedding-3-small",
                tool_id,
                start + MS,
                middle,
                3,
                {
                    "gen_ai.operation.name": "embeddings",
                    "gen_ai.request.model": "text-embedding-3-small",
                    "gen_ai.usage.input_tokens": rng.randint(10, 80),
                },
            )
            self.span(
                "retrieval kb",
                tool_id,
                middle,
                end - MS,
                3,
                {"gen_ai.operation.name": "retrieval", "gen_ai.data_source.id": "kb", "db.system": "qdrant"},
            )
        return end

    def memory(self, parent: str, start: int) -> int:
        end = start + int(self.rng.uniform(2, 30) * MS)
        self.span(
            "SELECT agent_memory",
            parent,
            start,
            end,
            3,
            {"db.system": "postgresql", "db.collection.name": "agent_memory", "db.operation.name": "SELECT"},
        )
        return end

    def agent(self, name: str, parent: str | None, start: int, steps: int) -> int:
        rng = self.rng
        agent_id = self.span(
            f"invoke_agent {name}",
            parent,
            start,
            start,
            1,
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": name,
            },
        )
        agent_span = self.spans[-1]
        t = self.memory(agent_id, start + MS)
        for _ in range(steps):
            t = self.chat(agent_id, t + int(rng.uniform(0.5, 5) * MS))
            shape = rng.random()
            if shape < 0.4:
                # Parallel tool calls (asyncio.gather): they start together, end apart.
                t = max(self.tool(agent_id, t + int(rng.uniform(0.1, 2) * MS)) for _ in range(rng.randint(2, 4)))
            elif shape < 0.75:
                for _ in range(rng.randint(1, 3)):
                    t = self.tool(agent_id, t + int(rng.uniform(0.1, 2) * MS))
            elif shape < 0.85 and parent is None:
                t = self.agent("researcher", agent_id, t + MS, rng.randint(1, 3))
            elif shape < 0.9:
                # A long chain of sequential LLM calls (e.g. reflection loops).
                for _ in range(rng.randint(8, 25)):
                    t = self.chat(agent_id, t + int(rng.uniform(0.2, 2) * MS), "gpt-4o-mini")
        t = self.chat(agent_id, t + MS)
        end = t + int(rng.uniform(1, 10) * MS)
        agent_span["endTimeUnixNano"] = str(end)
        return end


def generate_runs(
    run_count: int,
    seed: int = 7,
    start_ns: int = 1_760_000_000_000_000_000,
    first_trace: int = 0,
    content: bool = False,
) -> list[list[dict]]:
    """Span dicts of ``run_count`` agent runs, one list per trace."""
    rng = random.Random(seed)
    runs = []
    t = start_ns
    for number in range(first_trace, first_trace + run_count):
        run = _Run(rng, number, content)
        run.agent("research_assistant", None, t, rng.randint(2, 6))
        runs.append(run.spans)
        t += int(rng.uniform(50, 500) * MS)
    return runs


def otlp_document(spans: list[dict], service_name: str = "research-agent") -> dict:
    """Wrap span dicts in one OTLP JSON document, split across two instrumentation scopes."""
    llm = [s for s in spans if s["kind"] == 3]
    other = [s for s in spans if s["kind"] != 3]
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [_kv("service.name", service_name), _kv("telemetry.sdk.language", "python")]
                },
                "scopeSpans": [
                    {"scope": {"name": "opentelemetry.instrumentation.openai.v1", "version": "0.62.4"}, "spans": llm},
                    {"scope": {"name": "otel_agent_profiler.plugin.decorators", "version": "0.1.0"}, "spans": other},
                ],
            }
        ]
    }


def one_big_trace_document(min_spans: int = 2000, seed: int = 11) -> dict:
    """One trace of at least ``min_spans`` spans: synthetic runs side by side under one root span."""
    trace_id = "ab" * 16
    spans: list[dict] = []
    run_number = 0
    while len(spans) < min_spans - 1:
        for span in generate_runs(1, seed=seed + run_number, start_ns=1_760_000_000_000_000_000 + run_number * 97 * MS)[
            0
        ]:
            span = dict(span)
            span["traceId"] = trace_id
            span["spanId"] = f"{run_number + 1:06x}{span['spanId'][6:]}"
            if "parentSpanId" in span:
                span["parentSpanId"] = f"{run_number + 1:06x}{span['parentSpanId'][6:]}"
            else:
                span["parentSpanId"] = "f" * 16
            spans.append(span)
        run_number += 1
    start = min(int(s["startTimeUnixNano"]) for s in spans)
    end = max(int(s["endTimeUnixNano"]) for s in spans)
    root = {
        "traceId": trace_id,
        "spanId": "f" * 16,
        "name": "invoke_agent batch",
        "kind": 1,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(end),
        "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}}],
        "status": {},
    }
    return otlp_document([root, *spans])


def generate_spans(min_spans: int, seed: int = 7, content: bool = False) -> list[dict]:
    """At least ``min_spans`` span dicts, in whole runs."""
    spans: list[dict] = []
    batch = 0
    while len(spans) < min_spans:
        start = 1_760_000_000_000_000_000 + batch * 10**13
        for run in generate_runs(200, seed=seed + batch, start_ns=start, first_trace=batch * 200, content=content):
            spans.extend(run)
        batch += 1
    return spans


if __name__ == "__main__":
    import argparse
    import json
    import sys

    parser = argparse.ArgumentParser(description="Write synthetic agent runs as one OTLP JSON document to stdout.")
    parser.add_argument("--runs", type=int, default=1, help="number of agent runs (traces)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--content", action="store_true", help="record prompt and completion content")
    args = parser.parse_args()
    spans = [span for run in generate_runs(args.runs, seed=args.seed, content=args.content) for span in run]
    json.dump(otlp_document(spans), sys.stdout, indent=1)
    sys.stdout.write("\n")

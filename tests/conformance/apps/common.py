"""What every conformance app shares: the scripted conversation, the three tools, the telemetry setup.

An app runs in a framework's virtual environment (not the test suite's), as a user's program would, against
the bundled fake OpenAI server (``OPENAI_BASE_URL``). Its shape is the same for every source, inside one root
span ``conformance run``:

1. an agent run: the model asks for ``slow_search``, ``medium_search`` and ``fast_search`` at once (the fake
   server's ``[[call: ...]]`` directive), the framework runs the three concurrently (each sleeps a different
   time, so that only the slowest is on the critical path), then a final model call answers;
2. a streamed model call.

``CONFORMANCE_MODE`` says how the profiler gets in: ``processor`` (the app sets the SDK up and calls
``otel_agent_profiler.install``) or ``zero-code`` (the app runs under ``opentelemetry-instrument`` and sets
nothing up). ``CONFORMANCE_HTTPX=1`` adds the httpx instrumentation's HTTP client spans, of httpx and httpx2
(the harness turns it off under zero-code otherwise, where it would load with every other installed
instrumentor). Spans go over OTLP/HTTP to ``CONFORMANCE_OTLP_ENDPOINT``. The app prints one JSON line with the
root span's trace id.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import time
from collections.abc import Awaitable, Callable

from opentelemetry import trace

MODEL = "o4-mini"
SLOW_TOOL_S = 0.5
# far enough from both neighbours that scheduling noise cannot reorder the three
MEDIUM_TOOL_S = 0.25
FAST_TOOL_S = 0.05
ROOT_SPAN = "conformance run"

# Over ~4,200 characters, so that the fake server's prefix cache answers the agent's second call with cached
# input tokens (the first call, with the same tools and system prompt, fills it).
SYSTEM_PROMPT = "You are a careful research assistant. Always check every source before answering. " * 60
AGENT_QUESTION = (
    "Compare what the three sources say about tracing. "
    "[[call: slow_search, medium_search, fast_search]] [[answer_tokens: 24]]"
)
STREAM_QUESTION = "Summarise the comparison in two sentences. [[answer_tokens: 32]]"


def mode() -> str:
    value = os.environ.get("CONFORMANCE_MODE", "processor")
    if value not in ("processor", "zero-code"):
        raise SystemExit(f"CONFORMANCE_MODE must be processor or zero-code, not {value!r}")
    return value


def zero_code() -> bool:
    """Whether ``opentelemetry-instrument`` set things up (and loaded every installed instrumentor)."""
    return mode() == "zero-code"


async def slow_search_body(query: str) -> str:
    await asyncio.sleep(SLOW_TOOL_S)
    return f"slow source on {query}: tracing shows where the time goes"


async def medium_search_body(query: str) -> str:
    await asyncio.sleep(MEDIUM_TOOL_S)
    return f"medium source on {query}: a trace is a tree of spans"


async def fast_search_body(query: str) -> str:
    await asyncio.sleep(FAST_TOOL_S)
    return f"fast source on {query}: spans nest"


def slow_search_sync(query: str) -> str:
    time.sleep(SLOW_TOOL_S)
    return f"slow source on {query}: tracing shows where the time goes"


def medium_search_sync(query: str) -> str:
    time.sleep(MEDIUM_TOOL_S)
    return f"medium source on {query}: a trace is a tree of spans"


def fast_search_sync(query: str) -> str:
    time.sleep(FAST_TOOL_S)
    return f"fast source on {query}: spans nest"


def _set_up_processor(service: str) -> trace.TracerProvider:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    import otel_agent_profiler

    endpoint = os.environ["CONFORMANCE_OTLP_ENDPOINT"].rstrip("/") + "/v1/traces"
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    trace.set_tracer_provider(provider)
    otel_agent_profiler.install(provider, metrics_enabled=False)
    return provider


Step = Callable[[], "Awaitable[None] | None"]


def run(source: str, instrument: Callable[[], None], agent_run: Step, stream_call: Step) -> None:
    """Set telemetry up, instrument, run the two steps inside the root span, flush, print the trace id.

    ``instrument`` is called in both modes: it instruments explicitly only what zero-code does not load.
    """
    provider = _set_up_processor(f"conformance-{source}") if not zero_code() else trace.get_tracer_provider()
    if os.environ.get("CONFORMANCE_HTTPX") == "1" and not zero_code():
        from opentelemetry.instrumentation import httpx

        # openai 3 sends through httpx2, which the same package instruments with a second instrumentor
        httpx.HTTPXClientInstrumentor().instrument()
        httpx.HTTPX2ClientInstrumentor().instrument()
    instrument()
    tracer = trace.get_tracer("conformance")

    async def both() -> None:
        for step in (agent_run, stream_call):
            result = step()
            if inspect.isawaitable(result):
                await result

    with tracer.start_as_current_span(ROOT_SPAN) as root:
        asyncio.run(both())
        trace_id = format(root.get_span_context().trace_id, "032x")
    flush = getattr(provider, "force_flush", None)
    if flush is not None:
        flush()
    print(json.dumps({"trace_id": trace_id, "source": source, "mode": mode()}), flush=True)

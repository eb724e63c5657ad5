"""The fake OpenAI server, driven by the real ``openai`` client and the real OpenLLMetry instrumentation.

These pin what the demo agent and the e2e tests rely on: response shapes the SDK parses, tool-call
directives, streaming timing, usage (cached and reasoning tokens), embeddings, concurrency, errors, and
the spans ``opentelemetry-instrumentation-openai`` records against it.
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import signal
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from openai import AsyncOpenAI, OpenAI

from demo.fake_llm import DEFAULT_TIMINGS, FakeOpenAIServer, ModelTiming
from tests.support.paths import ROOT

FAST = 0.05  # time_scale for tests that do not measure time

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
            },
            "required": ["city", "unit", "days"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search_web",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}, "top_k": {"type": "integer"}, "safe": {"type": "boolean"}},
            "required": ["query", "top_k"],
        },
    },
}
TOOLS = [WEATHER_TOOL, SEARCH_TOOL]
# Over 1024 tokens at ~4 characters a token, so the provider-style prefix cache applies to it.
LONG_SYSTEM_PROMPT = "You are a meticulous research assistant who cites sources. " * 90


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(time_scale=FAST) as fake:
        yield fake


@pytest.fixture
def client(server: FakeOpenAIServer) -> Iterator[OpenAI]:
    # No retries: a failure should surface at once, not after the SDK's backoff.
    with OpenAI(base_url=server.base_url, api_key="test-key", max_retries=0) as sdk:
        yield sdk


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def test_non_streaming_text_has_the_full_openai_shape(client: OpenAI, server: FakeOpenAIServer) -> None:
    response = client.chat.completions.create(model="gpt-4o-mini", messages=[user("Say hi")])

    assert response.id.startswith("chatcmpl-")
    assert response.object == "chat.completion"
    assert response.model == "gpt-4o-mini-2024-07-18"
    choice = response.choices[0]
    assert choice.finish_reason == "stop"
    assert choice.message.role == "assistant"
    assert choice.message.tool_calls is None
    assert choice.message.content and len(choice.message.content.split()) == 40
    usage = response.usage
    assert usage is not None
    assert usage.completion_tokens == 40
    assert usage.prompt_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert usage.prompt_tokens_details is not None and usage.prompt_tokens_details.cached_tokens == 0
    assert usage.completion_tokens_details is not None and usage.completion_tokens_details.reasoning_tokens == 0
    [entry] = server.requests
    assert entry["path"] == "/v1/chat/completions"
    assert entry["model"] == "gpt-4o-mini"
    assert entry["stream"] is False
    assert entry["status"] == 200
    assert entry["started"] < entry["first_token"] < entry["finished"]
    assert entry["completion_tokens"] == 40


def test_answer_tokens_directive_and_max_tokens(client: OpenAI) -> None:
    short = client.chat.completions.create(model="gpt-4o", messages=[user("Brief please [[answer_tokens: 7]]")])
    assert short.usage is not None and short.usage.completion_tokens == 7
    assert short.choices[0].message.content and short.choices[0].message.content.endswith(".")

    cut = client.chat.completions.create(model="gpt-4o", messages=[user("[[answer_tokens: 50]]")], max_tokens=5)
    assert cut.choices[0].finish_reason == "length"
    assert cut.usage is not None and cut.usage.completion_tokens == 5


def test_same_request_gives_the_same_answer_and_the_seed_changes_it(server: FakeOpenAIServer) -> None:
    messages = [user("Tell me something [[answer_tokens: 12]]")]

    def answer(fake: FakeOpenAIServer) -> str | None:
        with OpenAI(base_url=fake.base_url, api_key="k", max_retries=0) as sdk:
            return sdk.chat.completions.create(model="gpt-4o-mini", messages=messages).choices[0].message.content

    first = answer(server)
    assert answer(server) == first
    with FakeOpenAIServer(time_scale=0, seed=0) as same_seed, FakeOpenAIServer(time_scale=0, seed=7) as other_seed:
        assert answer(same_seed) == first
        assert answer(other_seed) != first


def test_call_directive_makes_parallel_tool_calls(client: OpenAI, server: FakeOpenAIServer) -> None:
    response = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[user("Weather in Paris and news about it? [[call: get_weather, search_web]]")],
        tools=TOOLS,
    )

    choice = response.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    calls = choice.message.tool_calls
    assert calls is not None and [c.function.name for c in calls] == ["get_weather", "search_web"]
    assert len({c.id for c in calls}) == 2
    assert all(c.id.startswith("call_") and int(c.id[5:], 16) >= 0 for c in calls)
    weather = json.loads(calls[0].function.arguments)
    assert set(weather) == {"city", "unit", "days"}
    assert isinstance(weather["city"], str) and weather["city"]
    assert weather["unit"] in ("celsius", "fahrenheit")
    assert 1 <= weather["days"] <= 7
    search = json.loads(calls[1].function.arguments)
    assert set(search) == {"query", "top_k"}  # optional "safe" left out, as models mostly do
    assert "Paris" in search["query"]
    assert server.requests[-1]["tool_calls"] == ["get_weather", "search_web"]


def test_tool_rounds_then_text(client: OpenAI) -> None:
    messages: list[Any] = [user("Plan a trip [[call: search_web]] [[call: get_weather, get_weather]]")]
    rounds = []
    for _ in range(4):
        response = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS)
        message = response.choices[0].message
        if not message.tool_calls:
            break
        rounds.append([c.function.name for c in message.tool_calls])
        messages.append(message.model_dump(exclude_none=True))
        messages += [{"role": "tool", "tool_call_id": c.id, "content": "ok"} for c in message.tool_calls]

    assert rounds == [["search_web"], ["get_weather", "get_weather"]]
    assert response.choices[0].finish_reason == "stop"
    assert message.content and message.content.startswith("I checked search_web and get_weather.")


def test_without_directive_the_first_tool_is_called_once(client: OpenAI) -> None:
    first = client.chat.completions.create(model="gpt-4o-mini", messages=[user("What now?")], tools=TOOLS)
    calls = first.choices[0].message.tool_calls
    assert calls is not None and [c.function.name for c in calls] == ["get_weather"]

    none = client.chat.completions.create(
        model="gpt-4o-mini", messages=[user("[[call: get_weather]]")], tools=TOOLS, tool_choice="none"
    )
    assert none.choices[0].message.tool_calls is None

    single = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[user("[[call: get_weather, search_web]]")],
        tools=TOOLS,
        parallel_tool_calls=False,
    )
    calls = single.choices[0].message.tool_calls
    assert calls is not None and len(calls) == 1


def test_streaming_text_timing(server: FakeOpenAIServer) -> None:
    scale = 0.2
    timing = DEFAULT_TIMINGS["gpt-4o-mini"]
    with (
        FakeOpenAIServer(time_scale=scale) as fake,
        OpenAI(base_url=fake.base_url, api_key="k", max_retries=0) as sdk,
    ):
        started = time.monotonic()
        stream = sdk.chat.completions.create(model="gpt-4o-mini", messages=[user("Stream it")], stream=True)
        first_chunk_at = None
        pieces = []
        finish_reasons = []
        for chunk in stream:
            assert chunk.object == "chat.completion.chunk"
            assert chunk.model == "gpt-4o-mini-2024-07-18"
            if first_chunk_at is None:
                first_chunk_at = time.monotonic()
            pieces.append(chunk.choices[0].delta.content or "")
            finish_reasons.append(chunk.choices[0].finish_reason)
        ended = time.monotonic()
        [entry] = fake.requests
        plain = sdk.chat.completions.create(model="gpt-4o-mini", messages=[user("Stream it")])

    assert "".join(pieces) == plain.choices[0].message.content
    assert finish_reasons[-1] == "stop" and set(finish_reasons[:-1]) == {None}
    # role chunk, one chunk per token, the finish chunk
    assert len(pieces) == 1 + 40 + 1
    assert first_chunk_at is not None
    expected_ttft = timing.ttft * scale
    expected_total = (timing.ttft + 40 * timing.decode_per_token) * scale
    assert first_chunk_at - started >= 0.8 * expected_ttft
    assert first_chunk_at - started < expected_ttft + 1.0
    assert ended - started >= 0.8 * expected_total
    assert ended - started < expected_total + 1.0
    assert ended - first_chunk_at > 0
    # A starved client can read the first chunk late, so the decode window is checked on the server's clock.
    assert entry["finished"] - entry["first_token"] >= 0.95 * 40 * timing.decode_per_token * scale


def test_timing_table_and_time_scale_are_honoured() -> None:
    with (
        FakeOpenAIServer(time_scale=0.5, timings={"tiny-model": (0.2, 0.01)}) as fake,
        OpenAI(base_url=fake.base_url, api_key="k", max_retries=0) as sdk,
    ):
        sdk.chat.completions.create(model="tiny-model", messages=[user("[[answer_tokens: 20]]")])
        [entry] = fake.requests
    assert fake.timing_for("tiny-model") == ModelTiming(0.2, 0.01)
    assert entry["first_token"] - entry["started"] >= 0.8 * 0.2 * 0.5
    assert entry["finished"] - entry["started"] >= 0.8 * (0.2 + 20 * 0.01) * 0.5


def test_streaming_tool_calls_assemble(client: OpenAI) -> None:
    request: dict[str, Any] = {
        "model": "gpt-4o-mini",
        "messages": [user("Weather in Oslo? [[call: get_weather, search_web]]")],
        "tools": TOOLS,
    }
    assembled: dict[int, dict[str, str]] = {}
    finish_reason = None
    for chunk in client.chat.completions.create(**request, stream=True):
        choice = chunk.choices[0]
        finish_reason = choice.finish_reason or finish_reason
        for delta in choice.delta.tool_calls or []:
            call = assembled.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
            if delta.id:
                call["id"] = delta.id
            if delta.function and delta.function.name:
                call["name"] += delta.function.name
            if delta.function and delta.function.arguments:
                call["arguments"] += delta.function.arguments
    plain = client.chat.completions.create(**request).choices[0].message.tool_calls

    assert finish_reason == "tool_calls"
    assert [assembled[i]["name"] for i in sorted(assembled)] == ["get_weather", "search_web"]
    assert len({call["id"] for call in assembled.values()}) == 2
    assert plain is not None
    # Same request, same arguments; ids are fresh per response, as OpenAI's are.
    assert [json.loads(assembled[i]["arguments"]) for i in sorted(assembled)] == [
        json.loads(c.function.arguments) for c in plain
    ]


def test_stream_usage_only_with_include_usage(client: OpenAI) -> None:
    messages = [user("[[answer_tokens: 9]]")]
    without = list(client.chat.completions.create(model="gpt-4o", messages=messages, stream=True))
    assert all(chunk.usage is None for chunk in without)

    chunks = list(
        client.chat.completions.create(
            model="gpt-4o", messages=messages, stream=True, stream_options={"include_usage": True}
        )
    )
    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None
    assert last.usage.completion_tokens == 9
    assert last.usage.total_tokens == last.usage.prompt_tokens + 9
    assert all(chunk.usage is None for chunk in chunks[:-1])


def test_prefix_cache_hits_on_the_second_call_with_a_long_system_prompt(
    client: OpenAI, server: FakeOpenAIServer
) -> None:
    def call(question: str, model: str = "gpt-4o-mini", system: str = LONG_SYSTEM_PROMPT) -> Any:
        messages = [{"role": "system", "content": system}, user(question)]
        return client.chat.completions.create(model=model, messages=messages).usage

    first = call("What is new?")
    second = call("And what else?")
    other_model = call("And what else?", model="gpt-4o")

    assert first.prompt_tokens > 1024
    assert first.prompt_tokens_details.cached_tokens == 0
    cached = second.prompt_tokens_details.cached_tokens
    assert 1024 <= cached <= second.prompt_tokens
    assert cached % 64 == 0
    assert other_model.prompt_tokens_details.cached_tokens == 0  # the cache is per model
    assert [e["cached_tokens"] for e in server.requests] == [0, cached, 0]

    short = "Be brief."
    call("one", system=short)
    assert call("two", system=short).prompt_tokens_details.cached_tokens == 0  # under 1024 tokens: no caching


def test_cache_hits_shorten_time_to_first_token() -> None:
    prefill_only = {"gpt-4o-mini": ModelTiming(ttft=0.0, decode_per_token=0.0, prefill_per_token=100e-6)}
    with (
        FakeOpenAIServer(timings=prefill_only) as fake,
        OpenAI(base_url=fake.base_url, api_key="k", max_retries=0) as sdk,
    ):
        for question in ("first", "second"):
            messages = [{"role": "system", "content": LONG_SYSTEM_PROMPT}, user(question)]
            sdk.chat.completions.create(model="gpt-4o-mini", messages=messages)
        cold, warm = ((e["first_token"] - e["started"]) for e in fake.requests)
    assert cold > 0.1  # ~1,300 uncached tokens at 0.1 ms each
    assert warm < cold / 4


def test_reasoning_tokens_only_for_o_series(client: OpenAI) -> None:
    messages = [user("Think hard [[answer_tokens: 14]]")]
    reasoning = client.chat.completions.create(model="o3-mini", messages=messages)
    plain = client.chat.completions.create(model="gpt-4o-mini", messages=messages)

    assert reasoning.model == "o3-mini-2025-01-31"
    usage = reasoning.usage
    assert usage is not None and usage.completion_tokens_details is not None
    hidden = usage.completion_tokens_details.reasoning_tokens
    assert hidden == 6
    assert usage.completion_tokens == 14 + hidden
    assert math.isclose(hidden / usage.completion_tokens, 0.3)
    assert plain.usage is not None and plain.usage.completion_tokens_details is not None
    assert plain.usage.completion_tokens_details.reasoning_tokens == 0


def test_embeddings_are_deterministic_unit_vectors(client: OpenAI, server: FakeOpenAIServer) -> None:
    first = client.embeddings.create(model="text-embedding-3-small", input=["alpha", "beta"], encoding_format="float")
    again = client.embeddings.create(model="text-embedding-3-small", input="alpha", encoding_format="float")
    small = client.embeddings.create(model="text-embedding-3-small", input="alpha", dimensions=16)
    packed = client.embeddings.create(model="text-embedding-3-small", input="alpha", encoding_format="base64")
    # Without encoding_format the SDK asks for base64 (float32) and decodes it itself.
    default = client.embeddings.create(model="text-embedding-3-small", input="alpha")

    assert [d.index for d in first.data] == [0, 1]
    vectors = [d.embedding for d in first.data]
    assert all(len(v) == 64 for v in vectors)
    assert all(math.isclose(math.fsum(x * x for x in v), 1.0) for v in vectors)
    assert vectors[0] != vectors[1]
    assert again.data[0].embedding == vectors[0]
    assert len(small.data[0].embedding) == 16
    assert first.usage.prompt_tokens == first.usage.total_tokens > 0
    raw = packed.data[0].embedding
    assert isinstance(raw, str)
    decoded = struct.unpack("<64f", base64.b64decode(raw))
    assert all(math.isclose(a, b, abs_tol=1e-6) for a, b in zip(decoded, vectors[0], strict=True))
    assert all(math.isclose(a, b, abs_tol=1e-6) for a, b in zip(default.data[0].embedding, vectors[0], strict=True))
    assert server.requests[0]["inputs"] == 2


def test_models_lists_the_known_models(client: OpenAI) -> None:
    ids = {model.id for model in client.models.list()}
    assert {"gpt-4o-mini", "gpt-4o", "o3-mini", "text-embedding-3-small"} <= ids
    assert client.models.retrieve("gpt-4o").id == "gpt-4o"


def test_async_calls_run_concurrently() -> None:
    scale = 0.25  # one gpt-4o call: (0.4 s + 40 * 10 ms) * 0.25 = 0.2 s

    async def run(fake: FakeOpenAIServer) -> tuple[float, float]:
        async with AsyncOpenAI(base_url=fake.base_url, api_key="k", max_retries=0) as sdk:
            started = time.monotonic()
            await sdk.chat.completions.create(model="gpt-4o", messages=[user("solo")])
            single = time.monotonic() - started
            started = time.monotonic()
            answers = await asyncio.gather(
                *(sdk.chat.completions.create(model="gpt-4o", messages=[user(f"q{i}")]) for i in range(4))
            )
            together = time.monotonic() - started
            assert all(a.choices[0].message.content for a in answers)
            return single, together

    with FakeOpenAIServer(time_scale=scale) as fake:
        single, together = asyncio.run(run(fake))
        parallel = fake.requests[1:]
    assert single >= 0.8 * 0.2
    assert together < 2 * single  # sequential would take 4x
    assert max(e["started"] for e in parallel) < min(e["finished"] for e in parallel)


def test_bad_requests_raise_bad_request_error(client: OpenAI, server: FakeOpenAIServer) -> None:
    with pytest.raises(openai.BadRequestError) as empty:
        client.chat.completions.create(model="gpt-4o-mini", messages=[])
    assert empty.value.status_code == 400
    assert empty.value.code == "invalid_value"

    with pytest.raises(openai.BadRequestError) as no_model:
        client.chat.completions.create(model="", messages=[user("hi")])
    assert no_model.value.code == "missing_required_parameter"
    assert no_model.value.param == "model"

    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="gpt-4o-mini", messages=[user("hi")], tools=[{"type": "function"}])

    with pytest.raises(openai.NotFoundError):
        client.get("/no/such/endpoint", cast_to=object)


def _post_raw(url: str, data: bytes) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=data, method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read())


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{not json", "invalid_json"),
        (b"\xff\xfe", "invalid_json"),
        (b"[1, 2]", "invalid_json"),
        (b'{"messages": [{"role": "user", "content": "hi"}]}', "missing_required_parameter"),
        (b'{"model": "gpt-4o"}', "missing_required_parameter"),
        (b'{"model": "gpt-4o", "messages": [1]}', "invalid_value"),
        (b'{"model": "gpt-4o", "messages": [{"role": "user", "tool_calls": 1}]}', "invalid_value"),
    ],
)
def test_malformed_bodies_get_openai_shaped_400s(server: FakeOpenAIServer, body: bytes, code: str) -> None:
    status, payload = _post_raw(server.base_url + "/chat/completions", body)
    assert status == 400
    assert payload["error"]["type"] == "invalid_request_error"
    assert payload["error"]["code"] == code
    assert isinstance(payload["error"]["message"], str)


def test_unknown_path_is_404_and_the_server_keeps_serving(server: FakeOpenAIServer, client: OpenAI) -> None:
    status, payload = _post_raw(server.base_url + "/does-not-exist", b"{}")
    assert status == 404
    assert payload["error"]["code"] == "unknown_url"
    assert client.chat.completions.create(model="gpt-4o-mini", messages=[user("still there?")]).choices


def test_stop_ends_a_stream_in_flight() -> None:
    fake = FakeOpenAIServer(time_scale=1.0).start()
    with OpenAI(base_url=fake.base_url, api_key="k", max_retries=0) as sdk:
        stream = sdk.chat.completions.create(
            model="gpt-4o-mini", messages=[user("[[answer_tokens: 5000]]")], stream=True
        )
        next(iter(stream))  # the stream is live; finishing it would take 30 s
        started = time.monotonic()
        fake.stop()
        assert time.monotonic() - started < 2.0
        with pytest.raises(openai.APIConnectionError):
            for _ in stream:
                pass
    assert fake.requests[0]["aborted"] is True


def _unwrap_openai_resources() -> None:
    """Remove wrappers that ``OpenAIInstrumentor().uninstrument()`` leaves behind.

    opentelemetry-instrumentation-openai 0.62.4 calls ``unwrap("openai.resources.chat.completions",
    "Completions.create")``, which splits the dotted path at its last dot and looks for an attribute named
    "Completions.create" on the wrong object, so nothing is unwrapped and spans keep being recorded.
    """
    import wrapt

    proxy_type = getattr(wrapt, "BaseObjectProxy", wrapt.ObjectProxy)
    for name, module in list(sys.modules.items()):
        if not name.startswith("openai.resources") or module is None:
            continue
        for cls in vars(module).values():
            if not isinstance(cls, type) or not cls.__module__.startswith("openai."):
                continue
            for attribute, value in list(vars(cls).items()):
                if isinstance(value, proxy_type) and hasattr(value, "__wrapped__"):
                    setattr(cls, attribute, value.__wrapped__)


@pytest.fixture
def instrumented() -> Iterator[Any]:
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield exporter
    finally:
        instrumentor.uninstrument()
        _unwrap_openai_resources()
        provider.shutdown()


# Importing the instrumentation's v1 module defines a pydantic model with a class-based `Config`.
@pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20")
def test_openllmetry_spans_against_the_fake_server(instrumented: Any, server: FakeOpenAIServer) -> None:
    exporter = instrumented
    with OpenAI(base_url=server.base_url, api_key="k", max_retries=0) as sdk:
        for question in ("first [[answer_tokens: 5]]", "second [[answer_tokens: 5]]"):
            messages = [{"role": "system", "content": LONG_SYSTEM_PROMPT}, user(question)]
            sdk.chat.completions.create(model="gpt-4o-mini", messages=messages, max_tokens=50)
        stream = sdk.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "system", "content": LONG_SYSTEM_PROMPT}, user("third [[answer_tokens: 5]]")],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)
        sdk.chat.completions.create(model="o3-mini", messages=[user("think [[answer_tokens: 7]]")])

    spans = exporter.get_finished_spans()
    assert [span.name for span in spans] == ["openai.chat"] * 4
    cold, warm, streamed, reasoning = spans
    for span in spans:
        attributes = span.attributes
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.provider.name"] == "openai"
        assert attributes["gen_ai.usage.input_tokens"] > 0
        assert attributes["gen_ai.usage.output_tokens"] > 0
        assert attributes["gen_ai.response.id"].startswith("chatcmpl-")
    assert cold.attributes["gen_ai.request.model"] == "gpt-4o-mini"
    assert cold.attributes["gen_ai.response.model"] == "gpt-4o-mini-2024-07-18"
    assert cold.attributes["gen_ai.request.max_tokens"] == 50
    assert cold.attributes["gen_ai.usage.output_tokens"] == 5
    assert cold.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert cold.attributes["gen_ai.usage.cache_read.input_tokens"] == 0
    assert warm.attributes["gen_ai.usage.cache_read.input_tokens"] >= 1024
    assert streamed.attributes["gen_ai.usage.cache_read.input_tokens"] >= 1024  # read from the usage chunk
    assert reasoning.attributes["gen_ai.usage.reasoning_tokens"] == 3

    # One event per SSE chunk the SDK yields: role, 5 tokens, finish, usage.
    assert streamed.attributes["gen_ai.is_streaming"] is True
    assert (
        [event.name for event in streamed.events]
        == ["gen_ai.content.completion.chunk"] * len(chunks)
        == ["gen_ai.content.completion.chunk"] * 8
    )
    assert streamed.events[0].timestamp - streamed.start_time >= 0.8 * 0.25 * FAST * 1e9

    # The instrumentation propagates W3C trace context, so each request names the span that made it.
    sent = [entry["traceparent"] for entry in server.requests]
    assert sent == [f"00-{s.context.trace_id:032x}-{s.context.span_id:016x}-{s.context.trace_flags:02x}" for s in spans]


@pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20")
def test_uninstrumenting_really_stops_recording(server: FakeOpenAIServer, client: OpenAI) -> None:
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    instrumentor.uninstrument()
    _unwrap_openai_resources()
    client.chat.completions.create(model="gpt-4o-mini", messages=[user("quiet")])
    assert exporter.get_finished_spans() == ()
    assert server.requests[-1]["traceparent"] is None


def test_many_threads_share_one_server(server: FakeOpenAIServer) -> None:
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        try:
            with OpenAI(base_url=server.base_url, api_key="k", max_retries=0) as sdk:
                for round_ in range(3):
                    sdk.chat.completions.create(model="gpt-4o-mini", messages=[user(f"{index}/{round_}")])
        except BaseException as error:  # collected and re-raised in the test thread
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors
    assert server.request_count == 24
    assert {e["status"] for e in server.requests} == {200}


@pytest.mark.e2e
def test_module_entry_point_serves_until_terminated() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "demo.fake_llm", "--port", "0", "--time-scale", "0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        with OpenAI(base_url=base_url, api_key="k", max_retries=0) as sdk:
            assert sdk.chat.completions.create(model="gpt-4o-mini", messages=[user("hi")]).choices
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=10)
        assert process.returncode == 0, stderr
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def test_request_log_says_whether_the_usage_was_sent() -> None:
    from openai import OpenAI

    with FakeOpenAIServer(time_scale=0) as server:
        client = OpenAI(base_url=server.base_url, api_key="x")
        messages = [{"role": "user", "content": "hi"}]
        client.chat.completions.create(model="gpt-4o-mini", messages=messages)
        for _ in client.chat.completions.create(model="gpt-4o-mini", messages=messages, stream=True):
            pass
        options = {"include_usage": True}
        for _ in client.chat.completions.create(
            model="gpt-4o-mini", messages=messages, stream=True, stream_options=options
        ):
            pass
    assert [entry["usage_sent"] for entry in server.requests] == [True, False, True]

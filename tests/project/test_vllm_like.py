"""The bundled server's vLLM-like mode (demo.vllm_like), and the call anatomy it makes visible, for real.

* Its ``llm_request`` SERVER spans travel over OTLP (the real gRPC exporter) to a real collector (rotel)
  and continue the trace of each request's ``traceparent``; requests over the concurrency limit queue.
* ``/metrics`` is Prometheus text with vLLM's names and types, read back with prometheus_client's parser.
* Live: a client instrumented like a user's (its httpx2 client by opentelemetry-instrumentation-httpx,
  which sends ``traceparent``), the profiler's span processor, and the server's spans made in-process
  (an in-process engine): the exported client span carries ``agent_profiler.llm.*``, and the phases
  add up to its duration.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.error
import urllib.request
from functools import partial
from typing import Any

import httpx2
import pytest
from openai import OpenAI
from opentelemetry.instrumentation.httpx import HTTPX2ClientInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client.parser import text_string_to_metric_families

from demo.fake_llm import FakeOpenAIServer
from demo.vllm_like import VllmLike
from otel_agent_profiler import AgentProfilerSpanProcessor
from otel_agent_profiler.live import attributes as attr
from tests.support.backends import wait_until
from tests.support.concurrent_calls import run_at_once

TRACE_IDS = [f"{i + 1:032x}" for i in range(3)]
PARENT_ID = "00f067aa0ba902b7"
LATENCY_KEYS = (
    "gen_ai.latency.time_in_queue",
    "gen_ai.latency.time_to_first_token",
    "gen_ai.latency.e2e",
    "gen_ai.latency.time_in_model_prefill",
    "gen_ai.latency.time_in_model_decode",
    "gen_ai.latency.time_in_model_inference",
)


def _chat(base_url: str, content: str, traceparent: str | None = None, answer_tokens: int = 10) -> dict[str, Any]:
    body = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": f"{content} [[answer_tokens: {answer_tokens}]]"}],
    }
    headers = {"Content-Type": "application/json"}
    if traceparent:
        headers["traceparent"] = traceparent
    request = urllib.request.Request(base_url + "/chat/completions", data=json.dumps(body).encode(), headers=headers)
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def _concurrent_chats(base_url: str) -> None:
    threads = [
        threading.Thread(target=_chat, args=(base_url, f"question {i}", f"00-{trace_id}-{PARENT_ID}-01"))
        for i, trace_id in enumerate(TRACE_IDS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


@pytest.mark.e2e
def test_server_spans_continue_each_trace_over_otlp_and_requests_over_the_limit_queue(rotel_factory):
    rotel = rotel_factory()
    vllm = VllmLike(max_running=1, otlp_endpoint=rotel.grpc_url, service_name="vllm-under-test")
    try:
        with FakeOpenAIServer(time_scale=0.5, vllm_like=vllm) as server:
            _concurrent_chats(server.base_url)
        assert vllm.flush()
    finally:
        vllm.shutdown()
    spans = rotel.wait_for_spans(lambda found: len([s for s in found if s.name == "llm_request"]) >= 3)
    served = sorted((s for s in spans if s.name == "llm_request"), key=lambda s: s.start_ns)
    assert len(served) == 3
    assert sorted(s.trace_id for s in served) == TRACE_IDS
    for span in served:
        assert span.kind == "SPAN_KIND_SERVER"
        assert span.parent_id == PARENT_ID
        assert span.resource.get("service.name") == "vllm-under-test"
        assert set(LATENCY_KEYS) <= set(span.attributes)
        assert span.attributes["gen_ai.usage.completion_tokens"] == 10
        a = span.attributes
        total = a["gen_ai.latency.time_in_queue"] + a["gen_ai.latency.time_in_model_prefill"]
        assert total + a["gen_ai.latency.time_in_model_decode"] == pytest.approx(a["gen_ai.latency.e2e"], abs=1e-6)
        assert (span.end_ns - span.start_ns) / 1e9 == pytest.approx(a["gen_ai.latency.e2e"], abs=1e-3)
    queues = sorted(s.attributes["gen_ai.latency.time_in_queue"] for s in served)
    inference = min(s.attributes["gen_ai.latency.time_in_model_inference"] for s in served)
    # One runs at once: the second waits for about one request, the third for about two (the three
    # threads send a few milliseconds apart).
    assert queues[0] < 0.02
    assert queues[1] >= 0.7 * inference
    assert queues[2] >= 1.7 * inference


def test_metrics_have_vllms_names_and_types():
    vllm = VllmLike(max_running=1)
    with FakeOpenAIServer(time_scale=0.05, vllm_like=vllm) as server:
        _concurrent_chats(server.base_url)
        replies = [_chat(server.base_url, "again")]

        def scrape_once_all_recorded() -> tuple[str, str] | None:
            # The server frees a request's slot and records its metrics just after the reply is
            # sent (as vLLM does, asynchronously): the client may read /metrics before that.
            with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=10) as response:
                scraped = response.headers["Content-Type"], response.read().decode()
            done = re.search(r"^vllm:e2e_request_latency_seconds_count\{[^}]*\} (\S+)$", scraped[1], re.MULTILINE)
            return scraped if done and float(done.group(1)) == 4 else None

        content_type, text = wait_until(scrape_once_all_recorded, 10, "the four requests' metrics")
        prompt_tokens = sum(
            entry["prompt_tokens"] for entry in server.requests if entry["path"].endswith("completions")
        )
    assert content_type.startswith("text/plain")
    families = {family.name: family for family in text_string_to_metric_families(text)}
    expected_types = {
        "vllm:num_requests_running": "gauge",
        "vllm:num_requests_waiting": "gauge",
        "vllm:kv_cache_usage_perc": "gauge",
        "vllm:prompt_tokens": "counter",
        "vllm:generation_tokens": "counter",
        "vllm:num_preemptions": "counter",
        "vllm:prefix_cache_queries": "counter",
        "vllm:prefix_cache_hits": "counter",
        "vllm:request_queue_time_seconds": "histogram",
        "vllm:time_to_first_token_seconds": "histogram",
        "vllm:request_prefill_time_seconds": "histogram",
        "vllm:request_decode_time_seconds": "histogram",
        "vllm:e2e_request_latency_seconds": "histogram",
    }
    assert {name: families[name].type for name in expected_types} == expected_types

    def value(family: str, sample: str) -> float:
        (found,) = [s for s in families[family].samples if s.name == sample]
        assert found.labels.get("model_name") == "gpt-4o-mini"
        return found.value

    assert value("vllm:num_requests_running", "vllm:num_requests_running") == 0
    assert value("vllm:num_requests_waiting", "vllm:num_requests_waiting") == 0
    assert value("vllm:prompt_tokens", "vllm:prompt_tokens_total") == prompt_tokens
    assert value("vllm:generation_tokens", "vllm:generation_tokens_total") == 4 * 10
    assert value("vllm:num_preemptions", "vllm:num_preemptions_total") == 0
    assert value("vllm:request_queue_time_seconds", "vllm:request_queue_time_seconds_count") == 4
    assert value("vllm:request_queue_time_seconds", "vllm:request_queue_time_seconds_sum") > 0
    assert replies[0]["usage"]["completion_tokens"] == 10


def test_metrics_is_not_served_without_the_mode():
    with FakeOpenAIServer(time_scale=0) as server:
        with pytest.raises(urllib.error.HTTPError) as raised:
            urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=10)
        assert raised.value.code == 404
        raised.value.close()


def test_prefill_grows_with_uncached_prompt_tokens_and_the_prefix_cache_cuts_it():
    exporter = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    long_prompt = "You are a careful assistant. " + " ".join(f"Rule {i}: cite every source." for i in range(400))
    with FakeOpenAIServer(time_scale=1.0, vllm_like=VllmLike(tracer_provider=provider)) as server:
        for content in ("short", long_prompt, long_prompt):
            _chat(server.base_url, content, answer_tokens=1)
        cached = [entry["cached_tokens"] for entry in server.requests]
    prefill = [s.attributes["gen_ai.latency.time_in_model_prefill"] for s in exporter.get_finished_spans()]
    assert cached[:2] == [0, 0] and cached[2] > 1024
    assert prefill[1] > prefill[0] + 0.05  # thousands of uncached tokens at 40 µs each
    assert prefill[2] < prefill[1] - 0.05  # the same prompt again: served from the prefix cache
    provider.shutdown()


def test_live_processor_splits_the_call_and_the_phases_add_up():
    exported = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    # The phases are on the LLM spans, which carry them with "all" (by default only roots do).
    profiler = AgentProfilerSpanProcessor(downstream=[SimpleSpanProcessor(exported)], span_attributes="all")
    provider.add_span_processor(profiler)
    tracer = provider.get_tracer("test")
    http_client = httpx2.Client()
    HTTPX2ClientInstrumentor.instrument_client(http_client, tracer_provider=provider)
    vllm = VllmLike(max_running=1, tracer_provider=provider)
    # The engine ends its span once the answer is sent, so the client can end its own first, and on a
    # loaded machine the agent's root too: the trace was then profiled without the engine's spans and the
    # calls had no phases (seen once, with the suite in two processes). The root waits for both.
    recorded = threading.Semaphore(0)
    record = vllm.record

    def record_and_count(*args: Any, **kwargs: Any) -> None:
        record(*args, **kwargs)
        recorded.release()

    vllm.record = record_and_count  # type: ignore[method-assign]
    try:
        with FakeOpenAIServer(time_scale=0.1, vllm_like=vllm) as server:
            client = OpenAI(base_url=server.base_url, api_key="x", http_client=http_client, max_retries=0)

            def call(i: int) -> None:
                attributes = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini"}
                with tracer.start_as_current_span(f"chat {i}", kind=SpanKind.CLIENT, attributes=attributes) as span:
                    reply = client.chat.completions.create(
                        model="gpt-4o-mini", messages=[{"role": "user", "content": f"q{i} [[answer_tokens: 20]]"}]
                    )
                    span.set_attribute("gen_ai.usage.input_tokens", reply.usage.prompt_tokens)
                    span.set_attribute("gen_ai.usage.output_tokens", reply.usage.completion_tokens)

            with tracer.start_as_current_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"}):
                run_at_once([partial(call, i) for i in range(2)])
                assert all(recorded.acquire(timeout=10) for _ in range(2)), "the engine's two spans"
        assert profiler.force_flush(10_000)
    finally:
        http_client.close()
        provider.shutdown()
    spans = {s.name: s for s in exported.get_finished_spans()}
    assert "llm_request" in {s.name for s in exported.get_finished_spans()}
    root = spans["invoke_agent"]
    assert root.attributes[attr.TRACE_LLM_CALLS] == 2
    queued = []
    for name in ("chat 0", "chat 1"):
        span = spans[name]
        phases = [span.attributes[key] for key in attr.LLM_PHASE_ATTRIBUTES]
        assert all(value >= 0 for value in phases)
        assert sum(phases) == pytest.approx((span.end_time - span.start_time) / 1e6, abs=1e-3)
        queued.append(span.attributes[attr.LLM_QUEUE_MS])
    # The two calls went out together and one runs at a time: one of them queued behind the other.
    assert max(queued) > 0.5 * min(spans[n].attributes[attr.LLM_DECODE_MS] for n in ("chat 0", "chat 1"))
    for span in exported.get_finished_spans():
        if span.name == "llm_request":
            assert span.kind is SpanKind.SERVER
            assert span.attributes[attr.CATEGORY] == "llm"
            assert attr.LLM_QUEUE_MS not in span.attributes

"""``--prometheus`` against a real Prometheus that scraped the servers while an agent ran.

Two inference servers are scraped every second: the bundled OpenAI-compatible server in its
vLLM-like mode (at most two requests run, the others queue; ``/metrics`` with vLLM's names), and
an exporter publishing SGLang's names (``prometheus_client``'s own HTTP server, as SGLang's is,
which answers Prometheus's request for OpenMetrics with an underscore for each colon; two
tensor-parallel ranks and two cache sources, so that series of one server are combined). An agent
fans out six chat calls through the openai client under the profiler's span processor, and one
call of the model the SGLang server serves; its spans are written as an OTLP JSON file. Once Prometheus has ingested
the run, ``analyze FILE --prometheus URL`` attaches to each LLM call the load it met on its server.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest
from openai import OpenAI
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from demo.fake_llm import FakeOpenAIServer
from demo.vllm_like import VllmLike
from otel_agent_profiler import AgentProfilerSpanProcessor
from otel_agent_profiler.adapters.otlp_json_out import otlp_json_document
from otel_agent_profiler.adapters.sdk_spans import records_from_spans
from otel_agent_profiler.cli import analyze, sources
from otel_agent_profiler.core.categories import LLM
from otel_agent_profiler.core.profile import SpanProfile
from otel_agent_profiler.offline import LoadedProfiles
from otel_agent_profiler.offline.store_loading import load_inputs
from tests.support.backends import HOST, BackendNotInstalled, Prometheus, artifact_dir, free_port
from tests.support.concurrent_calls import run_at_once

pytestmark = pytest.mark.e2e

MAX_RUNNING = 2
CALLS = 6
SGLANG_MODEL = "sglang-served-model"


@dataclass
class RecordedRun:
    prometheus: str
    trace_file: Path
    vllm_instance: str
    sglang_instance: str


class _SglangLike:
    """An exporter with SGLang's metric names, on a free port; its numbers are set by the test."""

    def __init__(self) -> None:
        registry = CollectorRegistry()
        ranked = ["model_name", "tp_rank"]
        self.running = Gauge("sglang:num_running_reqs", "The number of running requests.", ranked, registry=registry)
        self.queued = Gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.", ranked,
                            registry=registry)  # fmt: skip
        self.usage = Gauge("sglang:token_usage", "The token usage.", ranked, registry=registry)
        self.prompt = Counter("sglang:prompt_tokens", "Number of prefill tokens processed.", ["model_name"],
                              registry=registry)  # fmt: skip
        self.cached = Counter("sglang:cached_tokens", "Number of cached prompt tokens by source.",
                              ["model_name", "cache_source"], registry=registry)  # fmt: skip
        self.retracted = Counter("sglang:num_retracted_requests", "Total number of retracted requests.",
                                 ["model_name"], registry=registry)  # fmt: skip
        for rank, (running, queued, usage) in enumerate([(3, 1, 0.25), (2, 0, 0.5)]):
            self.running.labels(SGLANG_MODEL, str(rank)).set(running)
            self.queued.labels(SGLANG_MODEL, str(rank)).set(queued)
            self.usage.labels(SGLANG_MODEL, str(rank)).set(usage)
        self.port = free_port()
        self.httpd, self.thread = start_http_server(self.port, addr=HOST, registry=registry)
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, daemon=True)
        self._ticker.start()

    def _tick(self) -> None:
        # Prompt tokens at 100 per tick, 40% of them cached (30 on the device, 10 on the host).
        ticks = 0
        while not self._stop.wait(0.05):
            self.prompt.labels(SGLANG_MODEL).inc(100)
            self.cached.labels(SGLANG_MODEL, "device").inc(30)
            self.cached.labels(SGLANG_MODEL, "host").inc(10)
            ticks += 1
            if ticks % 10 == 0:
                self.retracted.labels(SGLANG_MODEL).inc()

    def stop(self) -> None:
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def _agent_run(base_url: str) -> list:
    """The spans of one agent run: six concurrent chats, and one call of SGLang's model."""
    exported = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(AgentProfilerSpanProcessor(downstream=[SimpleSpanProcessor(exported)]))
    tracer = provider.get_tracer("agent")
    client = OpenAI(base_url=base_url, api_key="x", max_retries=0)

    def chat(i: int) -> None:
        attributes = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini"}
        with tracer.start_as_current_span(f"chat {i}", kind=SpanKind.CLIENT, attributes=attributes) as span:
            reply = client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": f"step {i} [[answer_tokens: 300]]"}]
            )
            span.set_attribute("gen_ai.response.model", reply.model)
            span.set_attribute("gen_ai.usage.input_tokens", reply.usage.prompt_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", reply.usage.completion_tokens)

    def sglang_call() -> None:
        attributes = {"gen_ai.operation.name": "chat", "gen_ai.request.model": SGLANG_MODEL}
        with tracer.start_as_current_span("chat sglang", kind=SpanKind.CLIENT, attributes=attributes):
            time.sleep(3)

    try:
        with tracer.start_as_current_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"}):
            run_at_once([*(partial(chat, i) for i in range(CALLS)), sglang_call])
        assert provider.force_flush(10_000)
        return list(exported.get_finished_spans())
    finally:
        client.close()
        provider.shutdown()


@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RecordedRun]:
    workdir = tmp_path_factory.mktemp("prometheus-load")
    vllm = VllmLike(max_running=MAX_RUNNING)
    sglang = _SglangLike()
    server = FakeOpenAIServer(time_scale=1.0, vllm_like=vllm).start()
    vllm_target = server.base_url.split("//", 1)[1].split("/", 1)[0]
    sglang_target = f"{HOST}:{sglang.port}"
    try:
        prometheus = Prometheus(
            [vllm_target, sglang_target], workdir, artifact_dir("e2e", "prometheus-load"), job="inference"
        )
    except BackendNotInstalled as err:
        pytest.fail(str(err), pytrace=False)
    prometheus.start()
    try:
        # vLLM's series appear with the first request for a model, as the real server's do.
        OpenAI(base_url=server.base_url, api_key="x", max_retries=0).chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "warm up [[answer_tokens: 1]]"}]
        )
        prometheus.wait_for("vllm:num_requests_running")
        prometheus.wait_for('{__name__=~"sglang[:_]num_running_reqs"}', predicate=lambda result: len(result) == 2)
        spans = _agent_run(server.base_url)
        end_s = max(span.end_time for span in spans) / 1e9
        # Ingested past the end of the run, with the padding the reader asks for.
        prometheus.wait_for(
            f'min(timestamp({{__name__=~"vllm:num_requests_running|sglang[:_]num_running_reqs"}})) > {end_s + 3}',
            timeout=30,
        )
        trace_file = workdir / "run.otlp.json"
        trace_file.write_text(json.dumps(otlp_json_document(records_from_spans(spans))))
        yield RecordedRun(prometheus.base_url, trace_file, vllm_target, sglang_target)
    finally:
        prometheus.stop()
        server.stop()
        sglang.stop()


def _loaded(*argv: str) -> LoadedProfiles:
    """What ``analyze`` loads for ``argv``: its own parser, checks and loading function."""
    parser = argparse.ArgumentParser()
    analyze.add_arguments(parser)
    args = parser.parse_args(list(argv))
    inputs = sources.offline_inputs(args)
    assert inputs is not None
    loaded = load_inputs(inputs)
    assert loaded.complete and not inputs.folder_problems
    return loaded


def _llm_calls(loaded: LoadedProfiles) -> list[SpanProfile]:
    (profile,) = loaded.profiles
    return [span for span in profile.spans if span.category == LLM and span.counted]


def test_each_llm_call_gets_the_load_its_server_showed_while_it_ran(recorded_run: RecordedRun) -> None:
    calls = _llm_calls(_loaded(str(recorded_run.trace_file), "--prometheus", recorded_run.prometheus))
    assert len(calls) == CALLS + 1
    vllm_calls = [span for span in calls if span.model == "gpt-4o-mini"]
    assert len(vllm_calls) == CALLS
    shortest = min(span.duration_ns for span in vllm_calls)
    # Two run at once: the four others waited for a slot, one or two full calls long.
    queued = [span for span in vllm_calls if span.duration_ns > 1.5 * shortest]
    assert len(queued) == CALLS - MAX_RUNNING
    for span in vllm_calls:
        load = span.backend_load
        assert load is not None, span.name
        assert load.source == recorded_run.vllm_instance
        assert load.samples >= 2
        assert load.running_max is not None and load.running_max <= MAX_RUNNING
        assert load.kv_cache_usage_max is not None and 0 < load.kv_cache_usage_max <= 1
        assert load.prefix_cache_hit_rate is not None and 0 <= load.prefix_cache_hit_rate <= 1
        assert load.preemptions == 0
    for span in queued:
        load = span.backend_load
        assert load is not None
        assert load.waiting_max is not None and load.waiting_max > 0, span.name
        assert load.running_max == MAX_RUNNING, span.name
    # The SGLang server's call: its ranks' requests added up, the fuller KV cache, both cache sources.
    (other,) = [span for span in calls if span.model == SGLANG_MODEL]
    load = other.backend_load
    assert load is not None and load.source == recorded_run.sglang_instance
    assert (load.running_max, load.waiting_max, load.kv_cache_usage_max) == (5, 1, 0.5)
    assert load.prefix_cache_hit_rate == pytest.approx(0.4, abs=0.03)
    assert load.preemptions is not None and load.preemptions >= 3


def test_a_selector_narrows_the_servers(recorded_run: RecordedRun) -> None:
    calls = _llm_calls(
        _loaded(
            str(recorded_run.trace_file),
            "--prometheus",
            recorded_run.prometheus,
            "--prometheus-match",
            f'{{instance="{recorded_run.sglang_instance}"}}',
        )
    )
    # One server left: every call gets its load, whatever the model.
    assert {span.backend_load.source for span in calls if span.backend_load} == {recorded_run.sglang_instance}
    assert all(span.backend_load is not None for span in calls)


def _cli(*argv: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "otel_agent_profiler", *map(str, argv)], capture_output=True, text=True, timeout=120
    )


def test_the_command_line_reads_prometheus_and_says_when_it_has_nothing(
    recorded_run: RecordedRun, tmp_path: Path
) -> None:
    found = _cli("analyze", recorded_run.trace_file, "--prometheus", recorded_run.prometheus, "--format", "json")
    assert (found.returncode, found.stderr) == (0, ""), found.stderr
    assert len(json.loads(found.stdout)["traces"]) == 1
    html = tmp_path / "report.html"
    reported = _cli(
        "report", recorded_run.trace_file, "--html", html, "--summary-json", tmp_path / "summary.json",
        "--prometheus", recorded_run.prometheus,
    )  # fmt: skip
    assert reported.returncode == 0, reported.stderr
    assert html.exists() and "note:" not in reported.stderr
    nothing = _cli(
        "analyze", recorded_run.trace_file, "--prometheus", recorded_run.prometheus,
        "--prometheus-match", '{job="elsewhere"}',
    )  # fmt: skip
    assert nothing.returncode == 0
    (note,) = nothing.stderr.strip().splitlines()
    assert note.startswith("otel-agent-profiler: note: no inference-server metrics in Prometheus for "), note
    assert note.endswith('(vllm: or sglang: series{job="elsewhere"}); the LLM calls have no backend load')
    assert nothing.stdout


def test_a_query_prometheus_refuses_is_one_line_and_exit_code_2(recorded_run: RecordedRun) -> None:
    refused = _cli(
        "analyze", recorded_run.trace_file, "--prometheus", recorded_run.prometheus, "--prometheus-match", 'job=~"("'
    )
    assert refused.returncode == 2
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith(f"otel-agent-profiler: error: Prometheus at {recorded_run.prometheus}: the query failed "
                           "(bad_data: "), line  # fmt: skip

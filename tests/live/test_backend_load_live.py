"""The server's load beside each call, live: the plugin and ``serve`` polling the bundled vLLM-like server.

* The plugin, configured by ``OTEL_AGENT_PROFILER_BACKEND_METRICS`` alone, in the demo's agent run as a user
  runs theirs (``opentelemetry-instrument``, the real ``openai`` client), its spans exported by the real
  OTLP/HTTP exporter to a real receiver: the LLM spans carry ``agent_profiler.backend.*``, and ``analyze``
  reads the same loads back from an export of those spans.
* ``serve --backend-metrics``: the calls of a trace sent to it over OTLP/gRPC get the load in ``/profiles``,
  averaged per program in ``/programs``.
* A dead URL costs nothing but a warning: spans are profiled and exported, without a load.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from functools import partial
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from demo.fake_llm import FakeOpenAIServer
from demo.span_receiver import SpanReceiver
from demo.vllm_like import VllmLike
from otel_agent_profiler import AgentProfilerSpanProcessor
from otel_agent_profiler.adapters.otlp_json_out import otlp_json_document
from otel_agent_profiler.live import attributes as attr
from otel_agent_profiler.plugin import environment_variables as env
from tests.support.backends import (
    ROOT,
    BackendProcess,
    artifact_dir,
    free_port,
    free_ports,
    http_get,
    port_open,
    wait_until,
)
from tests.support.concurrent_calls import run_at_once

CHAT = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini", "gen_ai.system": "openai"}


def _instrument() -> str:
    return str(Path(sys.executable).with_name("opentelemetry-instrument"))


def _chat(base_url: str, content: str) -> None:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"{content} [[answer_tokens: 30]]"}]}
    request = urllib.request.Request(
        base_url + "/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        response.read()


@pytest.mark.e2e
def test_the_plugin_polls_the_server_and_its_exported_llm_spans_carry_the_load(tmp_path: Path) -> None:
    vllm = VllmLike(max_running=1)
    with SpanReceiver() as receiver, FakeOpenAIServer(time_scale=0.3, vllm_like=vllm) as server:
        metrics_url = f"http://127.0.0.1:{server.port}/metrics"
        environ = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENAI_"))}
        environ.update(
            PYTHONPATH=str(ROOT),
            OPENAI_BASE_URL=server.base_url,
            OPENAI_API_KEY="test",
            OTEL_SERVICE_NAME="backend-load-agent",
            OTEL_TRACES_EXPORTER="otlp",
            OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=receiver.endpoint + "/v1/traces",
            OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="http/protobuf",
            OTEL_METRICS_EXPORTER="none",
            OTEL_LOGS_EXPORTER="none",
            OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="httpx,httpx2",
            DEMO_TOOLS_SUMMARISE="1",  # the three parallel tools each ask the model: their calls queue
            OTEL_AGENT_PROFILER_BACKEND_METRICS=metrics_url,
            OTEL_AGENT_PROFILER_BACKEND_METRICS_INTERVAL="0.05",
        )
        command = [_instrument(), sys.executable, "-m", "demo.agent"]
        result = subprocess.run(command, cwd=ROOT, env=environ, capture_output=True, text=True, timeout=180)
        assert result.returncode == 0, result.stderr[-3000:]
        assert "cannot read backend metrics" not in result.stderr
        records = receiver.records
    llm = [r for r in records if r.attributes.get(attr.CATEGORY) == "llm" and r.name.startswith("openai.chat")]
    assert len(llm) == 9
    for record in llm:
        attributes = record.attributes
        assert attributes[attr.BACKEND_SOURCE] == metrics_url
        assert attributes[attr.BACKEND_SAMPLES] >= 1
        assert attributes[attr.BACKEND_RUNNING_MAX] <= 1  # one request runs at a time
        assert 0 <= attributes[attr.BACKEND_KV_CACHE_USAGE_MAX] <= 1
        # Counters move when a request finishes: a window in which none did has no hit rate.
        assert 0 <= attributes.get(attr.BACKEND_PREFIX_CACHE_HIT_RATE, 0) <= 1
        assert attributes.get(attr.BACKEND_PREEMPTIONS, 0) == 0
    # The tools' three summaries went out together to a server that runs one request at a time.
    assert max(r.attributes[attr.BACKEND_WAITING_MAX] for r in llm) >= 1
    assert any(attr.BACKEND_PREFIX_CACHE_HIT_RATE in r.attributes for r in llm)

    # Offline: the exported spans, analysed later, show the same loads.
    export = tmp_path / "export.otlp.json"
    export.write_text(json.dumps(otlp_json_document(records)), encoding="utf-8")
    analysed = subprocess.run(
        [sys.executable, "-m", "otel_agent_profiler", "analyze", "--format", "json", str(export)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert analysed.returncode == 0, analysed.stderr
    (trace,) = json.loads(analysed.stdout)["traces"]
    by_id = {r.span_id: r for r in llm}
    loaded = [s for s in trace["spans"] if s["backend_load"] is not None]
    assert {s["span_id"] for s in loaded} == set(by_id)
    for span in loaded:
        attributes = by_id[span["span_id"]].attributes
        assert span["backend_load"]["waiting_max"] == attributes[attr.BACKEND_WAITING_MAX]
        assert span["backend_load"]["running_mean"] == attributes[attr.BACKEND_RUNNING]
    assert trace["backend_load"]["calls"] == 9
    assert trace["backend_load"]["waiting_max"] >= 1


def test_the_processor_takes_the_metrics_url_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    exported = InMemorySpanExporter()
    with FakeOpenAIServer(time_scale=0.3, vllm_like=VllmLike(max_running=1)) as server:
        monkeypatch.setenv(env.OTEL_AGENT_PROFILER_BACKEND_METRICS, f"http://127.0.0.1:{server.port}/metrics")
        monkeypatch.setenv(env.OTEL_AGENT_PROFILER_BACKEND_METRICS_INTERVAL, "0.05")
        profiler = AgentProfilerSpanProcessor(downstream=[SimpleSpanProcessor(exported)])
        provider = TracerProvider(shutdown_on_exit=False)
        provider.add_span_processor(profiler)
        tracer = provider.get_tracer("test")
        _chat(server.base_url, "warm up")  # the server's series appear with its first request

        def call(i: int) -> None:
            with tracer.start_as_current_span(f"chat {i}", kind=SpanKind.CLIENT, attributes=CHAT):
                _chat(server.base_url, f"question {i}")

        with tracer.start_as_current_span("invoke_agent"):
            run_at_once([partial(call, i) for i in range(3)])
        provider.shutdown()
    assert profiler.backend_poller is not None and not profiler.backend_poller.running
    spans = {s.name: s for s in exported.get_finished_spans()}
    waiting = [spans[f"chat {i}"].attributes[attr.BACKEND_WAITING_MAX] for i in range(3)]
    assert max(waiting) >= 1
    assert attr.BACKEND_SOURCE not in spans["invoke_agent"].attributes


def test_a_dead_metrics_url_costs_the_load_only(never_raise: None, caplog: pytest.LogCaptureFixture) -> None:
    exported = InMemorySpanExporter()
    port = free_port()
    profiler = AgentProfilerSpanProcessor(
        downstream=[SimpleSpanProcessor(exported)],
        backend_metrics=[f"http://127.0.0.1:{port}/metrics"],
        backend_metrics_interval_s=0.02,
    )
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(profiler)
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("invoke_agent"):
        for i in range(3):
            with tracer.start_as_current_span(f"chat {i}", kind=SpanKind.CLIENT, attributes=CHAT):
                time.sleep(0.05)
    provider.shutdown()
    spans = {s.name: s for s in exported.get_finished_spans()}
    assert len(spans) == 4
    assert spans["chat 0"].attributes[attr.CATEGORY] == "llm"
    assert not any(key.startswith("agent_profiler.backend.") for s in spans.values() for key in s.attributes)
    poller = profiler.backend_poller
    assert poller is not None and poller.scrapes_failed >= 3 and not poller.running
    warnings = [r for r in caplog.records if "cannot read backend metrics" in r.getMessage()]
    assert len(warnings) == 1


def test_a_bad_url_in_the_environment_is_one_warning_and_profiling_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(env.OTEL_AGENT_PROFILER_BACKEND_METRICS, "vllm:8000/metrics")
    profiler = AgentProfilerSpanProcessor()
    try:
        assert profiler.backend_poller is None and profiler.config.backend_metrics == ()
        (warning,) = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert warning.startswith(f"ignoring {env.OTEL_AGENT_PROFILER_BACKEND_METRICS}: not an http(s) URL")
    finally:
        profiler.shutdown()


@pytest.mark.e2e
def test_serve_polls_the_server_and_profiles_show_the_load_of_each_call() -> None:
    vllm = VllmLike(max_running=1)
    with FakeOpenAIServer(time_scale=0.5, vllm_like=vllm) as server:
        http_port, grpc_port = free_ports(2)
        argv = [sys.executable, "-m", "otel_agent_profiler", "serve", "--http-port", str(http_port)]
        argv += ["--grpc-port", str(grpc_port), "--quiet-period", "0.5"]
        argv += ["--backend-metrics", f"http://127.0.0.1:{server.port}/metrics"]
        environ = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        log = artifact_dir("e2e", "test_backend_load_live", "serve") / "serve.log"
        process = BackendProcess("serve", argv, log, environ)
        process.start()
        try:
            wait_until(lambda: port_open(http_port) and port_open(grpc_port), 20, "serve to listen",
                       alive=process.check_alive, details=process.log_tail)  # fmt: skip
            _chat(server.base_url, "warm up")
            time.sleep(1.2)  # serve polls once a second: its history starts before the calls
            provider = TracerProvider(shutdown_on_exit=False)
            provider.add_span_processor(
                SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"127.0.0.1:{grpc_port}", insecure=True))
            )
            tracer = provider.get_tracer("app")

            def call(i: int) -> None:
                with tracer.start_as_current_span(f"chat {i}", kind=SpanKind.CLIENT, attributes=CHAT):
                    _chat(server.base_url, f"question {i} " + "long " * 400)

            with tracer.start_as_current_span("invoke_agent") as root:
                trace_id = f"{root.get_span_context().trace_id:032x}"
                run_at_once([partial(call, i) for i in range(4)])
            provider.shutdown()

            def profiled() -> dict | None:
                status, body = http_get(f"http://127.0.0.1:{http_port}/profiles/{trace_id}")
                return json.loads(body) if status == 200 else None

            document = wait_until(profiled, 20, "the trace to be profiled", details=process.log_tail)
            status, body = http_get(f"http://127.0.0.1:{http_port}/programs")
            assert status == 200
            programs = {p["program"]: p for p in json.loads(body)["programs"]}
        finally:
            process.stop()
    calls = [s for s in document["spans"] if s["name"].startswith("chat ")]
    assert len(calls) == 4 and all(s["backend_load"] is not None for s in calls)
    assert all(s["backend_load"]["source"] == argv[-1] for s in calls)
    assert max(s["backend_load"]["waiting_max"] for s in calls) >= 1
    assert document["backend_load"]["calls"] == 4
    # /programs averages the load per program: here one trace of it.
    load = programs["invoke_agent"]["backend_load"]
    assert load["traces"] == 1
    assert load["waiting_max"] == document["backend_load"]["waiting_max"]
    assert load["running_mean"] == pytest.approx(document["backend_load"]["running_mean"])


def test_serve_takes_backend_metrics_urls_and_refuses_a_bad_one(capsys: pytest.CaptureFixture[str]) -> None:
    from otel_agent_profiler import cli

    args = cli._build_parser().parse_args(
        ["serve", "--backend-metrics", "http://vllm:8000/metrics", "--backend-metrics", " https://sglang/metrics "]
    )
    assert args.backend_metrics == ["http://vllm:8000/metrics", "https://sglang/metrics"]
    assert cli._build_parser().parse_args(["serve"]).backend_metrics == []
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["serve", "--backend-metrics", "vllm:8000"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--backend-metrics: not an http(s) URL" in err
    with pytest.raises(SystemExit):
        cli.main(["serve", "--help"])
    assert "--backend-metrics URL" in capsys.readouterr().out

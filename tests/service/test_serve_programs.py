"""``GET /programs``: what ``serve`` profiled, averaged per agent program, read over HTTP.

Traces of known durations are recorded with the OpenTelemetry SDK (explicit start and end times)
and sent with its OTLP exporters, in process and to ``otel-agent-profiler serve`` run as a
subprocess; the averages ``/programs`` answers are checked against what was sent.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.trace import SpanKind, set_span_in_context

from otel_agent_profiler.core.genai import TokenUsage
from otel_agent_profiler.core.pricing import with_built_in_prices
from otel_agent_profiler.service.app import ProfilingService, ServeConfig
from otel_agent_profiler.service.pipeline import PipelineConfig
from tests.support.backends import BackendProcess, artifact_dir, free_ports, http_exchange, port_open, wait_until

TOKEN = "programs-T0ken"
AUTH = {"authorization": f"Bearer {TOKEN}"}
MS = 1_000_000


def send_agent_runs(exporter: SpanExporter, service: str, agent: str, runs: Sequence[tuple[int, int]]) -> None:
    """One trace per run: ``invoke_agent`` spanning an LLM call then a tool call, of ``(llm_ms, tool_ms)``."""
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("programs-test")
    start = time.time_ns() - 60_000 * MS
    for llm_ms, tool_ms in runs:
        attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent}
        root = tracer.start_span(f"invoke_agent {agent}", start_time=start, attributes=attributes)
        context = set_span_in_context(root)
        chat = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.usage.input_tokens": 1000,
            "gen_ai.usage.output_tokens": llm_ms,
        }
        llm = tracer.start_span("chat gpt-4o-mini", context, SpanKind.CLIENT, chat, start_time=start)
        llm.end(end_time=start + llm_ms * MS)
        tool_attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}
        tool = tracer.start_span(
            "execute_tool search", context, attributes=tool_attributes, start_time=start + llm_ms * MS
        )
        tool.end(end_time=start + (llm_ms + tool_ms) * MS)
        root.end(end_time=start + (llm_ms + tool_ms) * MS)
        start += 10_000 * MS
    provider.shutdown()


def _get(url: str, headers: dict[str, str] | None = None, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    return http_exchange(urllib.request.Request(url, headers=headers or {}, method=method))


def _traces_profiled(base: str) -> int:
    status, _, body = _get(f"{base}/health")
    assert status == 200
    return json.loads(body)["counts"]["traces_profiled"]  # type: ignore[no-any-return]


def _programs(base: str, query: str = "") -> dict[str, Any]:
    status, headers, body = _get(f"{base}/programs{query}", AUTH)
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    return json.loads(body)  # type: ignore[no-any-return]


def _check_runs(
    program: dict[str, Any], service: str, agent: str, runs: Sequence[tuple[int, int]], *, priced: bool = False
) -> None:
    """The averages of ``program`` are those of ``runs`` (see ``send_agent_runs``)."""
    count = len(runs)
    durations = sorted(llm + tool for llm, tool in runs)
    assert (program["service"], program["program"], program["traces"]) == (service, agent, count)
    assert program["error_traces"] == 0
    # The SDK keeps nanoseconds: the times set are the times profiled.
    assert program["duration_ms"]["mean"] == pytest.approx(sum(durations) / count, abs=1e-6)
    assert program["critical_path_ms"] == pytest.approx(sum(durations) / count, abs=1e-6)
    assert program["categories"]["llm"]["critical_path_ms"] == pytest.approx(sum(llm for llm, _ in runs) / count)
    assert program["categories"]["tool"]["critical_path_ms"] == pytest.approx(sum(tool for _, tool in runs) / count)
    assert program["llm_calls"] == 1.0
    assert program["tokens"]["input"] == 1000.0
    assert program["tokens"]["output"] == pytest.approx(sum(llm for llm, _ in runs) / count)
    assert program["critical_path_llm_phases_ms"] is None
    if not priced:  # a pipeline made in code has the prices it is given: none here
        assert program["cost_usd"] is None
        return
    # The serve command prices with the built-in table by default: the mean cost of the runs' gpt-4o-mini call.
    price = with_built_in_prices(None).price_of("gpt-4o-mini")
    assert price is not None
    costs = [price.cost_usd(TokenUsage(input=1000, output=llm)) for llm, _ in runs]
    assert program["cost_usd"] == pytest.approx(sum(costs) / count)


PLANNER_RUNS = [(600, 300), (200, 100), (400, 200)]
CODER_RUNS = [(1500, 500), (700, 300)]


@pytest.fixture
def token_service() -> Iterator[ProfilingService]:
    config = ServeConfig(http_port=0, grpc_port=0, pipeline=PipelineConfig(quiet_period_s=0.1), bearer_token=TOKEN)
    with ProfilingService(config) as service:
        yield service


def test_programs_over_http_in_process(token_service: ProfilingService) -> None:
    base = f"http://127.0.0.1:{token_service.http_port}"
    started = time.time()
    # Like /profiles, /programs shows names and timings: not without the token.
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        status, answer_headers, body = _get(f"{base}/programs", headers)
        assert status == 401 and answer_headers["WWW-Authenticate"].startswith("Bearer")
        assert json.loads(body)["code"] == 401
    assert _programs(base) == {"programs": [], "other_programs": 0, "since": pytest.approx(started, abs=60)}

    send_agent_runs(
        HttpSpanExporter(f"{base}/v1/traces", headers=AUTH, timeout=10), "planning", "planner", PLANNER_RUNS
    )
    grpc = GrpcSpanExporter(f"127.0.0.1:{token_service.grpc_port}", insecure=True, headers=AUTH, timeout=10)
    send_agent_runs(grpc, "coding", "coder", CODER_RUNS)
    wait_until(lambda: _traces_profiled(base) == 5, 10, "five traces profiled")

    document = _programs(base)
    assert document["other_programs"] == 0
    planner, coder = document["programs"]  # most traces first
    _check_runs(planner, "planning", "planner", PLANNER_RUNS)
    _check_runs(coder, "coding", "coder", CODER_RUNS)
    # Durations 900, 300, 600 ms and 2000, 1000 ms.
    assert planner["duration_ms"]["p50"] == pytest.approx(600.0)
    assert coder["duration_ms"]["p90"] == pytest.approx(1900.0)

    only_coding = _programs(base, "?service=coding")
    assert [program["program"] for program in only_coding["programs"]] == ["coder"]
    assert _programs(base, "?service=elsewhere")["programs"] == []
    assert _get(f"{base}/programs/", AUTH)[0] == 200
    assert _get(f"{base}/programs", AUTH, method="HEAD")[0] == 200


@pytest.mark.e2e
def test_serve_answers_programs_averaged_per_agent(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """The real ``serve`` (a subprocess, token from a file) averages what two agents sent over OTLP/HTTP."""
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    http_port, grpc_port = free_ports(2)
    argv = [sys.executable, "-m", "otel_agent_profiler", "serve", "--http-port", str(http_port)]
    argv += ["--grpc-port", str(grpc_port), "--quiet-period", "0.5", "--bearer-token-file", str(token_file)]
    log = artifact_dir("e2e", request.node.nodeid) / "serve.log"
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    serve = BackendProcess("serve", argv, log, env)
    serve.start()
    try:
        wait_until(
            lambda: port_open(http_port) and port_open(grpc_port),
            20,
            "serve to listen",
            alive=serve.check_alive,
            details=serve.log_tail,
        )
        base = f"http://127.0.0.1:{http_port}"
        assert _get(f"{base}/programs")[0] == 401
        exporter = HttpSpanExporter(f"{base}/v1/traces", headers=AUTH, timeout=10)
        send_agent_runs(exporter, "agents", "planner", PLANNER_RUNS)
        send_agent_runs(HttpSpanExporter(f"{base}/v1/traces", headers=AUTH, timeout=10), "agents", "coder", CODER_RUNS)
        wait_until(lambda: _traces_profiled(base) == 5, 20, "five traces profiled", alive=serve.check_alive)
        document = _programs(base)
        assert document["other_programs"] == 0 and document["since"] <= time.time()
        planner, coder = document["programs"]
        _check_runs(planner, "agents", "planner", PLANNER_RUNS, priced=True)
        _check_runs(coder, "agents", "coder", CODER_RUNS, priced=True)
        assert _programs(base, "?service=agents") == document
    finally:
        serve.stop()
    assert TOKEN not in log.read_text()

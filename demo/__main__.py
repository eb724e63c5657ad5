"""``python -m demo``: the demo agent, profiled end to end, with its report.

Starts the local OpenAI-compatible server, then runs the demo agent exactly as a user would
run theirs: ``opentelemetry-instrument python -m demo.agent``, with the
real ``openai`` client and opentelemetry-instrumentation-openai, and the profiler's console
report turned on. With ``OTEL_EXPORTER_OTLP_ENDPOINT`` set, spans and metrics are also
exported there; without it, nothing is exported and no collector is needed.

With ``--server-spans`` the local server behaves like vLLM (``demo.vllm_like``): it runs at most
``--max-running`` chat requests at once, so calls made together queue, and it exports an
``llm_request`` SERVER span per request that continues the agent's trace (the agent's HTTP client
is instrumented, so each request carries ``traceparent``). The fanned-out tools each ask the model
to summarise what they found. The agent's spans and the server's go to a receiver in this
process, and the report printed at the end splits every LLM call into queue, prefill, decode
and other. The agent's profiler polls the server's ``/metrics``
(``OTEL_AGENT_PROFILER_BACKEND_METRICS``), so each call also carries the load the server showed
while it ran, and the report says what the calls met.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from .fake_llm import FakeOpenAIServer

# The HTTP client instrumentations (opentelemetry-instrumentation-httpx registers both). They
# propagate traceparent to the server; without server spans they would only add a span per request.
_HTTP_CLIENT_INSTRUMENTATIONS = ("httpx", "httpx2")


def _instrument_command() -> list[str]:
    # The opentelemetry-instrument script installed next to this interpreter, else on PATH.
    beside = Path(sys.executable).with_name("opentelemetry-instrument")
    found = str(beside) if beside.exists() else shutil.which("opentelemetry-instrument")
    if found is None:
        raise SystemExit("opentelemetry-instrument not found: install opentelemetry-instrumentation")
    return [found]


def _time_scale(text: str) -> float:
    """A finite factor of at least 0, else the one-line usage error argparse prints (no traceback)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m demo",
        allow_abbrev=False,
        description=(
            "Run the bundled research agent under opentelemetry-instrument against a local "
            "OpenAI-compatible server and print the profiler's report. Set "
            "OTEL_EXPORTER_OTLP_ENDPOINT to also export spans and metrics over OTLP."
        ),
    )
    parser.add_argument(
        "--time-scale",
        type=_time_scale,
        default=1.0,
        help="multiply the fake LLM's latencies (default: %(default)s; 0.1 runs ten times faster)",
    )
    parser.add_argument(
        "--server-spans",
        action="store_true",
        help=(
            "make the local server behave like vLLM (requests queue; it exports llm_request server spans "
            "continuing the agent's trace; the agent's profiler polls its /metrics) and report each LLM call's "
            "queue, prefill, decode and other time, and the load the server showed"
        ),
    )
    parser.add_argument(
        "--max-running",
        type=int,
        default=1,
        metavar="N",
        help="with --server-spans: chat requests the server runs at once; the rest queue (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    if args.max_running < 1:
        parser.error("--max-running must be at least 1")
    if args.server_spans:
        return _run_with_server_spans(args.time_scale, args.max_running)

    env = dict(os.environ)
    # The demo lives in the repository, not in the installed package: its agent is found from here.
    repository = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [repository, env.get("PYTHONPATH")]))
    env.setdefault("OTEL_SERVICE_NAME", "research-agent-demo")
    env.setdefault("OTEL_AGENT_PROFILER_CONSOLE_REPORT", "true")
    exporting = bool(env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
    if not exporting:
        for variable in ("OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_LOGS_EXPORTER"):
            env.setdefault(variable, "none")
    _disable_http_client_spans(env)

    with FakeOpenAIServer(time_scale=args.time_scale) as server:
        env["OPENAI_BASE_URL"] = server.base_url
        env.setdefault("OPENAI_API_KEY", "demo")
        where = env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        print(f"fake OpenAI server at {server.base_url}", file=sys.stderr)
        print(
            f"exporting spans and metrics over OTLP to {where}"
            if exporting
            else "not exporting (set OTEL_EXPORTER_OTLP_ENDPOINT to send spans and metrics to a collector)",
            file=sys.stderr,
        )
        command = [*_instrument_command(), sys.executable, "-m", "demo.agent"]
        print("running: opentelemetry-instrument python -m demo.agent\n", file=sys.stderr)
        sys.stderr.flush()
        return subprocess.run(command, env=env, check=False).returncode


def _disable_http_client_spans(env: dict[str, str]) -> None:
    disabled = [name for name in env.get("OTEL_PYTHON_DISABLED_INSTRUMENTATIONS", "").split(",") if name.strip()]
    disabled += [name for name in _HTTP_CLIENT_INSTRUMENTATIONS if name not in disabled]
    env["OTEL_PYTHON_DISABLED_INSTRUMENTATIONS"] = ",".join(disabled)


def _run_with_server_spans(time_scale: float, max_running: int) -> int:
    from otel_agent_profiler import profile_records
    from otel_agent_profiler.report.console import write_console_report

    from .span_receiver import SpanReceiver
    from .vllm_like import VllmLike

    env = dict(os.environ)
    repository = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [repository, env.get("PYTHONPATH")]))
    env.setdefault("OTEL_SERVICE_NAME", "research-agent-demo")
    env["DEMO_TOOLS_SUMMARISE"] = "1"
    # The report comes from the receiver, which also has the server's spans.
    env["OTEL_AGENT_PROFILER_CONSOLE_REPORT"] = "false"
    with SpanReceiver() as receiver:
        env["OTEL_TRACES_EXPORTER"] = "otlp"
        env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = receiver.endpoint + "/v1/traces"
        env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] = "http/protobuf"
        for variable in ("OTEL_METRICS_EXPORTER", "OTEL_LOGS_EXPORTER"):
            env[variable] = "none"
        vllm = VllmLike(
            max_running=max_running,
            otlp_endpoint=receiver.endpoint,
            otlp_protocol="http/protobuf",
            service_name="vllm-like-demo-server",
        )
        try:
            with FakeOpenAIServer(time_scale=time_scale, vllm_like=vllm) as server:
                env["OPENAI_BASE_URL"] = server.base_url
                env.setdefault("OPENAI_API_KEY", "demo")
                metrics_url = f"http://127.0.0.1:{server.port}/metrics"
                # The agent's profiler polls the server's metrics: each call gets the load it met.
                env["OTEL_AGENT_PROFILER_BACKEND_METRICS"] = metrics_url
                # Ten times a second: the demo's calls last a fraction of a second each.
                env.setdefault("OTEL_AGENT_PROFILER_BACKEND_METRICS_INTERVAL", "0.1")
                print(
                    f"vLLM-like server at {server.base_url} ({max_running} running at once; "
                    f"metrics at {metrics_url}, polled by the agent's profiler)",
                    file=sys.stderr,
                )
                print(f"agent and server spans go to {receiver.endpoint}/v1/traces", file=sys.stderr)
                command = [*_instrument_command(), sys.executable, "-m", "demo.agent"]
                print("running: opentelemetry-instrument python -m demo.agent\n", file=sys.stderr)
                sys.stderr.flush()
                returncode = subprocess.run(command, env=env, check=False).returncode
        finally:
            vllm.shutdown()
        profiles = profile_records(receiver.records)
    write_console_report(sys.stderr, profiles, len(profiles))
    return returncode


if __name__ == "__main__":
    sys.exit(main())

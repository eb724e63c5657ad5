"""``python -m demo``: the demo agent, profiled end to end, with its report.

Starts the local OpenAI-compatible server, then runs the demo agent exactly as a user would
run theirs: ``opentelemetry-instrument python -m demo.agent``, with the
real ``openai`` client and opentelemetry-instrumentation-openai, and the profiler's console
report turned on. With ``OTEL_EXPORTER_OTLP_ENDPOINT`` set, spans and metrics are also
exported there; without it, nothing is exported and no collector is needed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from .fake_llm import FakeOpenAIServer


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
    args = parser.parse_args(argv)

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


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: wall-clock overhead of the profiler on the demo agent, with realistic latencies.

Runs the bundled demo agent under ``opentelemetry-instrument`` against the local fake LLM
server, alternately with the profiler enabled and disabled (``OTEL_AGENT_PROFILER_ENABLED``),
everything else equal (OpenAI instrumentation on, exporters off). The figure is the agent's
own run time (inside ``asyncio.run``), median over the runs, as a ratio.

    python benchmarks/bench_demo_overhead.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

# The demo lives in the repository, beside the installed package.
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from demo.fake_llm import FakeOpenAIServer  # noqa: E402

GOAL = 0.005


def _run_agent(base_url: str, enabled: bool) -> float:
    env = dict(
        os.environ,
        OPENAI_BASE_URL=base_url,
        OPENAI_API_KEY="demo",
        OTEL_TRACES_EXPORTER="none",
        OTEL_METRICS_EXPORTER="none",
        OTEL_LOGS_EXPORTER="none",
        OTEL_AGENT_PROFILER_ENABLED="true" if enabled else "false",
        # As `python -m demo` runs it: without the HTTP client spans (only its --server-spans mode has them).
        OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="httpx,httpx2",
    )
    command = [str(Path(sys.executable).with_name("opentelemetry-instrument")), sys.executable]
    command += ["-m", "demo.agent"]
    result = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300, check=True)
    match = re.search(r"answer \(([\d.]+) s\)", result.stdout)
    if match is None:
        raise SystemExit(f"unexpected demo output: {result.stdout!r} {result.stderr[-2000:]!r}")
    return float(match.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each (default: %(default)s)")
    args = parser.parse_args()
    with FakeOpenAIServer() as server:
        _run_agent(server.base_url, True)  # warm-up: imports, the server's prefix cache
        off: list[float] = []
        on: list[float] = []
        for _ in range(args.runs):
            off.append(_run_agent(server.base_url, False))
            on.append(_run_agent(server.base_url, True))
    base, profiled = statistics.median(off), statistics.median(on)
    print(f"demo agent run time, median of {args.runs}: without profiler {base:.3f} s, with {profiled:.3f} s")
    print(f"  wall-clock overhead {profiled / base - 1:+.2%} (goal < {GOAL:.1%})")
    print(f"  spread: without {min(off):.3f}-{max(off):.3f} s, with {min(on):.3f}-{max(on):.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

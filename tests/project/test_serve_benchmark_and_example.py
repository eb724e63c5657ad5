"""The serve benchmark (benchmarks/bench_serve.py) and the two-services example run and print what they claim."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.support.paths import ROOT

pytestmark = pytest.mark.e2e


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "ROTEL_"))}


def _run(argv: list[str], timeout: float) -> str:
    result = subprocess.run(argv, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def test_serve_benchmark_quick_prints_both_rates_the_ratio_and_bytes_per_span() -> None:
    out = _run([sys.executable, str(ROOT / "benchmarks" / "bench_serve.py"), "--quick"], timeout=300)
    spans = re.search(r"^load: ([\d,]+) spans in ([\d,]+) agent traces", out, re.M)
    assert spans is not None and _number(spans.group(1)) >= 5000, out
    rotel = re.search(r"^rotel \(blackhole\)\s+([\d,]+) spans/s", out, re.M)
    ingest = re.search(r"^serve ingest \(acknowledged\)\s+([\d,]+) spans/s", out, re.M)
    end_to_end = re.search(r"^serve end to end \(profiled and forwarded\) ([\d,]+) spans/s", out, re.M)
    assert rotel and ingest and end_to_end, out
    assert all(_number(m.group(1)) > 0 for m in (rotel, ingest, end_to_end)), out
    assert f"{_number(spans.group(2)):,.0f} traces profiled" in out, out
    ratio = re.search(
        r"^ratio serve/rotel: ingest (\d+\.\d\d), end to end (\d+\.\d\d) \(goal >= 0\.50: (NOT )?met\)", out, re.M
    )
    assert ratio is not None, out
    assert float(ratio.group(1)) == pytest.approx(_number(ingest.group(1)) / _number(rotel.group(1)), abs=0.01)
    assert re.search(r"^rounds, serve ingest: min [\d,]+, median [\d,]+, max [\d,]+ spans/s; spread \d+%", out, re.M), (
        out
    )
    assert re.search(r"^serve ingest spread: \d+% \(goal <= 15%: (NOT )?met\)", out, re.M), out
    burst = re.search(
        r"^50 connections at once, 500 small requests over HTTP, as many over gRPC: (.*) \((\d+) not", out, re.M
    )
    assert burst is not None and burst.group(2) == "0", out  # no reset, refusal or error status
    memory = re.search(r"^memory per in-flight span: ([\d,]+) bytes \(([\d,]+) spans held", out, re.M)
    assert memory is not None and _number(memory.group(2)) >= 5000, out
    # Each held span is a decoded protobuf span plus its record: more than its wire size, far less than 1 MB.
    assert 100 < _number(memory.group(1)) < 1_000_000, out


def test_two_services_example_profiles_one_trace_across_both_services() -> None:
    out = _run([sys.executable, str(ROOT / "examples" / "two_services" / "run.py")], timeout=120)
    assert "Order A-1001 is shipped with DHL, arriving in 2 days." in out, out
    trace_id = re.search(r"^agent: trace ([0-9a-f]{32})$", out, re.M).group(1)  # type: ignore[union-attr]
    assert "GET /profiles: 1 trace(s), 7 spans" in out, out
    assert re.search(rf"^trace {trace_id}: 7 spans, ", out, re.M), out

    rows = re.findall(
        r"^  ( *)(\S.*?)\s+(support-agent|tool-service)\s+(\w+)\s+[\d.]+ ms\s+([\d.]+) ms( \*)?\s+"
        r"\[([0-9a-f]{16}) <- ([0-9a-f]{16}|root)\]$",
        out,
        re.M,
    )
    spans = {
        span_id: {"depth": len(indent) // 2, "name": name, "service": service, "kind": kind, "parent": parent}
        for indent, name, service, kind, _, _, span_id, parent in rows
    }
    assert len(spans) == 7, out
    assert {s["service"] for s in spans.values()} == {"support-agent", "tool-service"}, out
    roots = [s for s in spans.values() if s["parent"] == "root"]
    assert [r["name"] for r in roots] == ["invoke_agent support"], out

    server_id, server = next(
        (i, s) for i, s in spans.items() if s["service"] == "tool-service" and s["kind"] == "SERVER"
    )
    client = spans[server["parent"]]
    assert client["service"] == "support-agent" and client["kind"] == "CLIENT", out
    assert client["name"] == server["name"] == "POST /lookup"
    assert spans[client["parent"]]["name"] == "execute_tool lookup_order", out
    database = next(s for s in spans.values() if s["name"] == "SELECT orders")
    assert database["service"] == "tool-service" and database["parent"] == server_id, out
    assert re.search(rf"tool service's span 'POST /lookup' \({server_id}\) is a child of the agent's CLIENT span", out)

    shares = dict(re.findall(r"^  (support-agent|tool-service)\s+[\d.]+ ms\s+([\d.]+)%$", out, re.M))
    assert set(shares) == {"support-agent", "tool-service"}, out
    assert float(shares["support-agent"]) + float(shares["tool-service"]) == pytest.approx(100, abs=0.3)
    # The database query (120 ms) is most of the tool service's time, all of it on the critical path.
    assert float(shares["tool-service"]) > 30, out

"""The ``otel-agent-profiler analyze`` command line.

Most tests run the real console script in a subprocess (``@pytest.mark.e2e``); the quick
ones call ``main([...])`` in-process.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import agent_traces
from otel_agent_profiler.cli import main
from tests.support.paths import ROOT

EXAMPLE = ROOT / "examples" / "traces" / "research-agent.otlp.json"

CATEGORIES = ("llm", "embedding", "tool", "agent", "retrieval", "memory", "internal")

TRACE64 = "d269b633813fc60c"
TRACE = "0000000000000000" + TRACE64
BASE_NS = 1_760_000_000_000_000_000  # a multiple of 1000, so it is exact in Jaeger's microseconds
MS = 1_000_000

# The small agent trace every format test uses:
#
#   agent                 [0, 100]   invoke_agent
#   ├── chat gpt-4o       [10, 50]   llm (CLIENT)
#   ├── lookup            [20, 30]   retrieval, hidden behind the LLM call: off the critical path
#   └── execute_tool ...  [50, 90]   tool
#       └── GET /search   [60, 80]   internal
SPANS: list[dict[str, Any]] = [
    {
        "id": "00000000000000a1",
        "parent": None,
        "name": "agent",
        "start": 0,
        "end": 100,
        "kind": "internal",
        "attrs": {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "researcher"},
    },
    {
        "id": "00000000000000b2",
        "parent": "00000000000000a1",
        "name": "chat gpt-4o",
        "start": 10,
        "end": 50,
        "kind": "client",
        "attrs": {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"},
    },
    {
        "id": "00000000000000c3",
        "parent": "00000000000000a1",
        "name": "lookup",
        "start": 20,
        "end": 30,
        "kind": "internal",
        "attrs": {"gen_ai.operation.name": "retrieval"},
    },
    {
        "id": "00000000000000d4",
        "parent": "00000000000000a1",
        "name": "execute_tool search",
        "start": 50,
        "end": 90,
        "kind": "internal",
        "attrs": {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"},
    },
    {
        "id": "00000000000000e5",
        "parent": "00000000000000d4",
        "name": "GET /search",
        "start": 60,
        "end": 80,
        "kind": "client",
        "attrs": {"http.request.method": "GET"},
    },
]

# name: (category, duration, self time, critical path, on the critical path), in ms.
EXPECTED_SPANS = {
    "agent": ("agent", 100.0, 20.0, 20.0, True),
    "chat gpt-4o": ("llm", 40.0, 40.0, 40.0, True),
    "lookup": ("retrieval", 10.0, 10.0, 0.0, False),
    "execute_tool search": ("tool", 40.0, 20.0, 20.0, True),
    "GET /search": ("internal", 20.0, 20.0, 20.0, True),
}
# category: (count, self time, critical path), in ms.
EXPECTED_CATEGORIES = {
    "llm": (1, 40.0, 40.0),
    "embedding": (0, 0.0, 0.0),
    "tool": (1, 20.0, 20.0),
    "agent": (1, 20.0, 20.0),
    "retrieval": (1, 10.0, 0.0),
    "memory": (0, 0.0, 0.0),
    "internal": (1, 20.0, 20.0),
}

_OTLP_KINDS = {"internal": 1, "server": 2, "client": 3, "producer": 4, "consumer": 5}


# --------------------------------------------------------------------------- file builders


def _otlp_span(spec: dict[str, Any], trace_id: str = TRACE) -> dict[str, Any]:
    span = {
        "traceId": trace_id,
        "spanId": spec["id"],
        "name": spec["name"],
        "kind": _OTLP_KINDS[spec["kind"]],
        "startTimeUnixNano": str(BASE_NS + spec["start"] * MS),
        "endTimeUnixNano": str(BASE_NS + spec["end"] * MS) if spec["end"] is not None else "0",
        "attributes": [{"key": k, "value": _any_value(v)} for k, v in spec["attrs"].items()],
        "status": {},
    }
    if spec["parent"]:
        span["parentSpanId"] = spec["parent"]
    return span


def _any_value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    return {"stringValue": str(value)}


def otlp_document(specs: list[dict[str, Any]], trace_id: str = TRACE) -> dict[str, Any]:
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "research-agent"}}]},
                "scopeSpans": [{"scope": {"name": "test"}, "spans": [_otlp_span(s, trace_id) for s in specs]}],
            }
        ]
    }


def otlp_json_lines(specs: list[dict[str, Any]]) -> str:
    # One span per line, in reverse order: a parent may come after its children.
    return "".join(json.dumps(otlp_document([spec])) + "\n" for spec in reversed(specs))


def jaeger_document(specs: list[dict[str, Any]]) -> dict[str, Any]:
    spans = []
    for spec in specs:
        tags = [{"key": k, "type": "string", "value": v} for k, v in spec["attrs"].items()]
        tags.append({"key": "span.kind", "type": "string", "value": spec["kind"]})
        start_us = (BASE_NS + spec["start"] * MS) // 1000
        spans.append(
            {
                "traceID": TRACE64,
                "spanID": spec["id"],
                "operationName": spec["name"],
                "references": (
                    [{"refType": "CHILD_OF", "traceID": TRACE64, "spanID": spec["parent"]}] if spec["parent"] else []
                ),
                "startTime": start_us,
                "duration": (spec["end"] - spec["start"]) * MS // 1000,
                "tags": tags,
                "logs": [],
                "processID": "p1",
                "warnings": None,
            }
        )
    return {
        "data": [
            {
                "traceID": TRACE64,
                "spans": spans,
                "processes": {"p1": {"serviceName": "research-agent", "tags": []}},
                "warnings": None,
            }
        ]
    }


@pytest.fixture
def otlp_file(tmp_path: Path) -> Path:
    path = tmp_path / "agent.otlp.json"
    path.write_text(json.dumps(otlp_document(SPANS), indent=2), encoding="utf-8")
    return path


@pytest.fixture
def jsonl_file(tmp_path: Path) -> Path:
    path = tmp_path / "agent.jsonl"
    path.write_text(otlp_json_lines(SPANS), encoding="utf-8")
    return path


@pytest.fixture
def jaeger_file(tmp_path: Path) -> Path:
    path = tmp_path / "agent.jaeger.json"
    path.write_text(json.dumps(jaeger_document(SPANS)), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- running the CLI


def _console_script() -> list[str]:
    script = Path(sys.executable).parent / ("otel-agent-profiler.exe" if os.name == "nt" else "otel-agent-profiler")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "otel_agent_profiler"]


CLI = _console_script()
MODULE = [sys.executable, "-m", "otel_agent_profiler"]


def run_cli(
    *args: str | Path,
    stdin: bytes | None = None,
    encoding: str = "utf-8",
    command: list[str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONIOENCODING"] = encoding
    env.pop("PYTHONWARNINGS", None)
    result = subprocess.run(
        [*(command or CLI), *map(str, args)],
        input=stdin if stdin is not None else b"",
        capture_output=True,
        env=env,
        cwd=cwd,
        timeout=120,
    )
    return subprocess.CompletedProcess(
        result.args,
        result.returncode,
        result.stdout.decode("utf-8", errors="replace"),
        result.stderr.decode("utf-8", errors="replace"),
    )


def stderr_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.strip()]


def profile_numbers(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The numbers of a JSON report that must not depend on the input format."""
    traces = []
    for trace in document["traces"]:
        traces.append(
            {
                "trace_id": trace["trace_id"],
                "duration_ms": trace["duration_ms"],
                "critical_path_ms": trace["critical_path_ms"],
                "categories": {
                    name: (stats["count"], stats["self_time_ms"], stats["critical_path_ms"])
                    for name, stats in trace["categories"].items()
                },
                "spans": sorted(
                    (
                        span["span_id"],
                        span["parent_span_id"],
                        span["name"],
                        span["category"],
                        span["duration_ms"],
                        span["self_time_ms"],
                        span["critical_path_ms"],
                        span["on_critical_path"],
                    )
                    for span in trace["spans"]
                ),
            }
        )
    return traces


def assert_small_trace_profile(document: dict[str, Any]) -> None:
    assert isinstance(document["traces"], list)
    [trace] = document["traces"]
    assert trace["trace_id"] == TRACE
    assert trace["duration_ms"] == pytest.approx(100.0)
    assert trace["critical_path_ms"] == pytest.approx(100.0)

    assert set(trace["categories"]) == set(CATEGORIES)
    for name, (count, self_ms, path_ms) in EXPECTED_CATEGORIES.items():
        stats = trace["categories"][name]
        assert stats["count"] == count, name
        assert stats["self_time_ms"] == pytest.approx(self_ms), name
        assert stats["critical_path_ms"] == pytest.approx(path_ms), name

    spans = {span["name"]: span for span in trace["spans"]}
    assert set(spans) == set(EXPECTED_SPANS)
    by_name = {spec["name"]: spec for spec in SPANS}
    for name, (category, duration, self_ms, path_ms, on_path) in EXPECTED_SPANS.items():
        span = spans[name]
        assert span["span_id"] == by_name[name]["id"]
        assert span["parent_span_id"] == by_name[name]["parent"]
        assert span["category"] == category, name
        assert span["duration_ms"] == pytest.approx(duration), name
        assert span["self_time_ms"] == pytest.approx(self_ms), name
        assert span["critical_path_ms"] == pytest.approx(path_ms), name
        assert span["on_critical_path"] is on_path, name
    # The critical-path sections add up to the trace's critical path.
    assert sum(span["critical_path_ms"] for span in trace["spans"]) == pytest.approx(trace["critical_path_ms"])


# --------------------------------------------------------------------------- JSON report


@pytest.mark.e2e
def test_json_report_shape_and_values(otlp_file: Path) -> None:
    result = run_cli("analyze", otlp_file, "--format", "json")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert_small_trace_profile(json.loads(result.stdout))


@pytest.mark.e2e
@pytest.mark.parametrize("fixture", ["otlp_file", "jsonl_file", "jaeger_file"])
def test_every_input_format_gives_the_expected_profile(fixture: str, request: pytest.FixtureRequest) -> None:
    path = request.getfixturevalue(fixture)
    result = run_cli("analyze", "--format", "json", path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert_small_trace_profile(json.loads(result.stdout))


@pytest.mark.e2e
def test_the_same_spans_in_three_formats_give_the_same_profile(
    otlp_file: Path, jsonl_file: Path, jaeger_file: Path
) -> None:
    json_reports = []
    text_reports = []
    for path in (otlp_file, jsonl_file, jaeger_file):
        result = run_cli("analyze", "--format", "json", path)
        assert result.returncode == 0, (path, result.stderr)
        json_reports.append(profile_numbers(json.loads(result.stdout)))
        result = run_cli("analyze", path)
        assert result.returncode == 0, (path, result.stderr)
        text_reports.append(result.stdout)
    assert json_reports[0] == json_reports[1] == json_reports[2]
    assert text_reports[0] == text_reports[1] == text_reports[2]


@pytest.mark.e2e
def test_output_option_writes_the_file_and_prints_nothing(otlp_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    result = run_cli("analyze", otlp_file, "--format", "json", "--output", out)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert result.stderr == ""
    assert_small_trace_profile(json.loads(out.read_text(encoding="utf-8")))

    text_out = tmp_path / "report.txt"
    result = run_cli("analyze", otlp_file, "-o", text_out)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert "agent" in text_out.read_text(encoding="utf-8")


@pytest.mark.e2e
def test_dash_reads_standard_input(otlp_file: Path, jaeger_file: Path) -> None:
    for path in (otlp_file, jaeger_file):
        result = run_cli("analyze", "--format", "json", "-", stdin=path.read_bytes())
        assert result.returncode == 0, result.stderr
        assert_small_trace_profile(json.loads(result.stdout))
    result = run_cli("analyze", "-", stdin=otlp_json_lines(SPANS).encode())
    assert result.returncode == 0, result.stderr
    assert "chat gpt-4o" in result.stdout


@pytest.mark.e2e
def test_dash_with_bad_standard_input_is_reported(otlp_file: Path) -> None:
    result = run_cli("analyze", "--format", "json", otlp_file, "-", stdin=b"")
    assert result.returncode == 2
    assert len(stderr_lines(result)) == 1
    assert_small_trace_profile({"traces": json.loads(result.stdout)["traces"]})


@pytest.mark.e2e
def test_module_entry_point_works_too(otlp_file: Path) -> None:
    result = run_cli("analyze", "--format", "json", otlp_file, command=MODULE)
    assert result.returncode == 0, result.stderr
    assert_small_trace_profile(json.loads(result.stdout))


@pytest.mark.e2e
@pytest.mark.parametrize("command", [CLI, MODULE], ids=["console-script", "module"])
def test_the_program_writes_all_its_output_before_it_ends(command: list[str], tmp_path: Path) -> None:
    """The offline commands end the process without freeing what they hold (``console_main``):
    everything written to a pipe must be there, and a reader that goes away gets no traceback."""
    runs = [span for run in agent_traces.generate_runs(40, seed=3) for span in run]
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(agent_traces.otlp_document(runs)), encoding="utf-8")
    piped = run_cli("analyze", "--format", "json", path, command=command)
    assert piped.returncode == 0, piped.stderr
    written = run_cli("analyze", "--format", "json", path, "-o", tmp_path / "out.json", command=command)
    assert written.returncode == 0, written.stderr
    assert piped.stdout == (tmp_path / "out.json").read_text(encoding="utf-8")
    assert len(piped.stdout) > 100_000
    # A reader that stops early (| head): quietly, exit code 1 (the report was not all written).
    with subprocess.Popen([*command, "analyze", "--format", "json", str(path)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE) as process:  # fmt: skip
        assert process.stdout is not None and process.stderr is not None
        assert process.stdout.read(10) == b'{\n  "trace'
        process.stdout.close()
        assert process.wait(timeout=60) == 1
        assert process.stderr.read() == b""


# --------------------------------------------------------------------------- bad files


def _bad_files(tmp_path: Path) -> dict[str, Path]:
    files = {
        "empty": tmp_path / "empty.json",
        "binary": tmp_path / "capture.json.gz",
        "not-traces": tmp_path / "metrics.json",
        "truncated": tmp_path / "cut.json",
        "missing": tmp_path / "no-such-file.json",
        "directory": tmp_path / "a-dir",
    }
    files["empty"].write_bytes(b"")
    files["binary"].write_bytes(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xab\xae\x05\x00")
    files["not-traces"].write_text('{"resourceMetrics": []}')
    text = json.dumps(otlp_document(SPANS))
    files["truncated"].write_text(text[: len(text) // 2])
    files["directory"].mkdir()
    return files


@pytest.mark.e2e
def test_bad_files_get_one_stderr_line_each_and_good_files_are_still_analysed(tmp_path: Path, otlp_file: Path) -> None:
    bad = _bad_files(tmp_path)
    paths = [
        bad["empty"],
        bad["binary"],
        otlp_file,
        bad["not-traces"],
        bad["truncated"],
        bad["missing"],
        bad["directory"],
    ]
    result = run_cli("analyze", "--format", "json", *paths)
    assert result.returncode == 2
    lines = stderr_lines(result)
    assert len(lines) == len(bad), result.stderr
    for path in bad.values():
        assert sum(str(path) in line for line in lines) == 1, (path, lines)
    assert not any(str(otlp_file) in line for line in lines)
    assert "Traceback" not in result.stderr
    document = json.loads(result.stdout)
    assert_small_trace_profile({"traces": document["traces"]})


@pytest.mark.e2e
def test_bad_files_with_text_report(tmp_path: Path, jsonl_file: Path) -> None:
    bad = _bad_files(tmp_path)
    result = run_cli("analyze", bad["empty"], jsonl_file, bad["missing"])
    assert result.returncode == 2
    lines = stderr_lines(result)
    assert len(lines) == 2
    assert str(bad["empty"]) in lines[0]
    assert str(bad["missing"]) in lines[1]
    assert TRACE in result.stdout
    assert "chat gpt-4o" in result.stdout


@pytest.mark.e2e
def test_only_bad_files(tmp_path: Path) -> None:
    bad = _bad_files(tmp_path)
    result = run_cli("analyze", *bad.values())
    assert result.returncode == 2
    assert len(stderr_lines(result)) == len(bad)
    assert "Traceback" not in result.stderr
    result = run_cli("analyze", "--format", "json", *bad.values())
    assert result.returncode == 2
    assert json.loads(result.stdout)["traces"] == []


@pytest.mark.e2e
def test_partly_readable_file_is_reported_and_its_good_spans_analysed(tmp_path: Path) -> None:
    # JSON Lines whose last line was cut off (the collector was still writing it).
    lines = otlp_json_lines(SPANS).splitlines()
    extra = json.dumps(otlp_document([{**SPANS[0], "id": "00000000000000ff", "name": "late"}]))
    path = tmp_path / "live.jsonl"
    path.write_text("\n".join([*lines, extra[:50]]), encoding="utf-8")
    result = run_cli("analyze", "--format", "json", path)
    assert result.returncode == 2
    [line] = stderr_lines(result)
    assert str(path) in line
    assert_small_trace_profile(json.loads(result.stdout))


@pytest.mark.e2e
def test_bad_span_in_a_good_file(tmp_path: Path) -> None:
    document = otlp_document(SPANS)
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans.append({**spans[0], "spanId": "this is not an id", "name": "broken"})
    path = tmp_path / "one-bad-span.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    result = run_cli("analyze", "--format", "json", path)
    assert result.returncode == 2
    [line] = stderr_lines(result)
    assert str(path) in line
    assert_small_trace_profile(json.loads(result.stdout))


# --------------------------------------------------------------------------- text report


def _span_line(text: str, name: str) -> str:
    """The span-tree line of a span: the tree comes last, so it is the last line naming it."""
    return [line for line in text.splitlines() if name in line][-1]


def _assert_text_report(text: str, full: str, light: str) -> None:
    assert TRACE in text
    lowered = text.lower()
    # The category table: one row per category that has spans, with its numbers.
    rows = {line.split()[0]: line for line in text.splitlines() if line.split() and line.split()[0] in CATEGORIES}
    for name, (count, _self_ms, path_ms) in EXPECTED_CATEGORIES.items():
        if count:
            assert name in rows, name
            assert re.search(rf"\b{count}\b", rows[name]), rows[name]
            if path_ms:
                assert f"{path_ms:.1f} ms" in rows[name], rows[name]
    assert "critical path" in lowered
    # Top operations: the model and the tool.
    assert "operation" in lowered
    assert any("gpt-4o" in line and "llm" in line and "chat gpt-4o" not in line for line in text.splitlines())
    assert any("search" in line and "tool" in line and "execute_tool" not in line for line in text.splitlines())
    # The span tree, with the critical path marked.
    for name, (_category, _d, _s, _p, on_path) in EXPECTED_SPANS.items():
        line = _span_line(text, name)
        if on_path:
            assert full in line, line
        else:
            assert full not in line, line
            assert light in line, line
    # Children are indented below their parents.
    agent_line, http_line = _span_line(text, "agent"), _span_line(text, "GET /search")
    tool_line = _span_line(text, "execute_tool search")
    assert agent_line.index("agent") < tool_line.index("execute_tool") < http_line.index("GET /search")


@pytest.mark.e2e
def test_text_report_has_the_tables_and_the_span_tree(otlp_file: Path) -> None:
    result = run_cli("analyze", otlp_file)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    _assert_text_report(result.stdout, "█", "░")


@pytest.mark.e2e
def test_ascii_text_report(otlp_file: Path) -> None:
    result = run_cli("analyze", "--ascii", otlp_file)
    assert result.returncode == 0, result.stderr
    _assert_text_report(result.stdout, "#", ".")
    assert result.stdout.isascii(), sorted({c for c in result.stdout if not c.isascii()})


def _deep_wide_trace(*, depth: int, width: int) -> dict[str, Any]:
    """A trace with a long chain of nested agents, a very wide fan-out of tool and LLM calls,
    long names, hours-long durations, unended spans, missing parents and tokens."""
    long = "a-rather-long-operation-name-that-keeps-going-" * 4
    specs: list[dict[str, Any]] = []
    hour = 3_600_000  # ms
    specs.append(
        {
            "id": f"{1:016x}",
            "parent": None,
            "name": "root " + long,
            "start": 0,
            "end": 3 * hour,
            "kind": "server",
            "attrs": {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": long},
        }
    )
    parent = f"{1:016x}"
    for level in range(depth):
        span_id = f"{0x1000 + level:016x}"
        specs.append(
            {
                "id": span_id,
                "parent": parent,
                "name": f"level {level} {long}",
                "start": level * 10,
                "end": 3 * hour - level * 10,
                "kind": "internal",
                "attrs": {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": f"agent-{level}-{long}"},
            }
        )
        parent = span_id
    kinds = [
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "model-{i}-" + long,
            "gen_ai.usage.input_tokens": 123_456,
            "gen_ai.usage.output_tokens": 7_890,
        },
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "tool-{i}-" + long},
        {"gen_ai.operation.name": "embeddings", "gen_ai.request.model": "embed-{i}"},
        {"gen_ai.operation.name": "retrieval", "gen_ai.data_source.id": "index-{i}-" + long},
        {"db.system": "redis", "db.collection.name": "agent_memory_{i}"},
        {},
    ]
    for i in range(width):
        attrs = {k: (v.format(i=i % 40) if isinstance(v, str) else v) for k, v in kinds[i % len(kinds)].items()}
        start = 1000 + (i * 7919) % (2 * hour)
        specs.append(
            {
                "id": f"{0x100000 + i:016x}",
                "parent": parent if i % 3 else f"{1:016x}",
                "name": f"call {i} {long}",
                "start": start,
                "end": start + 1 + (i * 104729) % hour,
                "kind": "client",
                "attrs": attrs,
            }
        )
    # Unended spans and spans whose parent is missing (anomalies in the header).
    for i in range(8):
        specs.append(
            {
                "id": f"{0x900000 + i:016x}",
                "parent": f"{0xDEAD0000 + i:016x}",
                "name": f"orphan {i} {long}",
                "start": 5 + i,
                "end": None,
                "kind": "internal",
                "attrs": {},
            }
        )
    return otlp_document(specs)


@pytest.mark.e2e
@pytest.mark.parametrize("width", [40, 1200])
@pytest.mark.parametrize("ascii_flag", [False, True], ids=["unicode", "ascii"])
def test_text_report_of_a_deep_wide_trace_fits_80_columns(tmp_path: Path, width: int, ascii_flag: bool) -> None:
    path = tmp_path / "big.json"
    path.write_text(json.dumps(_deep_wide_trace(depth=30, width=width)), encoding="utf-8")
    # A second, small trace too, so the report has a separator between traces.
    small = tmp_path / "small.json"
    small.write_text(json.dumps(otlp_document(SPANS)), encoding="utf-8")
    args = ["analyze", path, small] + (["--ascii"] if ascii_flag else [])
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split("\n")
    assert len(lines) > 40
    too_wide = [(len(line), line) for line in lines if len(line) > 80]
    assert too_wide == []
    if ascii_flag:
        assert result.stdout.isascii(), sorted({c for c in result.stdout if not c.isascii()})


@pytest.mark.e2e
def test_text_report_on_a_terminal_that_cannot_show_unicode(otlp_file: Path) -> None:
    # With an ASCII-only standard output the report falls back to ASCII instead of crashing.
    result = run_cli("analyze", otlp_file, encoding="ascii")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout.isascii()
    assert "chat gpt-4o" in result.stdout


# --------------------------------------------------------------------------- help


@pytest.mark.e2e
@pytest.mark.parametrize("args", [["--help"], ["analyze", "--help"]], ids=["top", "analyze"])
def test_help_exits_0_and_mentions_the_formats(args: list[str]) -> None:
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr
    assert "analyze" in result.stdout
    assert "OTLP" in result.stdout
    assert "Jaeger" in result.stdout


@pytest.mark.e2e
def test_analyze_help_mentions_json_lines_stdin_and_options() -> None:
    result = run_cli("analyze", "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert "JSON Lines" in text or "JSONL" in text
    for option in ("--format", "--output", "--ascii", "text", "json"):
        assert option in text
    assert "standard input" in text or "stdin" in text


@pytest.mark.e2e
def test_usage_errors_exit_2(otlp_file: Path) -> None:
    for args in (["analyze"], ["analyze", otlp_file, "--format", "yaml"], ["frobnicate"], []):
        result = run_cli(*args)
        assert result.returncode == 2, args
        assert result.stderr.strip(), args
        assert "Traceback" not in result.stderr


# --------------------------------------------------------------------------- in-process main()


def test_main_returns_0_and_prints_the_text_report(otlp_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(otlp_file)]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert TRACE in captured.out
    for name in EXPECTED_SPANS:
        assert name in captured.out


def test_main_json_report(jaeger_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", "--format", "json", str(jaeger_file)]) == 0
    assert_small_trace_profile(json.loads(capsys.readouterr().out))


def test_main_several_files_of_one_trace_are_merged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The spans of one trace, split over two files of different formats.
    first = tmp_path / "first.json"
    first.write_text(json.dumps(otlp_document(SPANS[:2])), encoding="utf-8")
    second = tmp_path / "second.jaeger.json"
    second.write_text(json.dumps(jaeger_document(SPANS[2:])), encoding="utf-8")
    assert main(["analyze", "--format", "json", str(first), str(second)]) == 0
    assert_small_trace_profile(json.loads(capsys.readouterr().out))


def test_main_bad_and_good_files(tmp_path: Path, otlp_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = _bad_files(tmp_path)
    assert main(["analyze", "--format", "json", str(bad["empty"]), str(otlp_file), str(bad["missing"])]) == 2
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 2
    assert str(bad["empty"]) in lines[0] and str(bad["missing"]) in lines[1]
    assert_small_trace_profile({"traces": json.loads(captured.out)["traces"]})


def test_main_output_option(otlp_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.json"
    assert main(["analyze", "--format", "json", "--output", str(out), str(otlp_file)]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert_small_trace_profile(json.loads(out.read_text(encoding="utf-8")))


def test_main_output_to_an_unwritable_path_fails_clearly(
    otlp_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "no-such-dir" / "out.json"
    assert main(["analyze", "--output", str(out), str(otlp_file)]) != 0
    captured = capsys.readouterr()
    assert str(out) in captured.err
    assert len([line for line in captured.err.splitlines() if line.strip()]) == 1


def test_main_ascii_report_is_ascii(otlp_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", "--ascii", str(otlp_file)]) == 0
    out = capsys.readouterr().out
    assert out.isascii(), sorted({c for c in out if not c.isascii()})


@pytest.mark.parametrize("args", [["--help"], ["analyze", "--help"]], ids=["top", "analyze"])
def test_main_help(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "OTLP" in out and "Jaeger" in out


def test_main_without_files_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["analyze"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    # One line, naming the command and where to look, not argparse's usage block.
    assert err.count("\n") == 1
    assert err.startswith("otel-agent-profiler analyze: error: ") and "--help" in err


def test_text_report_lists_findings_with_their_savings(tmp_path: Path) -> None:
    out = tmp_path / "report.txt"
    assert main(["analyze", str(EXAMPLE), "--output", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "What to change (the largest saving of end-to-end time first)" in text
    joined = " ".join(line.strip() for line in text.splitlines())
    # gpt-4o-mini is the cheapest of its line in the price table: no model is suggested for it, one is for gpt-4o.
    assert "Send gpt-4o-mini shorter prompts, or make fewer calls" in joined
    assert "Try gpt-4o-mini for these calls" in joined
    # The example's tools already run in parallel, and each LLM call needs the steps before it:
    # nothing there is to be started together.
    assert "asyncio.gather" not in joined
    assert "Suggestion: " in text and "Where: " in text
    assert all(len(line) <= 80 for line in text.splitlines())
    assert main(["analyze", str(EXAMPLE), "--no-findings", "--output", str(out)]) == 0
    assert "What to change" not in out.read_text(encoding="utf-8")


def test_json_report_has_findings_only_when_asked(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    assert main(["analyze", str(EXAMPLE), "--format", "json", "--output", str(out)]) == 0
    assert "findings" not in json.loads(out.read_text())["traces"][0]
    assert main(["analyze", str(EXAMPLE), "--format", "json", "--findings", "--output", str(out)]) == 0
    findings = json.loads(out.read_text())["traces"][0]["findings"]
    assert findings and {"kind", "title", "saving_ns", "span_ids", "evidence"} <= set(findings[0])
    savings = [f["saving_ns"] for f in findings]
    assert savings == sorted(savings, reverse=True)


def test_progress_bar_goes_to_stderr_and_leaves_the_report_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["analyze", str(EXAMPLE), "--progress", "--no-findings"]) == 0
    captured = capsys.readouterr()
    assert "profiling" in captured.err and "Span tree" in captured.out
    assert "profiling" not in captured.out
    assert main(["analyze", str(EXAMPLE), "--no-findings"]) == 0
    assert capsys.readouterr().err == ""  # not a terminal: no bar


@pytest.mark.parametrize("command", ["analyze", "report", "export", "diff", "serve"])
def test_help_shows_no_format_escapes(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    # Argument groups' descriptions are printed as written, not %-formatted as option help is:
    # a doubled percent sign there reaches the reader as "%%".
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = capsys.readouterr().out
    assert "%%" not in out and "%(" not in out

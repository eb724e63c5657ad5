"""Reading traces back from a real Arize Phoenix (``--phoenix``): the profiles of the file they were sent from.

The demo's trace is sent to Phoenix over OTLP/HTTP, read back with ``analyze --phoenix``, and
compared with ``analyze`` of the file. What Phoenix keeps must match exactly: trace ids, span names
and tree, categories, operations, tokens, cost, findings. What it changes is allowed for, and only
that: it keeps microseconds (through a float, so a time may be 1 µs off), so durations are compared
to a few µs; it drops the span kind and the resource, which no profile number reads (the tree,
categories and tokens come from names, parents and attributes).
"""

from __future__ import annotations

import hashlib
import json
import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from otel_agent_profiler.adapters.otlp_proto import request_from_otlp_json
from otel_agent_profiler.cli import main
from otel_agent_profiler.stores import phoenix as phoenix_client
from tests.support.backends import Phoenix
from tests.support.paths import DATA

pytestmark = pytest.mark.e2e

DEMO = DATA / "demo_trace.otlp.json"
DEMO_TRACE = "3117fbb61d46f55cf6cbf3613fd3a3ba"
# Phoenix keeps microseconds through a float: a time may be 1 µs off, a duration 2, a sum of them a few more.
TOLERANCE_MS = 0.02


def trace_ids_of(project: str) -> tuple[str, str]:
    """Two trace ids of the test's own (Phoenix keeps ids unique across its store), one with leading zeros."""
    digest = hashlib.sha256(project.encode()).hexdigest()
    return digest[:32], "0000" + digest[32:60]


def demo_document(project: str, trace_ids: tuple[str, ...]) -> dict[str, Any]:
    """The demo's trace under each of ``trace_ids`` (span ids made unique too), its resource naming the project."""
    text = DEMO.read_text(encoding="utf-8")
    resource_spans = []
    for trace_id in trace_ids:
        copy = json.loads(text.replace(DEMO_TRACE, trace_id))["resourceSpans"]
        for entry in copy:
            entry["resource"]["attributes"].append(
                {"key": "openinference.project.name", "value": {"stringValue": project}}
            )
            for scope_spans in entry["scopeSpans"]:
                for span in scope_spans["spans"]:
                    for key in ("spanId", "parentSpanId"):
                        if span.get(key):
                            span[key] = hashlib.sha256((trace_id + span[key]).encode()).hexdigest()[:16]
        resource_spans += copy
    return {"resourceSpans": resource_spans}


def send(phoenix: Phoenix, document: dict[str, Any]) -> int:
    body = request_from_otlp_json(json.dumps(document)).SerializeToString()
    request = urllib.request.Request(
        phoenix.traces_url, data=body, headers={"Content-Type": "application/x-protobuf"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.status == 200
    return sum(len(s["spans"]) for rs in document["resourceSpans"] for s in rs["scopeSpans"])


def analyze_json(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict[str, Any]]:
    code = main(["analyze", "--format", "json", "--findings", "--no-progress", *argv])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.err == ""
    traces: list[dict[str, Any]] = json.loads(captured.out)["traces"]
    return traces


def assert_same_profiles(got: Any, expected: Any, where: str = "") -> None:
    """Equal, except for times (``*_ms`` floats, ``*_ns``), which may differ by :data:`TOLERANCE_MS`, and span kinds,
    which Phoenix does not keep (every span read back is INTERNAL)."""
    if re.search(r"\.spans\[\d+\]\.kind$", where):
        assert got == "INTERNAL", where
    elif isinstance(expected, dict):
        assert isinstance(got, dict) and set(got) == set(expected), f"{where}: {set(got) ^ set(expected)}"
        for key in expected:
            assert_same_profiles(got[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(got, list) and len(got) == len(expected), where
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            assert_same_profiles(g, e, f"{where}[{i}]")
    elif where.endswith("_ns") and isinstance(expected, int):
        assert abs(got - expected) <= TOLERANCE_MS * 1e6, where
    elif isinstance(expected, float) and not isinstance(expected, bool):
        tolerance = TOLERANCE_MS if "ms" in where or "share" not in where else 1e-4
        assert got == pytest.approx(expected, abs=tolerance), where
    else:
        assert got == expected, where


def test_phoenix_gives_the_profiles_of_the_file_the_traces_were_sent_from(
    capsys: pytest.CaptureFixture[str],
    phoenix: Phoenix,
    phoenix_project: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trace_ids = trace_ids_of(phoenix_project)
    document = demo_document(phoenix_project, trace_ids)
    spans = send(phoenix, document)
    for trace_id in trace_ids:
        phoenix.spans(phoenix_project, trace_id, expected_count=spans // 2, timeout=60)
    sent = tmp_path / "sent.otlp.json"
    sent.write_text(json.dumps(document))
    from_file = analyze_json(capsys, str(sent))
    assert [trace["trace_id"] for trace in from_file] == sorted(trace_ids)

    # Small pages, so that reading the project takes several (Phoenix's cursor is followed).
    monkeypatch.setattr(phoenix_client, "PAGE_SIZE", 3)
    saved = tmp_path / "saved.json"
    from_phoenix = analyze_json(
        capsys, "--phoenix", phoenix.base_url, "--project", phoenix_project, "--save", str(saved)
    )
    assert_same_profiles(from_phoenix, from_file)
    # Saved, they read back the same, and Phoenix's own timing is kept.
    assert analyze_json(capsys, str(saved)) == from_phoenix

    second = trace_ids[1]
    by_id = analyze_json(capsys, "--phoenix", phoenix.base_url, "--project", phoenix_project, "--trace-id", second)
    assert by_id == [trace for trace in from_phoenix if trace["trace_id"] == second]


def test_phoenix_search_window_and_limit(
    capsys: pytest.CaptureFixture[str], phoenix: Phoenix, phoenix_project: str
) -> None:
    trace_ids = trace_ids_of(phoenix_project)
    spans = send(phoenix, demo_document(phoenix_project, trace_ids))
    for trace_id in trace_ids:
        phoenix.spans(phoenix_project, trace_id, expected_count=spans // 2, timeout=60)
    # The most recent trace only (Phoenix answers newest first).
    limited = analyze_json(capsys, "--phoenix", phoenix.base_url, "--project", phoenix_project, "--limit", "1")
    assert len(limited) == 1
    # A window around the traces finds them; one before them nothing.
    window = ["--start", "2026-11-01T00:00:00Z", "--end", "2026-12-31T00:00:00Z"]
    assert len(analyze_json(capsys, "--phoenix", phoenix.base_url, "--project", phoenix_project, *window)) == 2
    before = ["--start", "2020-01-01T00:00:00Z", "--end", "2020-01-02T00:00:00Z"]
    code = main(["analyze", "--no-progress", "--phoenix", phoenix.base_url, "--project", phoenix_project, *before])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert f"no traces found for project {phoenix_project}" in err[0]


def test_an_unknown_phoenix_project_is_one_line(capsys: pytest.CaptureFixture[str], phoenix: Phoenix) -> None:
    code = main(["analyze", "--no-progress", "--phoenix", phoenix.base_url, "--project", "no-such-project-here"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [
        f"otel-agent-profiler: error: phoenix at {phoenix.base_url}: no project 'no-such-project-here'"
    ]

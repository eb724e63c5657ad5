"""``--prometheus``: the windows and queries it asks Prometheus, and every way reading it can fail.

A real Prometheus is in ``test_stores_prometheus_e2e.py``. The failures here come from small real
HTTP servers on free ports (``store_servers``): a port nothing listens on, a server answering 500,
one answering something that is not JSON or not Prometheus's answer, and Prometheus's own error
answer (``{"status": "error", "errorType": "bad_data", ...}`` with 400, as its HTTP API documents).
Each is one line on standard error and exit code 2.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from otel_agent_profiler.cli import main
from otel_agent_profiler.stores.prometheus import (
    LOAD_METRICS,
    MAX_POINTS,
    QUERY_RANGE,
    Window,
    label_matchers,
    query,
    windows_of,
)
from tests.support.paths import DATA
from tests.support.store_servers import Answer, StoreServer, closed_port_url

DEMO = DATA / "demo_trace.otlp.json"
S = 1_000_000_000


# The selector of --prometheus-match.


@pytest.mark.parametrize(
    ("selector", "matchers"),
    [
        ('{job="vllm"}', 'job="vllm"'),
        ('job="vllm"', 'job="vllm"'),
        (' { instance=~"gpu-.*", namespace!="dev", } ', 'instance=~"gpu-.*", namespace!="dev"'),
        ('{model_name="a \\"quoted\\" name"}', 'model_name="a \\"quoted\\" name"'),
    ],
)
def test_label_matchers_are_taken_with_or_without_braces(selector: str, matchers: str) -> None:
    assert label_matchers(selector) == matchers


@pytest.mark.parametrize("selector", ["", "{}", 'up{job="vllm"}', "{job=vllm}", '{job="vllm"', '{job="a"} or up'])
def test_anything_but_label_matchers_is_refused(selector: str) -> None:
    with pytest.raises(ValueError, match="label matchers"):
        label_matchers(selector)


def test_each_name_is_one_query_per_server_and_model() -> None:
    assert (
        query("vllm:num_requests_running", "sum")
        == 'sum by (instance, model_name) ({__name__=~"vllm[:_]num_requests_running"})'
    )
    assert (
        query("vllm:kv_cache_usage_perc", "max", 'job="vllm"')
        == 'max by (instance, model_name) ({__name__=~"vllm[:_]kv_cache_usage_perc", job="vllm"})'
    )
    names = [name for metric in LOAD_METRICS for name in metric.names]
    assert len(names) == len(set(names)) == 13
    assert {metric.field for metric in LOAD_METRICS} == {
        "running", "waiting", "kv_cache_usage", "prefix_cache_queries", "prefix_cache_hits", "preemptions",
    }  # fmt: skip


# The windows read.


def test_one_window_covers_the_traces_with_a_few_seconds_either_side() -> None:
    windows = windows_of([(100 * S, 110 * S), (105 * S, 130 * S), (200 * S, 210 * S)])
    assert windows == [Window(95 * S, 215 * S, 1)]


def test_traces_far_apart_are_read_as_separate_windows() -> None:
    hour = 3600 * S
    windows = windows_of([(0, 10 * S), (hour, hour + 10 * S)])
    assert windows == [Window(-5 * S, 15 * S, 1), Window(hour - 5 * S, hour + 15 * S, 1)]


def test_many_windows_are_merged_at_their_closest_gaps() -> None:
    hour = 3600 * S
    # 16 traces an hour apart, and one twenty minutes after the sixth.
    starts = [i * hour for i in range(16)] + [5 * hour + 1200 * S]
    windows = windows_of([(start, start + S) for start in starts], max_windows=16)
    assert len(windows) == 16
    covered = [(w.start_ns, w.end_ns) for w in windows]
    assert all(any(a <= s and s + S <= b for a, b in covered) for s in starts)
    assert (5 * hour - 5 * S, 5 * hour + 1206 * S) in covered  # the closest pair shares a window


def test_a_long_window_has_a_coarser_step_and_stays_under_prometheus_limit() -> None:
    day = 86_400 * S
    (window,) = windows_of([(0, day)])
    assert window.step_s == 9
    assert window.points <= MAX_POINTS < 11_000
    (short,) = windows_of([(0, (MAX_POINTS - 20) * S)])
    assert short.step_s == 1 and short.points <= MAX_POINTS


# Usage errors: one line, exit code 2, before any request.


def one_usage_line(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main([str(arg) for arg in argv])
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def one_error_line(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> str:
    code = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert code == 2, captured
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--prometheus-match", '{job="vllm"}'], "--prometheus-match narrows --prometheus"),
        (["--prometheus", "localhost:9090"], "is not an http:// or https:// URL"),
        (["--prometheus", "http://localhost:9090", "--prometheus-match", "up"], "label matchers"),
    ],
)
def test_a_wrong_prometheus_option_is_one_usage_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    line = one_usage_line(capsys, "analyze", DEMO, *argv)
    assert line.startswith("otel-agent-profiler analyze: error: ") and expected in line, line


def test_on_disk_is_refused_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    line = one_error_line(capsys, "analyze", DEMO, "--prometheus", "http://127.0.0.1:9", "--on-disk")
    assert line == (
        "otel-agent-profiler: error: --prometheus is not available when the input is profiled on disk "
        "(use --no-on-disk for inputs that fit in memory)"
    )


def test_report_takes_the_options_too(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    line = one_usage_line(capsys, "report", DEMO, "--html", tmp_path / "r.html", "--prometheus-match", "job='x'")
    assert line.startswith("otel-agent-profiler report: error: --prometheus-match narrows"), line


# Prometheus that cannot be read: one line, exit code 2, nothing written.


EMPTY_MATRIX = {"status": "success", "data": {"resultType": "matrix", "result": []}}
BAD_POINT = {
    "status": "success",
    "data": {"resultType": "matrix", "result": [{"metric": {"instance": "a"}, "values": [["x", "1"]]}]},
}


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (Answer(500, {"status": "error", "errorType": "internal", "error": "boom"}), "500 Internal Server Error after"),
        (Answer(200, b"<html>a login page</html>"), "malformed answer from"),
        (Answer(200, {"status": "success", "data": {"resultType": "vector", "result": []}}), "not a query_range"),
        (Answer(200, {"data": [1, 2]}), "not a query_range answer"),
        (Answer(200, BAD_POINT), 'a point is not [unix_seconds, "value"]'),
        (
            Answer(400, {"status": "error", "errorType": "bad_data", "error": 'invalid parameter "query": 1:1: parse'}),
            'the query failed (bad_data: invalid parameter "query": 1:1: parse)',
        ),
        (Answer(401, {"status": "error"}), "401 Unauthorized; check the credentials in $"),
        (Answer(404, "404 page not found"), "404 Not Found for"),
    ],
)
def test_a_prometheus_that_cannot_be_read_is_one_line_and_exit_code_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, answer: Answer, expected: str
) -> None:
    output = tmp_path / "out.json"
    with StoreServer({QUERY_RANGE: answer}) as server:
        line = one_error_line(
            capsys, "analyze", DEMO, "--format", "json", "-o", output, "--prometheus", server.url, "--timeout", "5"
        )
    assert line.startswith(f"otel-agent-profiler: error: Prometheus at {server.url}: "), line
    assert expected in line, line
    assert not output.exists()


def test_prometheus_that_is_not_there_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    url = closed_port_url()
    line = one_error_line(capsys, "analyze", DEMO, "--prometheus", url)
    assert f"Prometheus at {url}: cannot connect" in line


def test_prometheus_too_slow_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with StoreServer({QUERY_RANGE: Answer(200, EMPTY_MATRIX, delay_s=2)}) as server:
        line = one_error_line(capsys, "analyze", DEMO, "--prometheus", server.url, "--timeout", "0.3")
    assert "no answer within 0.3 s (see --timeout)" in line


def test_the_queries_cover_the_traces_and_carry_the_selector_and_headers(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_AGENT_PROFILER_SOURCE_HEADERS", "Authorization=Bearer%20t0ken")
    with StoreServer({QUERY_RANGE: Answer(200, EMPTY_MATRIX)}) as server:
        code = main(["analyze", str(DEMO), "--prometheus", server.url, "--prometheus-match", '{job="vllm"}'])
    captured = capsys.readouterr()
    assert code == 0
    # Nothing found is not an error: one note, and the analysis as without --prometheus.
    notes = [line for line in captured.err.splitlines() if line.strip()]
    assert len(notes) == 1 and notes[0].startswith(
        "otel-agent-profiler: note: no inference-server metrics in Prometheus for "
    ), notes
    assert '(vllm: or sglang: series{job="vllm"})' in notes[0]
    assert main(["analyze", str(DEMO)]) == 0
    assert capsys.readouterr().out == captured.out
    assert len(server.requests) == 13
    asked = sorted(request.params["query"][0] for request in server.requests)
    assert asked[0] == 'max by (instance, model_name) ({__name__=~"sglang[:_]token_usage", job="vllm"})'
    assert all(text.endswith(', job="vllm"})') for text in asked)
    starts = {float(request.params["start"][0]) for request in server.requests}
    ends = {float(request.params["end"][0]) for request in server.requests}
    assert len(starts) == len(ends) == 1
    assert {request.params["step"][0] for request in server.requests} == {"1s"}
    assert {request.headers.get("Authorization") for request in server.requests} == {"Bearer t0ken"}

"""Reading traces from Jaeger and Tempo (``--jaeger``, ``--tempo``): the same profiles as from a file.

Jaeger and Tempo cannot run here: ``store_servers`` answers as their API documentation shows
(the versions are cited there), on a free port. Every bad answer of a store is one line on
standard error and exit code 2. Phoenix runs for real: see ``test_stores_phoenix.py``.
"""

from __future__ import annotations

import json
import shlex
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from otel_agent_profiler.adapters.files import read_trace_file
from otel_agent_profiler.cli import main
from otel_agent_profiler.core.span_tree import group_by_trace
from otel_agent_profiler.plugin.environment_variables import OTEL_AGENT_PROFILER_SOURCE_HEADERS
from otel_agent_profiler.stores.http import HttpSettings, StoreHttp
from tests.support.paths import DATA, ROOT
from tests.support.store_servers import (
    JAEGER_NOT_FOUND,
    Answer,
    Request,
    StoreServer,
    base64_ids,
    closed_port_url,
    jaeger_answer,
    jaeger_trace,
    tempo_search_answer,
)

DEMO = DATA / "demo_trace.otlp.json"
DEMO_TRACE = "3117fbb61d46f55cf6cbf3613fd3a3ba"
# A second trace whose id starts with zeros, which Tempo's search leaves out.
ZEROS_TRACE = "00000fb61d46f55cf6cbf3613fd3a3ba"


def otlp_trace(trace_id: str) -> dict[str, Any]:
    """The demo's trace as OTLP JSON, under ``trace_id``."""
    return json.loads(DEMO.read_text(encoding="utf-8").replace(DEMO_TRACE, trace_id))


TRACE_IDS = (DEMO_TRACE, ZEROS_TRACE)


@pytest.fixture
def otlp_file(tmp_path: Path) -> Path:
    """Both traces in one OTLP JSON file."""
    documents = [otlp_trace(trace_id) for trace_id in TRACE_IDS]
    path = tmp_path / "traces.otlp.json"
    path.write_text(json.dumps({"resourceSpans": [rs for d in documents for rs in d["resourceSpans"]]}))
    return path


def jaeger_traces() -> list[dict[str, Any]]:
    records = read_trace_file(DEMO).records
    traces = []
    for trace_id in TRACE_IDS:
        copy = [type(r)(**{f: getattr(r, f) for f in r.__slots__}) for r in records]  # type: ignore[attr-defined]
        for record in copy:
            record.trace_id = trace_id
        traces.extend(jaeger_trace(spans) for spans in group_by_trace(copy).values())
    return traces


@pytest.fixture
def jaeger_file(tmp_path: Path) -> Path:
    path = tmp_path / "traces.jaeger.json"
    path.write_text(json.dumps(jaeger_answer(jaeger_traces())))
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, list[str]]:
    code = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return code, captured.out, [line for line in captured.err.splitlines() if line.strip()]


def analyze_json(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, list[dict[str, Any]], list[str]]:
    code, out, err = run(capsys, "analyze", "--format", "json", "--no-progress", *argv)
    return code, (json.loads(out)["traces"] if out else []), err


def jaeger_routes() -> dict[str, Any]:
    traces = {trace["traceID"]: trace for trace in jaeger_traces()}

    def by_id(request: Request) -> Answer:
        trace = traces.get(request.path.rsplit("/", 1)[1])
        return Answer(200, jaeger_answer([trace])) if trace else JAEGER_NOT_FOUND

    return {"/api/traces": Answer(200, jaeger_answer(list(traces.values()))), "/api/traces/": by_id}


def tempo_routes(*, v2: bool = True) -> dict[str, Any]:
    def trace_of(request: Request) -> dict[str, Any] | None:
        trace_id = request.path.rsplit("/", 1)[1]
        return otlp_trace(trace_id) if trace_id in TRACE_IDS else None

    def v2_by_id(request: Request) -> Answer:
        trace = trace_of(request) if v2 else None
        return Answer(200, {"trace": trace}) if trace else Answer(404, b"trace not found")

    def v1_by_id(request: Request) -> Answer:
        trace = trace_of(request)
        return Answer(200, {"batches": base64_ids(trace)["resourceSpans"]}) if trace else Answer(404, b"not found")

    return {
        "/api/search": Answer(200, tempo_search_answer(TRACE_IDS)),
        "/api/v2/traces/": v2_by_id,
        "/api/traces/": v1_by_id,
    }


@pytest.fixture
def jaeger() -> Iterator[StoreServer]:
    with StoreServer(jaeger_routes()) as server:
        yield server


@pytest.fixture
def tempo() -> Iterator[StoreServer]:
    with StoreServer(tempo_routes()) as server:
        yield server


# The same profiles as from a file.


def test_jaeger_search_gives_the_profiles_of_the_same_traces_read_from_a_file(
    capsys: pytest.CaptureFixture[str], jaeger: StoreServer, jaeger_file: Path
) -> None:
    code, from_file, _ = analyze_json(capsys, jaeger_file)
    assert code == 0 and len(from_file) == 2
    code, from_store, err = analyze_json(
        capsys, "--jaeger", jaeger.url, "--service", "research-agent-demo", "--since", "2h", "--limit", "5"
    )
    assert (code, err) == (0, [])
    assert from_store == from_file
    (search,) = jaeger.requests
    assert search.path == "/api/traces"
    assert search.params["service"] == ["research-agent-demo"]
    assert search.params["limit"] == ["5"]
    start_us, end_us = int(search.params["start"][0]), int(search.params["end"][0])
    assert end_us - start_us == 2 * 3600 * 10**6


def test_jaeger_search_sends_operation_and_tags_as_its_api_wants_them(
    capsys: pytest.CaptureFixture[str], jaeger: StoreServer
) -> None:
    code, _, _ = analyze_json(
        capsys, "--jaeger", jaeger.url, "--service", "s", "--operation", "chat", "--tags", "a=1", "b=x y"
    )
    assert code == 0
    params = jaeger.requests[0].params
    assert params["operation"] == ["chat"]
    assert json.loads(params["tags"][0]) == {"a": "1", "b": "x y"}


def test_jaeger_traces_by_id_are_fetched_each_and_profiled_as_from_the_file(
    capsys: pytest.CaptureFixture[str], jaeger: StoreServer, jaeger_file: Path
) -> None:
    _, from_file, _ = analyze_json(capsys, jaeger_file)
    code, from_store, err = analyze_json(capsys, "--jaeger", jaeger.url, "--trace-id", *TRACE_IDS)
    assert (code, err) == (0, [])
    assert from_store == from_file
    assert sorted(jaeger.paths()) == sorted(f"/api/traces/{trace_id}" for trace_id in TRACE_IDS)


@pytest.mark.parametrize("v2", [True, False], ids=["v2", "v1-only"])
def test_tempo_search_then_traces_by_id_give_the_profiles_of_the_file(
    capsys: pytest.CaptureFixture[str], otlp_file: Path, v2: bool
) -> None:
    _, from_file, _ = analyze_json(capsys, otlp_file)
    with StoreServer(tempo_routes(v2=v2)) as tempo:
        code, from_store, err = analyze_json(
            capsys, "--tempo", tempo.url, "--query", '{ resource.service.name = "research-agent-demo" }'
        )
        assert (code, err) == (0, [])
        assert from_store == from_file
        search = tempo.requests[0]
        assert search.path == "/api/search"
        assert search.params["q"] == ['{ resource.service.name = "research-agent-demo" }']
        assert int(search.params["end"][0]) - int(search.params["start"][0]) in (3600, 3601)
        # The id without its leading zeros is asked for with them.
        fetched = [path for path in tempo.paths() if path != "/api/search"]
        assert f"/api/v2/traces/{ZEROS_TRACE}" in fetched if v2 else f"/api/traces/{ZEROS_TRACE}" in fetched
        assert all(request.headers.get("Accept") == "application/json" for request in tempo.requests)


def test_tempo_trace_ids_without_a_search(capsys: pytest.CaptureFixture[str], tempo: StoreServer) -> None:
    code, traces, err = analyze_json(capsys, "--tempo", tempo.url, "--trace-id", ZEROS_TRACE.lstrip("0"))
    assert (code, err) == (0, [])
    assert [trace["trace_id"] for trace in traces] == [ZEROS_TRACE]
    assert tempo.paths() == [f"/api/v2/traces/{ZEROS_TRACE}"]


def jaeger_v3_routes() -> dict[str, Any]:
    def by_id(request: Request) -> Answer:
        trace_id = request.path.rsplit("/", 1)[1]
        if trace_id not in TRACE_IDS:
            return Answer(404, {"error": {"httpCode": 404, "message": "trace not found"}})
        return Answer(200, {"result": otlp_trace(trace_id)})

    both = [rs for trace_id in TRACE_IDS for rs in otlp_trace(trace_id)["resourceSpans"]]
    return {"/api/v3/traces": Answer(200, {"result": {"resourceSpans": both}}), "/api/v3/traces/": by_id}


def test_jaeger_v3_search_and_trace_by_id_give_the_profiles_of_the_file(
    capsys: pytest.CaptureFixture[str], otlp_file: Path
) -> None:
    _, from_file, _ = analyze_json(capsys, otlp_file)
    with StoreServer(jaeger_v3_routes()) as jaeger:
        v3 = jaeger.url + "/api/v3"
        code, from_search, err = analyze_json(capsys, "--jaeger", v3, "--service", "research-agent-demo")
        assert (code, err) == (0, [])
        assert from_search == from_file
        params = jaeger.requests[0].params
        assert params["query.service_name"] == ["research-agent-demo"]
        assert params["query.start_time_min"][0].endswith("Z") and params["query.num_traces"] == ["100"]
        code, by_id, err = analyze_json(capsys, "--jaeger", v3, "--trace-id", *TRACE_IDS)
        assert (code, err) == (0, [])
        assert by_id == from_file


def test_an_empty_jaeger_v3_search_answered_with_a_404_is_an_empty_result(capsys: pytest.CaptureFixture[str]) -> None:
    not_found = Answer(404, {"error": {"httpCode": 404, "message": "No traces found"}})
    with StoreServer({"/api/v3/traces": not_found}) as jaeger:
        line = one_error_line(capsys, "--jaeger", jaeger.url + "/api/v3", "--service", "s")
    assert "no traces found for service=s" in line


def test_saved_traces_read_back_give_the_same_profiles(
    capsys: pytest.CaptureFixture[str], jaeger: StoreServer, tmp_path: Path
) -> None:
    saved = tmp_path / "saved.json"
    code, from_store, _ = analyze_json(capsys, "--jaeger", jaeger.url, "--service", "s", "--save", saved)
    assert code == 0
    assert "resourceSpans" in json.loads(saved.read_text())
    code, from_saved, err = analyze_json(capsys, saved)
    assert (code, err) == (0, [])
    assert from_saved == from_store


def test_headers_come_from_the_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tempo: StoreServer
) -> None:
    # Grafana Cloud: basic auth of the stack's user id and an access token, base64 encoded.
    monkeypatch.setenv(
        OTEL_AGENT_PROFILER_SOURCE_HEADERS, "Authorization=Basic%20MTIzNDU2OnRva2Vu, X-Scope-OrgID=tenant-1"
    )
    code, _, _ = analyze_json(capsys, "--tempo", tempo.url, "--query", "{}")
    assert code == 0
    for request in tempo.requests:
        assert request.headers["Authorization"] == "Basic MTIzNDU2OnRva2Vu"
        assert request.headers["X-Scope-OrgID"] == "tenant-1"


def test_every_offline_command_reads_a_store(
    capsys: pytest.CaptureFixture[str], jaeger: StoreServer, tmp_path: Path
) -> None:
    store = ["--jaeger", jaeger.url, "--service", "s"]
    code, _, err = run(capsys, "report", *store, "--html", tmp_path / "r.html", "--no-progress")
    assert code == 0 and (tmp_path / "r.html").stat().st_size > 0, err
    code, _, err = run(capsys, "export", *store, "--format", "speedscope", "-o", tmp_path / "s.json")
    assert code == 0 and json.loads((tmp_path / "s.json").read_text())["profiles"], err
    code, out, err = run(capsys, "analyze", *store, "--no-progress")
    assert code == 0 and DEMO_TRACE in out, err


def test_diff_reads_a_store_on_either_side(
    capsys: pytest.CaptureFixture[str], jaeger: StoreServer, tempo: StoreServer, otlp_file: Path
) -> None:
    baseline = f"jaeger+{jaeger.url}?service=research-agent-demo&since=1d"
    candidate = f"tempo+{tempo.url}?query=%7B%20%7D&limit=10"
    # Two runs a side are too few to decide; allowed here, since what is tested is the reading.
    code, out, err = run(capsys, "diff", baseline, candidate, "--format", "json", "--no-progress", "--allow-few-runs")
    assert code == 0, err
    document = json.loads(out)
    assert (document["baseline_runs"], document["candidate_runs"]) == (2, 2) and document["too_few_runs"]
    code, out, err = run(capsys, "diff", otlp_file, candidate, "--format", "json", "--no-progress", "--allow-few-runs")
    assert code == 0, err
    searches = [request.params for request in tempo.requests if request.path == "/api/search"]
    assert [(p["q"], p["limit"]) for p in searches] == [(["{ }"], ["10"])] * 2


def test_the_progress_bar_shows_the_fetch(capsys: pytest.CaptureFixture[str], tempo: StoreServer) -> None:
    main(["analyze", "--progress", "--tempo", tempo.url, "--query", "{}"])
    assert "fetching traces" in capsys.readouterr().err


# Bad input: one line, exit code 2.


def one_error_line(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> str:
    code, _, err = run(capsys, "analyze", "--no-progress", *argv)
    assert code == 2, err
    assert len(err) == 1, err
    assert err[0].startswith("otel-agent-profiler"), err
    return err[0]


def test_an_unreachable_store_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    url = closed_port_url()
    line = one_error_line(capsys, "--jaeger", url, "--service", "s")
    assert f"jaeger at {url}: cannot connect" in line


def test_a_401_names_the_headers_variable(capsys: pytest.CaptureFixture[str]) -> None:
    with StoreServer({"/api/search": Answer(401, {"message": "invalid token"})}) as tempo:
        line = one_error_line(capsys, "--tempo", tempo.url, "--query", "{}")
    assert "401 Unauthorized" in line and OTEL_AGENT_PROFILER_SOURCE_HEADERS in line


def test_a_trace_id_the_store_does_not_have_is_one_line_and_the_others_are_still_read(
    capsys: pytest.CaptureFixture[str], jaeger: StoreServer
) -> None:
    missing = "0123456789abcdef0123456789abcdef"
    code, out, err = run(
        capsys, "analyze", "--format", "json", "--jaeger", jaeger.url, "--trace-id", DEMO_TRACE, missing
    )
    assert code == 2
    assert err == [f"otel-agent-profiler: error: jaeger trace {missing}: not found in jaeger"]
    assert [trace["trace_id"] for trace in json.loads(out)["traces"]] == [DEMO_TRACE]


def test_a_trace_id_missing_from_tempo_is_asked_on_both_endpoints(
    capsys: pytest.CaptureFixture[str], tempo: StoreServer
) -> None:
    missing = "0123456789abcdef0123456789abcdef"
    line = one_error_line(capsys, "--tempo", tempo.url, "--trace-id", missing)
    assert line.endswith(f"tempo trace {missing}: not found in tempo")
    assert tempo.paths() == [f"/api/v2/traces/{missing}", f"/api/traces/{missing}"]


@pytest.mark.parametrize(
    ("routes", "argv", "expected"),
    [
        ({"/api/traces": Answer(200, b"<html>login</html>")}, ["--jaeger"], "not JSON"),
        ({"/api/traces": Answer(200, {"traces": []})}, ["--jaeger"], 'not Jaeger\'s {"data": [...]}'),
        ({"/api/search": Answer(200, {"traces": [{"id": 1}]})}, ["--tempo"], "not Tempo's"),
        (
            {"/api/search": Answer(200, tempo_search_answer([DEMO_TRACE])), "/api/v2/traces/": Answer(200, [1, 2])},
            ["--tempo"],
            "no 'trace' object",
        ),
        ({"/api/traces": Answer(200, b"")}, ["--jaeger"], "not JSON (empty)"),
    ],
    ids=["html", "jaeger-shape", "tempo-search-shape", "tempo-trace-shape", "empty-body"],
)
def test_a_malformed_answer_is_one_line(
    capsys: pytest.CaptureFixture[str], routes: dict[str, Any], argv: list[str], expected: str
) -> None:
    with StoreServer(routes) as server:
        search = ["--service", "s"] if argv == ["--jaeger"] else ["--query", "{}"]
        line = one_error_line(capsys, *argv, server.url, *search)
    assert "malformed answer" in line and expected in line


def test_a_wrong_path_is_a_404_line(capsys: pytest.CaptureFixture[str]) -> None:
    with StoreServer({}) as server:
        line = one_error_line(capsys, "--jaeger", server.url + "/not-jaeger", "--service", "s")
    assert "404 Not Found" in line and "/not-jaeger/api/traces" in line


def test_an_empty_result_is_an_error_unless_allowed(capsys: pytest.CaptureFixture[str]) -> None:
    with StoreServer({"/api/traces": Answer(200, jaeger_answer([]))}) as jaeger:
        line = one_error_line(capsys, "--jaeger", jaeger.url, "--service", "nobody")
        assert line.endswith("no traces found for service=nobody (--allow-empty: not an error)")
        code, out, err = run(capsys, "analyze", "--jaeger", jaeger.url, "--service", "nobody", "--allow-empty")
    assert (code, out, err) == (0, "No traces to report.\n", [])
    with StoreServer({"/api/search": Answer(200, {"metrics": {"inspectedBytes": "0"}})}) as tempo:
        line = one_error_line(capsys, "--tempo", tempo.url, "--query", "{}")
        assert "no traces found for query {}" in line


def test_429_and_5xx_are_retried_with_backoff_then_succeed(
    capsys: pytest.CaptureFixture[str], jaeger_file: Path
) -> None:
    answers = [
        Answer(429, {"error": "slow down"}, {"Retry-After": "0"}),
        Answer(503, b"unavailable", {"Retry-After": "0"}),
        Answer(200, jaeger_answer(jaeger_traces())),
    ]
    with StoreServer({"/api/traces": answers}) as jaeger:
        code, traces, err = analyze_json(capsys, "--jaeger", jaeger.url, "--service", "s")
        assert (code, err) == (0, [])
        assert len(jaeger.requests) == 3
    assert traces == analyze_json(capsys, jaeger_file)[1]


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
def test_retries_are_bounded_then_one_line(capsys: pytest.CaptureFixture[str], status: int) -> None:
    # No Retry-After on 500: the backoff (0.25 s, doubling) makes it the slowest, under two seconds.
    headers = {} if status == 500 else {"Retry-After": "0"}
    with StoreServer({"/api/search": Answer(status, b"busy", headers)}) as tempo:
        line = one_error_line(capsys, "--tempo", tempo.url, "--query", "{}")
        assert len(tempo.requests) == 4
    assert f": {status} " in line and "after 4 attempts" in line


@pytest.mark.parametrize(
    ("attempt", "retry_after", "wait_s"),
    [
        (0, None, 0.25),
        (2, None, 1.0),
        (10, None, 8.0),  # the backoff doubles up to the cap
        (0, "2", 2.0),
        (0, "3600", 8.0),  # a store asking for an hour does not get it
        (0, "-5", 0.0),
        (1, "Wed, 21 Oct 2026 07:28:00 GMT", 0.5),  # an HTTP date: the backoff
    ],
)
def test_the_wait_before_a_retry_is_bounded(attempt: int, retry_after: str | None, wait_s: float) -> None:
    assert StoreHttp("tempo", "http://h", HttpSettings())._wait_s(attempt, retry_after) == wait_s


def test_a_store_that_does_not_answer_in_time_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with StoreServer({"/api/traces": Answer(200, jaeger_answer([]), delay_s=3)}) as jaeger:
        line = one_error_line(capsys, "--jaeger", jaeger.url, "--service", "s", "--timeout", "0.3")
    assert "no answer within 0.3 s" in line


# TLS: verified by default, against --ca-bundle when given.


@pytest.fixture
def https_jaeger(tmp_path: Path) -> Iterator[tuple[StoreServer, Path]]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    command = (
        "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1"
    )
    subprocess.run(
        [*command.split(), "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    server = StoreServer(jaeger_routes())
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.server.socket = context.wrap_socket(server.server.socket, server_side=True)
    server.url = server.url.replace("http://", "https://")
    with server:
        yield server, cert


def test_tls_is_verified_by_default_and_a_ca_bundle_can_be_given(
    capsys: pytest.CaptureFixture[str], https_jaeger: tuple[StoreServer, Path]
) -> None:
    server, cert = https_jaeger
    line = one_error_line(capsys, "--jaeger", server.url, "--service", "s")
    assert "TLS verification failed" in line and "--ca-bundle" in line
    code, traces, err = analyze_json(capsys, "--jaeger", server.url, "--service", "s", "--ca-bundle", cert)
    assert (code, err, len(traces)) == (0, [], 2), err


# Usage errors: one line, exit code 2, before any request.


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], "give trace files, or a trace store with --jaeger, --tempo or --phoenix"),
        (["--jaeger", "http://h"], "reading Jaeger needs --service or --trace-id"),
        (["--tempo", "http://h"], "reading Tempo needs --query or --trace-id"),
        (["--phoenix", "http://h"], "reading Phoenix needs --project"),
        (["--jaeger", "http://h", "--query", "{}"], "--query is for Tempo, not Jaeger"),
        (["--tempo", "http://h", "--service", "s"], "--service is for Jaeger, not Tempo"),
        (["--jaeger", "http://h", "--trace-id", "ab", "--since", "1h"], "--trace-id reads traces by id: leave out"),
        (["--jaeger", "http://h", "--trace-id", "xyz"], "--trace-id: 'xyz' is not a hex trace id"),
        (["--jaeger", "http://h/api/v3", "--service", "s", "--tags", "a=1"], "Jaeger's v3 API takes no tags"),
        (["--jaeger", "http://h", "--service", "s", "x.json"], "read trace files or --jaeger, not both"),
        (["x.json", "--service", "s"], "--service is for a trace store"),
        (["--jaeger", "ftp://h", "--service", "s"], "'ftp://h' is not an http:// or https:// URL"),
        (["--jaeger", "http://h", "--service", "s", "--since", "1h", "--end", "1"], "--since counts back from now"),
        (["--jaeger", "http://h", "--service", "s", "--start", "2", "--end", "1"], "--start must be before --end"),
    ],
)
def test_a_wrong_combination_is_one_usage_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["analyze", *argv])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("otel-agent-profiler analyze: error: "), err
    assert expected in err[0] and err[0].endswith("(see 'otel-agent-profiler analyze --help')")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--since", "soon"], "'soon' is not a duration such as 30m, 1h or 2d"),
        (["--start", "yesterday"], "'yesterday' is not a time"),
        (["--limit", "0"], "must be at least 1"),
        (["--ca-bundle", "/nonexistent/ca.pem"], "no such file"),
        (["--timeout", "0"], "must be more than 0"),
    ],
)
def test_a_bad_option_value_is_one_usage_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["analyze", "--jaeger", "http://h", "--service", "s", *argv])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0]


def test_unusable_headers_are_one_line_naming_the_variable(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(OTEL_AGENT_PROFILER_SOURCE_HEADERS, "Authorization")
    line = one_error_line(capsys, "--jaeger", "http://h", "--service", "s")
    assert line.startswith(f"otel-agent-profiler: error: {OTEL_AGENT_PROFILER_SOURCE_HEADERS}: expected key=value")


@pytest.mark.parametrize(
    ("side", "expected"),
    [
        ("jaeger://h?service=s", "a store side is STORE+URL?KEY=VALUE"),
        ("jaeger+http://h?servce=s", "unknown key 'servce'"),
        ("jaeger+http://h?since=soon&service=s", "since: 'soon' is not a duration"),
        ("tempo+http://h?service=s", "service= is for Jaeger, not Tempo"),
        ("phoenix+http://h", "reading Phoenix needs project="),
    ],
)
def test_a_wrong_diff_side_is_one_line(
    capsys: pytest.CaptureFixture[str], side: str, expected: str, otlp_file: Path
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["diff", str(otlp_file), side, "--no-progress"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("otel-agent-profiler diff: error: "), err
    assert expected in err[0]


def test_a_diff_side_store_that_cannot_be_read_is_one_line(capsys: pytest.CaptureFixture[str], otlp_file: Path) -> None:
    url = closed_port_url()
    code, _, err = run(capsys, "diff", f"jaeger+{url}?service=s", otlp_file, "--no-progress")
    assert code == 2 and len(err) == 1 and "cannot connect" in err[0], err


# The recipe in collector-config/README.md.

COLLECTOR_CONFIG = ROOT / "collector-config"


def _recipe_commands() -> list[list[str]]:
    section = (COLLECTOR_CONFIG / "README.md").read_text(encoding="utf-8").split("## Profile the stored traces", 1)[1]
    section = section.split("\n## ", 1)[0]
    return [shlex.split(line)[1:] for line in section.splitlines() if line.startswith("otel-agent-profiler ")]


def test_the_collector_config_recipe_parses_and_uses_the_ports_compose_publishes() -> None:
    from otel_agent_profiler.cli import _build_parser
    from otel_agent_profiler.cli.sources import is_store_side, parse_side

    commands = _recipe_commands()
    assert len(commands) >= 4
    compose = (COLLECTOR_CONFIG / "compose.yaml").read_text(encoding="utf-8")
    ports = set()
    for argv in commands:
        args = _build_parser().parse_args(argv)
        if args.command == "diff":
            sides = [parse_side(side) for side in (args.baseline, args.candidate) if is_store_side(side)]
            assert len(sides) == 2
            urls = [side.url for side in sides]
        else:
            urls = [args.tempo or args.jaeger]
        ports |= {int(url.rsplit(":", 1)[1]) for url in urls}
    assert ports == {3200, 16686}
    for port in ports:
        assert f'"127.0.0.1:{port}:{port}"' in compose


# Phoenix's span JSON (the real server is in test_stores_phoenix.py; this is the documented example shape).


def test_a_phoenix_span_becomes_the_otlp_span_it_was() -> None:
    from otel_agent_profiler.adapters.files import read_trace_document
    from otel_agent_profiler.stores.phoenix import otlp_span

    # The example of Phoenix's `Span` model (arize-phoenix 20.x, GET /v1/projects/{project}/spans), with an event.
    span = {
        "id": "U3BhbjoxMjM=",
        "name": "llm_call",
        "context": {"trace_id": "a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4", "span_id": "1a2b3c4d5e6f7a8b"},
        "span_kind": "LLM",
        "parent_id": "0a2b3c4d5e6f7a8b",
        "start_time": "2024-01-01T12:00:00.000123+00:00",
        "end_time": "2024-01-01T12:00:01Z",
        "status_code": "ERROR",
        "status_message": "rate limited",
        "attributes": {"llm.model_name": "gpt-4", "llm.token_count.prompt": 100, "score": 0.5, "tags": ["a", "b"]},
        "events": [{"name": "exception", "timestamp": "2024-01-01T12:00:00.5Z", "attributes": {"x": True}}],
    }
    document = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": [otlp_span(span)]}]}]}
    trace_file = read_trace_document(document, "phoenix trace")
    assert trace_file.problems == []
    (record,) = trace_file.records
    assert (record.trace_id, record.span_id, record.parent_span_id) == (
        "a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4",
        "1a2b3c4d5e6f7a8b",
        "0a2b3c4d5e6f7a8b",
    )
    assert record.start_ns == 1_704_110_400_000_123_000
    assert record.end_ns == 1_704_110_401_000_000_000
    assert (record.status.value, record.status_message) == ("ERROR", "rate limited")
    assert record.attributes == {
        "llm.model_name": "gpt-4",
        "llm.token_count.prompt": 100,
        "score": 0.5,
        "tags": ["a", "b"],
        # Phoenix moves it out of the attributes; the categories read it.
        "openinference.span.kind": "LLM",
    }
    (event,) = record.events
    assert (event.name, event.time_ns, dict(event.attributes)) == ("exception", 1_704_110_400_500_000_000, {"x": True})

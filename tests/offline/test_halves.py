"""``analyze --format json`` with half the traces profiled by a forked helper (``offline.halves``).

Each run is a subprocess: a test process may run threads (an earlier test's), and then no helper
is forked. A small driver script injects the faults into the subprocess (the helper, forked from
it, inherits them) and says on a line of its own whether the helper delivered or this process
profiled its traces itself. Every output is compared, byte for byte, with its standard error and
exit status, to the same command with one worker, which profiles everything in one process.
(Ctrl-C while the helper runs: ``test_workers.py``.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.agent_traces import generate_runs, otlp_document
from otel_agent_profiler.adapters.otlp_json_typed import records_from_json, records_of, scanned, trace_ids_of
from otel_agent_profiler.core.records import SpanRecord
from otel_agent_profiler.offline import split_reading, workers
from tests.core.test_split_traces import langchain_zero_code_document
from tests.support.paths import ROOT

pytestmark = pytest.mark.skipif(not workers.can_fork(), reason="the helper is forked")

_DRIVER = """
import os, sys
from otel_agent_profiler.offline import halves, loading, spool, split_reading
from otel_agent_profiler.cli import main

fault, report, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
if fault == "helper-dies":
    halves._helper_main = lambda *args: os._exit(1)
elif fault == "reader-dies":  # before it has read its traces (the helper forked afterwards lives)
    split_reading._reading_helper_main = lambda *args: os._exit(1)
elif fault == "splitting-bug":
    def failing_split(*args):
        raise RuntimeError("injected")
    split_reading._split = failing_split
elif fault == "file-fails":
    writes = iter(range(3))
    # The helper imports it from spool when it runs.
    spool.written_at = lambda file, data, offset: next(writes, None) is not None and os.pwrite(
        file.fileno(), data, offset) == len(data)
elif fault == "profiling-bug":
    profile_trace = loading.profile_trace
    def failing(records, *args, **kwargs):
        if records[0].trace_id in os.environ["FAILING_TRACES"].split():
            raise RuntimeError("injected")
        return profile_trace(records, *args, **kwargs)
    loading.profile_trace = failing

roads = []
read = split_reading._SplitReading.read
def read_noted(self, *args):
    mine = read(self, *args)
    roads.append("split" if mine is not None else "whole")
    return mine
split_reading._SplitReading.read = read_noted
seen = []
profiled = halves.Helper.profiled
def noted(self, report_line):
    counted = profiled(self, report_line)
    seen.append("helper" if self._here is None else "here")
    return counted
halves.Helper.profiled = noted
close = halves.Helper.close
def closed(self):
    delivered.append(self._delivered)
    close(self)
delivered = []
halves.Helper.close = closed
status = main(argv)
with open(report, "w") as out:
    out.write(" ".join(",".join(map(str, values)) for values in (seen, delivered, roads)))
sys.exit(status)
"""


def _run(
    fault: str, argv: list[str], tmp_path: Path, env: dict[str, str] | None = None
) -> tuple[bytes, str, int, str, str, str]:
    """The output, standard error and exit status of ``analyze`` run through the driver; who
    profiled the helper's traces ("helper", "here", or "" when no helper was started); how many of
    their documents the helper delivered ("" without a helper); and whether the file was read in
    halves ("split"), read whole ("whole") or neither tried ("")."""
    out, report = tmp_path / "out.json", tmp_path / "who"
    out.unlink(missing_ok=True)
    completed = subprocess.run(
        [sys.executable, "-c", _DRIVER, fault, str(report), "analyze", *argv, "-o", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=300,
    )
    written = out.read_bytes() if out.exists() else b""
    who, delivered, road = report.read_text().split(" ")
    return written, completed.stderr, completed.returncode, who, delivered, road


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spans = [span for run in generate_runs(60, seed=5) for span in run]
    path = tmp_path_factory.mktemp("halves") / "runs.json"
    path.write_text(json.dumps(otlp_document(spans)), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "fault, who, delivered, road",
    [
        ("none", "helper", None, "split"),
        ("helper-dies", "here", "0", "split"),
        ("file-fails", "helper", "3", "split"),
        # The file is then read here, and a helper forked afterwards profiles the later traces.
        ("reader-dies", "helper", None, "whole"),
        # A bug of ours in splitting the file costs time, not output.
        ("splitting-bug", "helper", None, "whole"),
    ],
)
def test_the_document_is_the_one_of_a_single_process(
    fault: str, who: str, delivered: str | None, road: str, runs: Path, tmp_path: Path
) -> None:
    """Whether the helper delivers all, nothing (it dies) or part (its file fails after 3 traces),
    or dies before it has read its traces."""
    alone = _run("none", [str(runs), "--format", "json", "--workers", "1"], tmp_path)
    assert alone[3:] == ("", "", "whole"), "one worker: no helper"
    halved = _run(fault, [str(runs), "--format", "json", "--workers", "2"], tmp_path)
    assert (halved[3], halved[5]) == (who, road)
    last_helper_delivered = halved[4].split(",")[-1]
    if delivered is None:
        assert 20 <= int(last_helper_delivered) <= 40, "about half the 60 traces, every one delivered"
    else:
        assert last_helper_delivered == delivered
    assert halved[:3] == alone[:3]
    assert len(json.loads(halved[0])["traces"]) == 60


def _spans_in_file_order(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        span
        for resource_spans in document["resourceSpans"]
        for scope_spans in resource_spans["scopeSpans"]
        for span in scope_spans["spans"]
    ]


def test_each_span_keeps_its_resource_and_scope(runs: Path, tmp_path: Path) -> None:
    """Two services, each span read in the process that profiles its trace: the traces of the
    export are spread through it and across both resources, so either process reads spans of both."""
    document = json.loads(runs.read_text(encoding="utf-8"))
    (resource_spans,) = document["resourceSpans"]
    first, second = resource_spans["scopeSpans"]
    service = {"key": "service.name", "value": {"stringValue": "tools-service"}}
    document["resourceSpans"] = [
        {"resource": resource_spans.get("resource", {}), "scopeSpans": [first]},
        {"resource": {"attributes": [service]}, "scopeSpans": [second]},
    ]
    first_traces = {span["traceId"] for span in first["spans"]}
    assert first_traces & {span["traceId"] for span in second["spans"]}, "traces across both resources"
    path = tmp_path / "two-services.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    data = path.read_bytes()
    slices = scanned(data)
    trace_ids = trace_ids_of(slices)
    theirs, traces = split_reading._later_traces(trace_ids)
    mine, their = split_reading._split(slices, trace_ids, theirs)
    here, there = records_of(mine), records_of(their)
    assert traces == 60 and 0 < len(theirs) < 60
    assert {record.trace_id for record in here}.isdisjoint(record.trace_id for record in there)
    assert {record.trace_id for record in there} == theirs

    def described(record: SpanRecord) -> tuple[str, str, str, str]:
        return record.trace_id, record.span_id, record.scope, json.dumps(record.resource, sort_keys=True)

    assert sorted(map(described, here + there)) == sorted(map(described, records_from_json(data)))
    assert any(record.resource.get("service.name") == "tools-service" for record in here)
    assert any(record.resource.get("service.name") == "tools-service" for record in there)
    alone = _run("none", [str(path), "--format", "json", "--workers", "1"], tmp_path)
    halved = _run("none", [str(path), "--format", "json", "--workers", "2"], tmp_path)
    assert halved[3:] == ("helper", halved[4], "split")
    assert halved[:3] == alone[:3]


@pytest.mark.parametrize("whose", ["the helper's", "this process's"])
def test_a_span_that_cannot_be_decoded_has_the_file_read_tolerantly(whose: str, runs: Path, tmp_path: Path) -> None:
    """One bad span, in a trace either process would read: the file is read whole by the tolerant
    reader, which names what it skipped, as with one process."""
    document = json.loads(runs.read_text(encoding="utf-8"))
    spans = _spans_in_file_order(document)
    # The trace that appears last in the file goes to the helper; the first one stays here.
    order = list(dict.fromkeys(span["traceId"] for span in spans))
    trace_id = order[-1] if whose == "the helper's" else order[0]
    bad = next(span for span in reversed(spans) if span["traceId"] == trace_id)
    bad["startTimeUnixNano"] = "not a number"
    path = tmp_path / "one-bad-span.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    alone = _run("none", [str(path), "--format", "json", "--workers", "1"], tmp_path)
    halved = _run("none", [str(path), "--format", "json", "--workers", "2"], tmp_path)
    assert halved[3:] == ("helper", halved[4], "whole"), "read here, then profiled in halves"
    assert halved[:3] == alone[:3]
    assert "skipped unreadable data" in alone[1]
    assert alone[2] != 0


def test_error_lines_come_in_the_same_order(runs: Path, tmp_path: Path) -> None:
    trace_ids = [
        trace["trace_id"] for trace in json.loads(_run("none", [str(runs), "--format", "json"], tmp_path)[0])["traces"]
    ]
    # One trace the helper profiles (the input's last) and one this process does (its first).
    failing = {"FAILING_TRACES": f"{trace_ids[-1]} {trace_ids[0]}"}
    argv = [str(runs), "--format", "json"]
    alone = _run("profiling-bug", [*argv, "--workers", "1"], tmp_path, failing)
    halved = _run("profiling-bug", [*argv, "--workers", "2"], tmp_path, failing)
    assert halved[3] == "helper"
    assert halved[:3] == alone[:3]
    assert alone[2] != 0, "a trace left out is an incomplete report"
    assert alone[1].count("could not be profiled") == 2
    assert len(json.loads(halved[0])["traces"]) == 58


def test_split_llm_calls_are_found_across_the_halves(tmp_path: Path) -> None:
    """The agent's trace comes first in the input, its calls' split copies after it: the copies go to
    the helper, so their calls are listed again here to be matched."""
    path = tmp_path / "langchain.json"
    path.write_text(json.dumps(langchain_zero_code_document()), encoding="utf-8")
    alone = _run("none", [str(path), "--format", "json", "--workers", "1"], tmp_path)
    halved = _run("none", [str(path), "--format", "json", "--workers", "2"], tmp_path)
    assert halved[3] == "helper"
    assert halved[:3] == alone[:3]
    assert len(json.loads(halved[0])["split_llm_calls"]) == 2

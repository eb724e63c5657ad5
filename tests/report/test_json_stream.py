"""JSON written a piece at a time: the bytes json.dumps(indent=2) and msgspec write; what analyze and report write."""

from __future__ import annotations

import errno
import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from benchmarks.agent_traces import generate_runs, otlp_document
from otel_agent_profiler.cli import main
from otel_agent_profiler.cli.arguments import resolve_prices
from otel_agent_profiler.core import profiles_to_dict
from otel_agent_profiler.core.findings import combined_projection, find_all
from otel_agent_profiler.core.split_traces import cross_trace_totals, find_split_llm_calls
from otel_agent_profiler.offline import load_profiles
from otel_agent_profiler.report.json_stream import Encoded, pretty, write_compact_document, write_document
from otel_agent_profiler.report.summary import build_summary, cross_run_statistics, write_summary

NESTED = {"a": [], "b": {}, "c": [1, 2.5, None, True, {"d": "e", "f": [[], {}]}], "g": 'quote " and \\ and \n'}


@pytest.mark.parametrize(
    ("items", "rest"),
    [
        ([], {}),
        ([], {"files": []}),
        ([NESTED], {"files": [NESTED], "more": {"x": 1}}),
        ([NESTED, {"trace_id": "ab", "spans": [NESTED, NESTED]}, {}], {"files": [{"path": "p", "problems": []}]}),
    ],
)
@pytest.mark.parametrize("second_process", [False, True], ids=["here", "second process"])
def test_write_document_writes_what_json_dumps_indent_2_writes(
    items: list[Any], rest: dict[str, Any], second_process: bool, tmp_path: Path
) -> None:
    out = tmp_path / "out.json"
    with out.open("wb") as stream:
        stream.write(b"")  # nothing buffered yet; what is comes first (see the next test)
        write_document(stream, "traces", iter(items), rest, second_process=second_process)
    assert out.read_text(encoding="utf-8") == json.dumps({"traces": items, **rest}, indent=2) + "\n"


def test_a_second_process_writes_after_what_was_buffered_and_the_pieces_already_encoded(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    with out.open("wb") as stream:
        stream.write(b"before\n")
        write_document(stream, "t", iter([Encoded(pretty(NESTED, 2)), NESTED]), {"r": NESTED}, second_process=True)
        stream.write(b"after\n")
    expected = "before\n" + json.dumps({"t": [NESTED, NESTED], "r": NESTED}, indent=2) + "\nafter\n"
    assert out.read_text(encoding="utf-8") == expected


def test_a_stream_without_a_file_descriptor_is_written_here() -> None:
    stream = io.BytesIO()
    write_document(stream, "traces", iter([NESTED]), {}, second_process=True)
    assert json.loads(stream.getvalue()) == {"traces": [NESTED]}


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_what_the_second_process_cannot_write_raises_its_error_here() -> None:
    with open("/dev/full", "wb") as stream, pytest.raises(OSError) as raised:
        write_document(stream, "traces", iter([NESTED] * 100), {}, second_process=True)
    assert raised.value.errno == errno.ENOSPC


def test_an_error_building_the_document_stops_the_second_process(tmp_path: Path) -> None:
    def items() -> Iterator[Any]:
        yield NESTED
        raise KeyError("built wrong")

    with (tmp_path / "out.json").open("wb") as stream, pytest.raises(KeyError):
        write_document(stream, "traces", items(), {}, second_process=True)


def test_pretty_indents_nested_lines_only() -> None:
    assert pretty({"a": [1]}, 1) == b'{\n    "a": [\n      1\n    ]\n  }'
    assert pretty([], 3) == b"[]"


def test_non_ascii_and_float_spellings_parse_back_equal(tmp_path: Path) -> None:
    document = {"name": "Zürich ☕", "share": 6.232420735410795e-05, "big": 1e16}
    out = tmp_path / "out.json"
    with out.open("wb") as stream:
        write_document(stream, "traces", iter([document]), {})
    assert json.loads(out.read_bytes()) == {"traces": [document]}


@pytest.fixture
def many_traces(tmp_path: Path) -> Path:
    spans = [span for run in generate_runs(40, seed=5) for span in run]
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(otlp_document(spans)), encoding="utf-8")
    return path


def _in_memory_document(path: Path, with_findings: bool) -> dict[str, Any]:
    """The document as analyze built it before it was streamed: every trace's dict at once."""
    # Priced as the command prices them: the built-in table, nothing from the environment.
    loaded = load_profiles([str(path)], prices=resolve_prices(None, environ={}))
    document = profiles_to_dict(loaded.profiles)
    if with_findings:
        by_id = {profile.trace_id: profile for profile in loaded.profiles}
        findings = {profile.trace_id: find_all(profile) for profile in loaded.profiles}
        for trace in document["traces"]:
            found = findings[trace["trace_id"]]
            trace["findings"] = [finding.to_dict() for finding in found]
            trace["combined_projection"] = combined_projection(by_id[trace["trace_id"]], found).to_dict()
    document["files"] = loaded.file_dicts()
    splits = find_split_llm_calls(loaded.profiles)
    document["totals"] = cross_trace_totals(loaded.profiles, splits).to_dict()
    document["split_llm_calls"] = [split.to_dict() for split in splits]
    # Through the same JSON round trip (tuples become lists).
    return json.loads(json.dumps(document))


@pytest.mark.parametrize("with_findings", [False, True])
def test_analyze_json_streamed_to_a_file_equals_the_in_memory_document(
    many_traces: Path, tmp_path: Path, with_findings: bool
) -> None:
    out = tmp_path / "report.json"
    flags = ["--findings"] if with_findings else []
    assert main(["analyze", "--format", "json", *flags, "--output", str(out), str(many_traces)]) == 0
    written = json.loads(out.read_bytes())
    assert len(written["traces"]) == 40
    assert written == _in_memory_document(many_traces, with_findings)
    # Pretty printed as before: two spaces per level.
    assert out.read_text(encoding="utf-8").startswith('{\n  "traces": [\n    {\n      "trace_id": ')


def test_analyze_json_indented_by_a_second_process_is_the_same_bytes(many_traces: Path, tmp_path: Path) -> None:
    written = {}
    for workers in ("1", "2"):
        out = tmp_path / f"report-{workers}.json"
        assert main(["analyze", "--format", "json", "--workers", workers, "-o", str(out), str(many_traces)]) == 0
        written[workers] = out.read_bytes()
    assert written["2"] == written["1"]


def test_analyze_json_streamed_to_standard_output_equals_the_in_memory_document(
    many_traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["analyze", "--format", "json", str(many_traces)]) == 0
    assert json.loads(capsys.readouterr().out) == _in_memory_document(many_traces, False)


def test_analyze_json_of_no_traces_is_an_empty_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "empty.json"
    path.write_text('{"resourceSpans": []}', encoding="utf-8")
    main(["analyze", "--format", "json", str(path)])
    document = json.loads(capsys.readouterr().out)
    assert document["traces"] == []
    assert [file["path"] for file in document["files"]] == [str(path)]


@pytest.mark.parametrize(
    "document",
    [
        {"traces": []},
        {"a": 1, "traces": [NESTED, {}], "b": NESTED},
        {"traces": [NESTED], "files": [], "none": None},
    ],
)
def test_write_compact_document_writes_what_msgspec_encode_writes(document: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    with out.open("wb") as stream:
        write_compact_document(stream, {**document, "traces": iter(document["traces"])}, "traces")
    assert out.read_bytes() == msgspec.json.encode(document) + b"\n"


def test_the_summary_written_a_trace_at_a_time_is_the_built_summary(many_traces: Path, tmp_path: Path) -> None:
    loaded = load_profiles([str(many_traces)])
    findings = {profile.trace_id: find_all(profile) for profile in loaded.profiles}
    options: dict[str, Any] = {
        "selected_trace_id": loaded.profiles[3].trace_id,
        "statistics": cross_run_statistics(loaded.profiles),
        "files": loaded.file_dicts(),
        "detail_trace_ids": {loaded.profiles[3].trace_id, loaded.profiles[7].trace_id},
    }
    out = tmp_path / "summary.json"
    with out.open("wb") as stream:
        write_summary(stream, loaded.profiles, findings, **options)
    assert out.read_bytes() == msgspec.json.encode(build_summary(loaded.profiles, findings, **options)) + b"\n"


def test_a_second_process_writes_many_small_pieces(tmp_path: Path) -> None:
    items = [{} for _ in range(5_000)]
    out = tmp_path / "out.json"
    with out.open("wb") as stream:
        write_document(stream, "traces", iter(items), {}, second_process=True)
    assert out.read_text(encoding="utf-8") == json.dumps({"traces": items}, indent=2) + "\n"

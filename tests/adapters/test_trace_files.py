"""Trace files as found on disk: format detection, and bad inputs.

Every bad input must give one clear line naming the file, lose no readable data, and never
raise out of ``read_trace_file``.
"""

from __future__ import annotations

import gzip
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from otel_agent_profiler.adapters import (
    JAEGER_JSON,
    OTLP_JSON,
    OTLP_JSON_LINES,
    TraceFile,
    parse_trace_bytes,
    read_trace_file,
)

TRACE = "5b8efff798038103d269b633813fc60c"


def otlp_span(span_id: str, parent: str | None = None, start: int = 1_000_000, end: int = 2_000_000) -> dict[str, Any]:
    span: dict[str, Any] = {
        "traceId": TRACE,
        "spanId": span_id,
        "name": f"span {span_id}",
        "kind": 1,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(end),
    }
    if parent:
        span["parentSpanId"] = parent
    return span


def otlp_doc(*spans: dict[str, Any]) -> dict[str, Any]:
    return {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": list(spans)}]}]}


def sid(n: int) -> str:
    return f"{n:016x}"


GOOD_DOC = otlp_doc(otlp_span(sid(1)), otlp_span(sid(2), sid(1)), otlp_span(sid(3), sid(1)))
JAEGER_DOC = {
    "data": [
        {
            "traceID": "d269b633813fc60c",
            "spans": [
                {
                    "traceID": "d269b633813fc60c",
                    "spanID": sid(1),
                    "operationName": "root",
                    "references": [],
                    "startTime": 1000,
                    "duration": 50,
                    "tags": [],
                    "logs": [],
                    "processID": "p1",
                }
            ],
            "processes": {"p1": {"serviceName": "svc", "tags": []}},
        }
    ]
}


def write(tmp_path: Path, name: str, content: bytes | str) -> Path:
    path = tmp_path / name
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_bytes(content)
    return path


def assert_one_clear_line(trace_file: TraceFile, path: Path | str, *hints: str) -> str:
    """The file's error line exists, is a single line, names the file and mentions the hints."""
    assert not trace_file.ok
    assert trace_file.problems
    line = trace_file.error_line()
    assert line is not None
    assert "\n" not in line and "\r" not in line
    assert str(path) in line
    lowered = line.lower()
    for hint in hints:
        assert any(alternative in lowered for alternative in hint.split("|")), (hint, line)
    return line


def span_ids(trace_file: TraceFile) -> set[str]:
    return {r.span_id for r in trace_file.records}


# --------------------------------------------------------------------------- detection


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        pytest.param(json.dumps(GOOD_DOC), OTLP_JSON, id="otlp-compact"),
        pytest.param(json.dumps(GOOD_DOC, indent=2), OTLP_JSON, id="otlp-pretty"),
        pytest.param(
            "\n".join(json.dumps(otlp_doc(s)) for s in GOOD_DOC["resourceSpans"][0]["scopeSpans"][0]["spans"]) + "\n",
            OTLP_JSON_LINES,
            id="otlp-jsonl",
        ),
        pytest.param(json.dumps(JAEGER_DOC), JAEGER_JSON, id="jaeger"),
        pytest.param(json.dumps(JAEGER_DOC, indent=4), JAEGER_JSON, id="jaeger-pretty"),
    ],
)
def test_format_is_detected_whatever_the_file_name(tmp_path: Path, content: str, expected: str) -> None:
    for name in ("trace.json", "trace.jsonl", "trace.txt", "no-extension"):
        trace_file = read_trace_file(write(tmp_path, name, content))
        assert trace_file.format == expected, name
        assert trace_file.ok, trace_file.problems
        assert trace_file.records
        assert trace_file.path == str(tmp_path / name)


def test_utf8_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = write(tmp_path, "bom.json", b"\xef\xbb\xbf" + json.dumps(GOOD_DOC).encode())
    trace_file = read_trace_file(path)
    assert trace_file.ok
    assert span_ids(trace_file) == {sid(1), sid(2), sid(3)}


def test_non_ascii_names_are_read(tmp_path: Path) -> None:
    doc = otlp_doc(otlp_span(sid(1)) | {"name": "récupérer 文档 🔎"})
    trace_file = read_trace_file(write(tmp_path, "utf8.json", json.dumps(doc, ensure_ascii=False)))
    assert trace_file.ok
    assert trace_file.records[0].name == "récupérer 文档 🔎"


def test_path_objects_and_strings_both_work(tmp_path: Path) -> None:
    path = write(tmp_path, "t.json", json.dumps(GOOD_DOC))
    assert span_ids(read_trace_file(path)) == span_ids(read_trace_file(str(path)))


def test_dash_reads_standard_input(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_stdin = io.TextIOWrapper(io.BytesIO(json.dumps(GOOD_DOC).encode()), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", fake_stdin)
    trace_file = read_trace_file("-")
    assert trace_file.path == "-"
    assert trace_file.format == OTLP_JSON
    assert span_ids(trace_file) == {sid(1), sid(2), sid(3)}


# --------------------------------------------------------------------------- bad whole files


GZIPPED = gzip.compress(json.dumps(GOOD_DOC).encode())


@pytest.mark.parametrize(
    ("name", "content", "hints"),
    [
        pytest.param("empty.json", b"", ["empty"], id="empty"),
        pytest.param("blank.json", b"  \n\t \r\n  \n", ["empty"], id="whitespace-only"),
        pytest.param("trace.json.gz", GZIPPED, ["utf-8|binary|compressed"], id="gzip"),
        pytest.param("latin1.json", '{"name": "caf\xe9"}'.encode("latin-1"), ["utf-8"], id="latin-1"),
        pytest.param("random.bin", bytes(range(256)) * 4, ["utf-8|binary"], id="binary"),
        pytest.param("foo.json", b'{"foo": 1}', ["not otlp|not a trace|jaeger"], id="other-object"),
        pytest.param("list.json", b"[1, 2, 3]", ["not otlp|not a trace|jaeger"], id="list"),
        pytest.param("spans-list.json", json.dumps([otlp_span(sid(1))]).encode(), ["not otlp|jaeger"], id="bare-spans"),
        pytest.param("str.json", b'"resourceSpans"', ["not otlp|jaeger"], id="string"),
        pytest.param("num.json", b"42", ["not otlp|jaeger"], id="number"),
        pytest.param("null.json", b"null", ["not otlp|jaeger"], id="null"),
        pytest.param("metrics.json", b'{"resourceMetrics": []}', ["metric"], id="otlp-metrics"),
        pytest.param("logs.json", b'{"resourceLogs": []}', ["log"], id="otlp-logs"),
        pytest.param("data.json", b'{"data": {"spans": []}}', ["not otlp|jaeger"], id="data-not-a-list"),
        pytest.param("text.txt", b"hello, this is not json\nat all\n", ["json"], id="plain-text"),
        pytest.param("html.json", b"<html><body>502 Bad Gateway</body></html>", ["json"], id="html"),
        pytest.param("deep.json", b"[" * 100_000 + b"]" * 100_000, [], id="deeply-nested"),
        pytest.param("deep-broken.json", b"[" * 100_000, [], id="deeply-nested-truncated"),
    ],
)
def test_unreadable_file_gets_one_clear_line(tmp_path: Path, name: str, content: bytes, hints: list[str]) -> None:
    path = write(tmp_path, name, content)
    trace_file = read_trace_file(path)
    assert trace_file.records == []
    assert_one_clear_line(trace_file, path, *hints)


@pytest.mark.parametrize("indent", [None, 2])
def test_truncated_single_document(tmp_path: Path, indent: int | None) -> None:
    text = json.dumps(GOOD_DOC, indent=indent)
    path = write(tmp_path, "cut.json", text[: len(text) * 2 // 3])
    trace_file = read_trace_file(path)
    assert_one_clear_line(trace_file, path, "truncated|incomplete|ends unexpectedly")


def test_malformed_in_the_middle_of_a_pretty_document(tmp_path: Path) -> None:
    lines = json.dumps(GOOD_DOC, indent=2).split("\n")
    middle = len(lines) // 2
    lines[middle] = lines[middle] + " @@@"
    path = write(tmp_path, "broken.json", "\n".join(lines))
    trace_file = read_trace_file(path)
    line = assert_one_clear_line(trace_file, path, "malformed|invalid|expecting")
    # It says where: the line number of the damage.
    assert str(middle + 1) in line
    assert "truncated" not in line.lower()


def test_nonexistent_path(tmp_path: Path) -> None:
    path = tmp_path / "does-not-exist.json"
    trace_file = read_trace_file(path)
    assert trace_file.records == []
    assert_one_clear_line(trace_file, path, "no such file|not found|does not exist|cannot read")


def test_directory(tmp_path: Path) -> None:
    path = tmp_path / "a-directory"
    path.mkdir()
    trace_file = read_trace_file(path)
    assert trace_file.records == []
    assert_one_clear_line(trace_file, path, "directory")


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_unreadable_permissions(tmp_path: Path) -> None:
    import os

    path = write(tmp_path, "secret.json", json.dumps(GOOD_DOC))
    path.chmod(0)
    try:
        if os.access(path, os.R_OK):
            pytest.skip("running as a user that can read anything")
        trace_file = read_trace_file(path)
        assert trace_file.records == []
        assert_one_clear_line(trace_file, path, "permission|cannot read")
    finally:
        path.chmod(0o644)


def test_jaeger_export_with_no_spans(tmp_path: Path) -> None:
    path = write(tmp_path, "jaeger-empty.json", '{"data": []}')
    trace_file = read_trace_file(path)
    assert trace_file.records == []
    assert_one_clear_line(trace_file, path, "no spans")


def test_otlp_document_with_no_spans(tmp_path: Path) -> None:
    path = write(tmp_path, "otlp-empty.json", '{"resourceSpans": [{"scopeSpans": [{"spans": []}]}]}')
    trace_file = read_trace_file(path)
    assert trace_file.records == []
    assert_one_clear_line(trace_file, path, "no spans")


# --------------------------------------------------------------------------- partly readable files


def jsonl_lines() -> list[str]:
    return [
        json.dumps(otlp_doc(otlp_span(sid(1)))),
        json.dumps(otlp_doc(otlp_span(sid(2), sid(1)))),
        json.dumps(otlp_doc(otlp_span(sid(3), sid(1)))),
        json.dumps(otlp_doc(otlp_span(sid(4), sid(1)))),
    ]


def test_jsonl_with_a_truncated_last_line_keeps_the_other_lines(tmp_path: Path) -> None:
    lines = jsonl_lines()
    lines[-1] = lines[-1][: len(lines[-1]) // 2]
    path = write(tmp_path, "collector.jsonl", "\n".join(lines))
    trace_file = read_trace_file(path)
    assert trace_file.format == OTLP_JSON_LINES
    assert span_ids(trace_file) == {sid(1), sid(2), sid(3)}
    line = assert_one_clear_line(trace_file, path, "truncated|incomplete")
    assert "4" in line  # the line number


def test_jsonl_with_a_malformed_middle_line_keeps_the_other_lines(tmp_path: Path) -> None:
    lines = jsonl_lines()
    lines[1] = lines[1].replace('"spanId"', "spanId", 1)
    path = write(tmp_path, "collector.jsonl", "\n".join(lines) + "\n")
    trace_file = read_trace_file(path)
    assert trace_file.format == OTLP_JSON_LINES
    assert span_ids(trace_file) == {sid(1), sid(3), sid(4)}
    line = assert_one_clear_line(trace_file, path, "line 2")
    assert "truncated" not in line.lower()


def test_jsonl_with_a_cut_middle_line_keeps_the_other_lines(tmp_path: Path) -> None:
    # A writer that crashed mid-line and was restarted.
    lines = jsonl_lines()
    lines[2] = lines[2][:40]
    path = write(tmp_path, "collector.jsonl", "\n".join(lines) + "\n")
    trace_file = read_trace_file(path)
    assert span_ids(trace_file) == {sid(1), sid(2), sid(4)}
    assert_one_clear_line(trace_file, path, "line 3")


def test_jsonl_with_a_malformed_first_line_keeps_the_other_lines(tmp_path: Path) -> None:
    lines = jsonl_lines()
    lines[0] = lines[0][:-5] + "@@@@@"
    path = write(tmp_path, "collector.jsonl", "\n".join(lines) + "\n")
    trace_file = read_trace_file(path)
    assert span_ids(trace_file) == {sid(2), sid(3), sid(4)}
    assert_one_clear_line(trace_file, path, "line 1")


def test_jsonl_with_a_line_that_is_not_traces_keeps_the_other_lines(tmp_path: Path) -> None:
    lines = jsonl_lines()
    lines[2] = '{"foo": 1}'
    path = write(tmp_path, "collector.jsonl", "\n".join(lines) + "\n")
    trace_file = read_trace_file(path)
    assert span_ids(trace_file) == {sid(1), sid(2), sid(4)}
    assert_one_clear_line(trace_file, path, "line 3")


def test_jsonl_with_bad_spans_on_several_lines(tmp_path: Path) -> None:
    lines = [
        json.dumps(otlp_doc(otlp_span(sid(1)), otlp_span("not-hex"))),
        json.dumps(otlp_doc(otlp_span(sid(2), sid(1)) | {"startTimeUnixNano": "soon"})),
        json.dumps(otlp_doc(otlp_span(sid(3), sid(1)))),
    ]
    path = write(tmp_path, "spans.jsonl", "\n".join(lines) + "\n")
    trace_file = read_trace_file(path)
    assert span_ids(trace_file) == {sid(1), sid(3)}
    assert len(trace_file.problems) == 2
    assert_one_clear_line(trace_file, path, "line 1", "line 2")


def test_document_with_one_bad_span_keeps_the_others(tmp_path: Path) -> None:
    doc = otlp_doc(otlp_span(sid(1)), otlp_span(sid(2), sid(1)), otlp_span(sid(3), sid(1)))
    del doc["resourceSpans"][0]["scopeSpans"][0]["spans"][1]["spanId"]
    path = write(tmp_path, "one-bad.json", json.dumps(doc, indent=1))
    trace_file = read_trace_file(path)
    assert trace_file.format == OTLP_JSON
    assert span_ids(trace_file) == {sid(1), sid(3)}
    line = assert_one_clear_line(trace_file, path, "spanid")
    assert "2" in line  # two spans were still read


def test_one_bad_resource_keeps_the_other_resources(tmp_path: Path) -> None:
    doc = {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"value": {"stringValue": "no key"}}]},
                "scopeSpans": [{"spans": [otlp_span(sid(9))]}],
            },
            {"resource": {"attributes": []}, "scopeSpans": [{"spans": [otlp_span(sid(1))]}]},
            "not an object",
        ]
    }
    path = write(tmp_path, "res.json", json.dumps(doc))
    trace_file = read_trace_file(path)
    assert sid(1) in span_ids(trace_file)
    assert_one_clear_line(trace_file, path)


# --------------------------------------------------------------------------- never raises


def _all_prefixes(data: bytes) -> list[bytes]:
    return [data[:i] for i in range(len(data) + 1)]


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(json.dumps(GOOD_DOC).encode(), id="otlp"),
        pytest.param(json.dumps(JAEGER_DOC).encode(), id="jaeger"),
        pytest.param(("\n".join(jsonl_lines()) + "\n").encode(), id="jsonl"),
    ],
)
def test_no_truncation_of_a_good_file_raises(content: bytes) -> None:
    for prefix in _all_prefixes(content):
        trace_file = parse_trace_bytes(prefix, "cut.json")
        if prefix.strip() and not trace_file.ok:
            line = trace_file.error_line()
            assert line is not None and line.startswith("cut.json") and "\n" not in line
        if not trace_file.records:
            assert not trace_file.ok, prefix


def test_no_single_byte_corruption_raises() -> None:
    import random

    rng = random.Random(1234)
    for content in (json.dumps(GOOD_DOC).encode(), json.dumps(JAEGER_DOC).encode()):
        for _ in range(1500):
            data = bytearray(content)
            position = rng.randrange(len(data))
            data[position] = rng.choice(b'{}[]",:0123456789abcdefxyz \n\x00\xff-.eE')
            trace_file = parse_trace_bytes(bytes(data), "corrupt.json")
            if not trace_file.ok:
                line = trace_file.error_line()
                assert line is not None and "corrupt.json" in line and "\n" not in line


@pytest.mark.parametrize(
    "document",
    [
        {"resourceSpans": None},
        {"resourceSpans": [None]},
        {"resourceSpans": [{"scopeSpans": None}]},
        {"resourceSpans": [{"scopeSpans": [None, 1, "x"]}]},
        {"resourceSpans": [{"scopeSpans": [{"spans": "abc"}]}]},
        {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": [], "spanId": {}}]}]}]},
        {"resourceSpans": [{"resource": [], "scopeSpans": []}]},
        {"resourceSpans": [{"resource": {"attributes": "x"}, "scopeSpans": []}]},
        {"resourceSpans": [{"scopeSpans": [{"spans": [otlp_span(sid(1)) | {"events": [None]}]}]}]},
        {"resourceSpans": [{"scopeSpans": [{"spans": [otlp_span(sid(1)) | {"links": [{"traceId": 1}]}]}]}]},
        {"resourceSpans": [{"scopeSpans": [{"spans": [otlp_span(sid(1)) | {"status": "bad"}]}]}]},
        {"resourceSpans": [{"scopeSpans": [{"spans": [otlp_span(sid(1)) | {"attributes": [{"key": "k"}]}]}]}]},
        {"resourceSpans": [{"scopeSpans": [{"spans": [otlp_span(sid(1)) | {"attributes": [None]}]}]}]},
        {"data": [{"spans": None}]},
        {"data": [{"spans": [None, 1, []], "processes": None}]},
        {"data": [{"spans": [{"spanID": 5, "traceID": None}]}]},
        {"data": [{"spans": [{"traceID": "ab", "spanID": "cd", "startTime": 1, "duration": 1, "logs": [None]}]}]},
        {"data": [{"spans": [{"traceID": "ab", "spanID": "cd", "startTime": 1, "duration": 1, "tags": [1]}]}]},
        {"data": [{"spans": [{"traceID": "ab", "spanID": "cd", "startTime": 1, "duration": 1, "references": [1]}]}]},
        {"data": [{"spans": [], "processes": {"p1": "x"}}]},
    ],
)
def test_odd_shapes_never_raise(document: dict[str, Any]) -> None:
    trace_file = parse_trace_bytes(json.dumps(document).encode(), "odd.json")
    if not trace_file.records:
        assert not trace_file.ok
    if not trace_file.ok:
        line = trace_file.error_line()
        assert line is not None and "odd.json" in line and "\n" not in line

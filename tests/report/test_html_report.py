"""The HTML report (``otel_agent_profiler.report.html``), its summary JSON, progress bar and ``report`` command.

The page's script is exercised in a real browser by ``test_html_report_browser.py``; here the
page is checked as text and through the JSON it embeds.
"""

from __future__ import annotations

import io
import itertools
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from otel_agent_profiler.adapters.files import parse_trace_bytes, read_trace_file
from otel_agent_profiler.cli import main
from otel_agent_profiler.core import profile_records
from otel_agent_profiler.core.findings import Finding, find_all
from otel_agent_profiler.core.profile import TraceProfile
from otel_agent_profiler.report.html import (
    SPAN_FIELDS,
    flame_rows,
    render_html,
    script_json,
    select_trace,
)
from otel_agent_profiler.report.progress import Progress, progress_enabled
from otel_agent_profiler.report.summary import build_summary, cross_run_statistics
from tests.support.paths import ROOT

EXAMPLE = ROOT / "examples" / "traces" / "research-agent.otlp.json"

from benchmarks.agent_traces import generate_runs, one_big_trace_document, otlp_document  # noqa: E402

#: Span names that would break out of the page if they were not escaped.
HOSTILE_NAMES = (
    "</script><script>document.body.setAttribute('data-pwned','1')</script>",
    "<img src=x onerror=\"document.body.setAttribute('data-pwned','2')\">",
    "a & b \u2028 <!-- -->",
)


def runs_document(run_count: int, seed: int = 7, hostile: bool = False) -> dict[str, Any]:
    """OTLP JSON of ``run_count`` synthetic runs; with ``hostile``, some span names are HTML."""
    runs = generate_runs(run_count, seed=seed)
    if hostile:
        for run, name in zip(runs, HOSTILE_NAMES, strict=False):
            run[-1]["name"] = name
            run[0]["name"] = name
    return otlp_document([span for run in runs for span in run])


def profiles_of(document: dict[str, Any]) -> list[TraceProfile]:
    trace_file = parse_trace_bytes(json.dumps(document).encode(), "test.json")
    assert trace_file.ok, trace_file.problems
    return profile_records(trace_file.records)


def findings_of(profiles: list[TraceProfile]) -> dict[str, list[Finding]]:
    return {p.trace_id: find_all(p) for p in profiles}


def embedded_data(page: str) -> dict[str, Any]:
    match = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S)
    assert match is not None
    data: dict[str, Any] = json.loads(match.group(1))
    return data


def span_rows(data: dict[str, Any], trace_id: str) -> list[dict[str, Any]]:
    return [dict(zip(data["span_fields"], row, strict=True)) for row in data["traces"][trace_id]["spans"]]


@pytest.fixture(scope="module")
def runs() -> list[TraceProfile]:
    return profiles_of(runs_document(12, hostile=True))


@pytest.fixture(scope="module")
def page(runs: list[TraceProfile]) -> str:
    return render_html(runs, findings_of(runs), statistics=cross_run_statistics(runs))


def test_page_has_every_view_and_no_external_resource(page: str) -> None:
    for element_id in (
        "report-data",
        "trace-table",
        "trace-facts",
        "category-chart",
        "findings",
        "waterfall",
        "flame",
        "category-percentiles",
        "operation-percentiles",
        "concurrency-chart",
        "sequence-table",
        "ngram-table",
    ):
        assert f'id="{element_id}"' in page, element_id
    assert page.startswith("<!DOCTYPE html>")
    # Self-contained: no linked stylesheet, no script or image fetched, no URL but the SVG namespace.
    assert "<link" not in page
    assert not re.search(r"<script[^>]* src=", page)
    assert not re.search(r"<img[^>]* src=[\"']?https?:", page)
    assert set(re.findall(r"https?://[^\s\"'<>)]+", page)) <= {"http://www.w3.org/2000/svg"}
    assert "default-src 'none'" in page  # and the content security policy forbids fetching anything


def test_the_slowest_trace_is_shown_with_every_span_once(runs: list[TraceProfile], page: str) -> None:
    data = embedded_data(page)
    slowest = max(runs, key=lambda p: p.duration_ns)
    assert data["selected"] == slowest.trace_id
    rows = span_rows(data, slowest.trace_id)
    assert [row["span_id"] for row in rows] == [span.span_id for span in slowest.spans]
    assert len({row["span_id"] for row in rows}) == slowest.span_count
    assert data["span_fields"] == list(SPAN_FIELDS)
    for row, span in zip(rows, slowest.spans, strict=True):
        assert row["on_critical_path"] == (1 if span.on_critical_path else 0)
        assert row["category"] == span.category
        assert row["duration_ms"] == pytest.approx(span.duration_ns / 1e6, abs=1e-6)
        assert row["critical_path_ms"] == pytest.approx(span.critical_path_ns / 1e6, abs=1e-6)
    assert any(row["on_critical_path"] for row in rows)
    assert not all(row["on_critical_path"] for row in rows)
    # Every trace is small enough to be embedded, and listed in the table slowest first.
    assert set(data["traces"]) == {p.trace_id for p in runs}
    listed = re.findall(r'<tr data-trace-id="([0-9a-f]+)"', page)
    assert listed == [p.trace_id for p in sorted(runs, key=lambda p: -p.duration_ns)]


def test_critical_path_spans_are_marked_and_findings_carry_savings(runs: list[TraceProfile], page: str) -> None:
    data = embedded_data(page)
    for profile in runs:
        trace = data["traces"][profile.trace_id]
        marked = {row["span_id"] for row in span_rows(data, profile.trace_id) if row["on_critical_path"]}
        assert marked == {span.span_id for span in profile.spans if span.on_critical_path}
        expected = find_all(profile)
        assert [f["title"] for f in trace["findings"]] == [f.title for f in expected]
        assert [f["saving_ms"] for f in trace["findings"]] == [pytest.approx(f.saving_ns / 1e6) for f in expected]
        shares = [trace["categories"][c][2] for c in data["categories"]]
        assert sum(shares) == pytest.approx(1.0, abs=1e-4)


def test_flame_rows_never_overlap(runs: list[TraceProfile]) -> None:
    for profile in runs:
        rows, count = flame_rows(profile)
        assert count >= 1 and max(rows) == count - 1
        by_row: dict[int, list[tuple[int, int, int]]] = {}
        for i, span in enumerate(profile.spans):
            by_row.setdefault(rows[i], []).append((span.start_ns, span.end_ns, i))
        for intervals in by_row.values():
            intervals.sort()
            for (_, end, _), (start, _, _) in itertools.pairwise(intervals):
                assert start >= end


def test_text_from_traces_is_escaped(runs: list[TraceProfile], page: str) -> None:
    # Only the two script elements of the page itself.
    assert page.count("<script") == 2
    assert page.count("</script>") == 2
    assert "<img" not in page
    assert "<!--" not in page
    # The table writes names as escaped HTML text ...
    assert "&lt;/script&gt;&lt;script&gt;" in page
    # ... and the embedded JSON gives them back unchanged.
    data = embedded_data(page)
    names = {row["name"] for trace_id in data["traces"] for row in span_rows(data, trace_id)}
    assert set(HOSTILE_NAMES) <= names
    assert script_json({"a": "</script>&\u2028"}) == '{"a":"\\u003c/script\\u003e\\u0026\\u2028"}'
    # The title is escaped too.
    titled = render_html(runs, {}, title="<b>x</b>")
    assert "<title>&lt;b&gt;x&lt;/b&gt;</title>" in titled


def test_choosing_a_trace(runs: list[TraceProfile]) -> None:
    fastest = min(runs, key=lambda p: p.duration_ns)
    page = render_html(runs, {}, selected_trace_id=fastest.trace_id)
    assert embedded_data(page)["selected"] == fastest.trace_id
    assert select_trace(runs, fastest.trace_id.upper()) is fastest
    with pytest.raises(KeyError):
        select_trace(runs, "12345")
    with pytest.raises(ValueError):
        select_trace([], None)


def test_one_trace_has_no_cross_run_section() -> None:
    profiles = profile_records(read_trace_file(EXAMPLE).records)
    assert cross_run_statistics(profiles) is None
    page = render_html(profiles, findings_of(profiles))
    assert 'id="cross-run"' not in page
    assert embedded_data(page)["statistics"] is None


def test_span_budget_keeps_the_selected_trace_and_leaves_others_out(runs: list[TraceProfile]) -> None:
    smallest = min(runs, key=lambda p: p.span_count)
    page = render_html(runs, {}, selected_trace_id=smallest.trace_id, max_detail_spans=1)
    data = embedded_data(page)
    assert list(data["traces"]) == [smallest.trace_id]
    assert page.count('class="nodata"') == len(runs) - 1


def test_a_2000_span_trace_fits_the_size_budget() -> None:
    profiles = profiles_of(one_big_trace_document(2000))
    assert len(profiles) == 1 and profiles[0].span_count >= 2000
    page = render_html(profiles, findings_of(profiles))
    size = len(page.encode("utf-8"))
    assert size < 5_000_000, size
    rows = span_rows(embedded_data(page), profiles[0].trace_id)
    assert len(rows) == profiles[0].span_count


def test_summary_json_carries_the_numbers_of_the_report(runs: list[TraceProfile], page: str) -> None:
    findings = findings_of(runs)
    statistics = cross_run_statistics(runs)
    assert statistics is not None
    summary = build_summary(runs, findings, statistics=statistics, files=[{"path": "x", "spans": 1}])
    text = json.dumps(summary, allow_nan=False)  # plain JSON: no NaN
    summary = json.loads(text)
    assert summary["format"] == "otel-agent-profiler.report-summary" and summary["version"] == 2
    data = embedded_data(page)
    assert summary["selected_trace_id"] == data["selected"]
    assert [t["trace_id"] for t in summary["traces"]] == re.findall(r'<tr data-trace-id="([0-9a-f]+)"', page)
    for trace in summary["traces"]:
        shown = data["traces"][trace["trace_id"]]
        assert trace["duration_ms"] == pytest.approx(shown["duration_ms"])
        assert trace["critical_path_ms"] == pytest.approx(shown["critical_path_ms"])
        assert len(trace["spans"]) == len(shown["spans"]) == trace["span_count"]
        assert [f["saving_ns"] / 1e6 for f in trace["findings"]] == pytest.approx(
            [f["saving_ms"] for f in shown["findings"]]
        )
        for category, (self_ms, cp_ms, share, count) in shown["categories"].items():
            assert trace["categories"][category]["self_time_ms"] == pytest.approx(self_ms)
            assert trace["categories"][category]["critical_path_ms"] == pytest.approx(cp_ms)
            assert trace["categories"][category]["critical_path_share"] == pytest.approx(share, abs=1e-6)
            assert trace["categories"][category]["count"] == count
    stats = summary["statistics"]
    assert set(stats) == {
        *("categories", "operations", "concurrency", "sequences", "ngrams"),
        *("throughput", "concurrency_spikes", "forecasts"),
    }
    assert summary["prefix_cache_candidates"] is None  # opt-in
    charted = data["statistics"]
    llm = next(r for r in stats["categories"] if r["category"] == "llm" and r["metric"] == "duration_ms")
    shown_llm = next(r for r in charted["categories"] if r["category"] == "llm")
    assert shown_llm["p90"] == pytest.approx(llm["p90"])
    assert sum(r["fraction"] for r in stats["concurrency"]) == pytest.approx(1.0)
    assert [r["level"] for r in charted["concurrency"]] == [r["level"] for r in stats["concurrency"]]
    # The page lists the sequences several runs took; the summary keeps every one of the top ten.
    repeated = [r["sequence"] for r in stats["sequences"] if r["count"] > 1]
    assert [r["sequence"] for r in charted["sequences"]] == repeated


def test_progress_bar_draws_only_when_enabled() -> None:
    quiet = io.StringIO()
    bar = Progress(False, quiet)
    bar.start("reading", 3)
    bar.advance()
    bar.close()
    assert quiet.getvalue() == ""
    assert progress_enabled(None, io.StringIO()) is False
    assert progress_enabled(True, io.StringIO()) is True
    assert progress_enabled(False, sys.stderr) is False

    out = io.StringIO()
    bar = Progress(True, out)
    bar.start("reading", 4)
    for _ in range(4):
        bar.advance(detail="file.json")
    text = out.getvalue()
    assert "[----------------------------] 0/4 reading" in text
    assert "[############################] 4/4 reading  file.json" in text
    bar.close()
    assert out.getvalue().endswith("\r")
    assert "\n" not in out.getvalue()


# --------------------------------------------------------------------------------------------
# The command line


@pytest.fixture
def runs_file(tmp_path: Path) -> Path:
    path = tmp_path / "runs.otlp.json"
    path.write_text(json.dumps(runs_document(6)), encoding="utf-8")
    return path


def test_report_command_writes_html_and_summary(
    runs_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report.html"
    summary_path = tmp_path / "summary.json"
    code = main(["report", str(runs_file), "--html", str(out), "--summary-json", str(summary_path), "--no-progress"])
    assert code == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"wrote {out} (")
    assert "\r" not in captured.err
    page = out.read_text(encoding="utf-8")
    data = embedded_data(page)
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    assert data["selected"] == summary["selected_trace_id"] == summary["traces"][0]["trace_id"]
    [file] = summary["files"]
    assert file["path"] == str(runs_file) and file["problems"] == []
    assert file["spans"] == sum(trace["span_count"] for trace in summary["traces"])
    assert summary["statistics"] is not None
    assert 'id="cross-run"' in page


def test_report_command_opens_the_trace_asked_for(runs_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    trace_id = f"{3:032x}"
    assert main(["report", str(runs_file), "--html", str(out), "--trace", trace_id, "--no-progress"]) == 0
    assert embedded_data(out.read_text(encoding="utf-8"))["selected"] == trace_id


def test_report_command_rejects_an_unknown_trace(
    runs_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report.html"
    assert main(["report", str(runs_file), "--html", str(out), "--trace", "beef"]) == 2
    assert "no trace beef in the input (6 traces read)" in capsys.readouterr().err
    assert not out.exists()


def test_report_command_reports_bad_files_and_uses_the_rest(
    runs_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    out = tmp_path / "report.html"
    assert main(["report", str(bad), str(runs_file), "--html", str(out)]) == 2
    assert str(bad) in capsys.readouterr().err
    assert len(embedded_data(out.read_text(encoding="utf-8"))["traces"]) == 6
    # Nothing readable at all: no report.
    other = tmp_path / "none.html"
    assert main(["report", str(bad), "--html", str(other)]) == 2
    assert "no traces to report" in capsys.readouterr().err
    assert not other.exists()


def test_report_command_progress_bar(runs_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report.html"
    assert main(["report", str(runs_file), str(EXAMPLE), "--html", str(out), "--progress"]) == 0
    err = capsys.readouterr().err
    for phase in ("reading", "profiling", "finding", "writing"):
        assert f"] {phase}" in err or f" {phase}" in err
    assert "2/2 reading" in err
    assert "6/6 profiling" in err  # the example's trace id is also one of the runs'
    assert err.endswith(")\n") and "\r" + " " * 20 in err  # the bar is erased before the last line
    # Not a terminal and not asked for: no bar.
    assert main(["report", str(runs_file), "--html", str(out)]) == 0
    assert "\r" not in capsys.readouterr().err


def test_report_command_unwritable_output(runs_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "missing-dir" / "report.html"
    assert main(["report", str(runs_file), "--html", str(target)]) == 1
    assert "cannot write" in capsys.readouterr().err


def test_help_lists_the_report_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    for command in ("analyze", "export", "diff", "report", "serve"):
        assert command in text
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    text = capsys.readouterr().out
    for option in (
        *("--html", "--trace", "--summary-json", "--progress", "--no-progress"),
        *("--spike-threshold", "--prefix-cache"),
    ):
        assert option in text


def test_the_traces_note_says_the_table_scrolls_only_when_it_does() -> None:
    few = profiles_of(runs_document(3))
    assert '<p class="note">Slowest first. Click a trace' in render_html(few, findings_of(few))
    many = profiles_of(runs_document(20))
    assert "Slowest first; scroll the table to see all 20. Click a trace" in render_html(many, findings_of(many))

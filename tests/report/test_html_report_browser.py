"""The HTML report in a real browser: headless Chromium loads the file from disk, runs its script, and
the DOM it leaves (``--dump-dom``) holds the views; a screenshot goes to test-artifacts/html-report.png.

Chromium comes from Debian's package (``scripts/test`` installs it); a missing browser fails the test.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from otel_agent_profiler.core.profile import TraceProfile
from tests.report.test_html_report import profiles_of, runs_document
from tests.support.paths import ROOT

CHROMIUM = "/usr/bin/chromium"
SCREENSHOT = ROOT / "test-artifacts" / "html-report.png"

pytestmark = pytest.mark.e2e


def _chromium(*args: str) -> subprocess.CompletedProcess[str]:
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: run scripts/test (it installs Debian's chromium)", pytrace=False)
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        command = [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            f"--user-data-dir={profile}",
            *args,
        ]
        return subprocess.run(command, capture_output=True, text=True, timeout=120)


def _dump_dom(url: str) -> str:
    result = _chromium("--virtual-time-budget=5000", "--window-size=1400,2000", "--dump-dom", url)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def _group(dom: str, group_id: str) -> str:
    match = re.search(rf'<g id="{group_id}">(.*?)</g>', dom, re.S)
    assert match is not None, f"no <g id={group_id}> in the DOM: the page's script did not draw it"
    return match.group(1)


def _span_rects(dom: str, group_id: str) -> list[tuple[str, str]]:
    rects = []
    for tag in re.findall(r"<rect [^>]*>", _group(dom, group_id)):
        kind = re.search(r'class="span (cp|off)"', tag)
        span_id = re.search(r'data-span-id="([0-9a-f]+)"', tag)
        if kind and span_id:
            rects.append((kind.group(1), span_id.group(1)))
    return rects


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[TraceProfile]]:
    directory = tmp_path_factory.mktemp("html-report")
    trace_file = directory / "runs.otlp.json"
    document = runs_document(16, hostile=True)
    trace_file.write_text(json.dumps(document), encoding="utf-8")
    out = directory / "report.html"
    console = shutil.which("otel-agent-profiler", path=os.path.dirname(sys.executable))
    command = [console] if console else [sys.executable, "-m", "otel_agent_profiler"]
    result = subprocess.run(
        [*command, "report", str(trace_file), "--html", str(out), "--summary-json", str(directory / "s.json")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return out, profiles_of(document)


def test_the_script_draws_every_span_of_the_chosen_trace(report: tuple[Path, list[TraceProfile]]) -> None:
    path, profiles = report
    dom = _dump_dom(path.as_uri())
    slowest = max(profiles, key=lambda p: p.duration_ns)
    assert 'data-ready="true"' in dom, "the page's script did not finish"
    assert f'data-selected-trace="{slowest.trace_id}"' in dom
    expected = [(("cp" if s.on_critical_path else "off"), s.span_id) for s in slowest.spans]
    assert _span_rects(dom, "waterfall-bars") == expected
    assert sorted(_span_rects(dom, "flame-bars")) == sorted(expected)
    # Tooltips: one <title> per span rect.
    assert _group(dom, "waterfall-bars").count("<title>") == slowest.span_count
    # The other views were drawn too.
    assert dom.count('class="finding"') >= 1
    assert 'id="category-svg"' in dom
    assert 'id="concurrency-svg"' in dom
    assert dom.count('class="pct-row"') >= 7
    assert '<tr data-trace-id="' in dom and 'class="selected"' in dom
    # Hostile span names stayed text: nothing they carried ran.
    assert "data-pwned" not in dom.split("<body", 1)[1].split(">", 1)[0]
    assert "&lt;/script&gt;&lt;script&gt;" in dom


def test_another_trace_can_be_opened_by_its_address(report: tuple[Path, list[TraceProfile]]) -> None:
    path, profiles = report
    fastest = min(profiles, key=lambda p: p.duration_ns)
    dom = _dump_dom(path.as_uri() + f"#trace={fastest.trace_id}")
    assert f'data-selected-trace="{fastest.trace_id}"' in dom
    assert len(_span_rects(dom, "waterfall-bars")) == fastest.span_count
    assert len(_span_rects(dom, "flame-bars")) == fastest.span_count


def test_screenshot(report: tuple[Path, list[TraceProfile]]) -> None:
    path, _ = report
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    if SCREENSHOT.exists():
        SCREENSHOT.unlink()
    result = _chromium(
        "--virtual-time-budget=5000",
        "--hide-scrollbars",
        f"--screenshot={SCREENSHOT}",
        "--window-size=1400,2000",
        path.as_uri(),
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert SCREENSHOT.exists() and SCREENSHOT.stat().st_size > 20_000
    assert SCREENSHOT.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_clicking_a_finding_outlines_its_spans(report: tuple[Path, list[TraceProfile]], tmp_path: Path) -> None:
    path, _ = report
    page = path.read_text(encoding="utf-8")
    data = json.loads(re.search(r'id="report-data">(.*?)</script>', page, re.S).group(1))  # type: ignore[union-attr]
    findings = data["traces"][data["selected"]]["findings"]
    first = next(f for f in findings if f["span_ids"])
    clicked = tmp_path / "clicked.html"
    click = '<script>document.querySelector("#findings tr.finding[title]").click()</script></body>'
    clicked.write_text(page.replace("</body>", click), encoding="utf-8")
    dom = _dump_dom(clicked.as_uri())
    outlined = re.findall(r'<rect [^>]*class="span (?:cp|off) hl"[^>]*data-span-id="([0-9a-f]+)"', dom)
    # Once in the waterfall, once in the flame chart.
    assert sorted(outlined) == sorted(first["span_ids"] * 2)
    assert '<tr class="finding active"' in dom


def test_a_finding_about_many_spans_links_six_and_counts_the_rest(tmp_path: Path) -> None:
    from benchmarks.agent_traces import generate_runs, otlp_document

    spans = [span for run in generate_runs(20, seed=3) for span in run]
    trace_file = tmp_path / "runs.json"
    trace_file.write_text(json.dumps(otlp_document(spans)), encoding="utf-8")
    out = tmp_path / "report.html"
    from otel_agent_profiler.cli import main

    assert main(["report", str(trace_file), "--html", str(out), "--no-progress"]) == 0
    dom = _dump_dom(out.as_uri())
    wheres = re.findall(r'<div class="where">(.*?)</div>', dom, re.S)
    assert wheres, "no finding names its spans"
    # Seven are shown whole (six and "1 more span" says no less); past that, six and a count.
    assert max(where.count('class="span-link"') for where in wheres) <= 7
    cut = [where for where in wheres if re.search(r"and \d+ more spans \(click the finding to outline all\)", where)]
    assert cut and all(where.count('class="span-link"') == 6 for where in cut)


def test_an_overrunning_child_is_drawn_beside_the_verdict_it_makes_unreliable(tmp_path: Path) -> None:
    from otel_agent_profiler.core import profile_trace
    from otel_agent_profiler.core.findings import find_all
    from otel_agent_profiler.report.html import render_html
    from tests.core.test_overrunning_children import _three_instrumentations_on_one_client
    from tests.support.span_builders import sid

    trace = profile_trace(_three_instrumentations_on_one_client())  # type: ignore[arg-type]
    out = tmp_path / "report.html"
    out.write_text(render_html([trace], {trace.trace_id: find_all(trace)}), encoding="utf-8")
    dom = _dump_dom(out.as_uri())
    anomalies = re.search(r'<ul class="anomalies">(.*?)</ul>', dom, re.S)
    assert anomalies is not None, "the page's script did not list the anomaly"
    assert "child outlives parent" in anomalies.group(1) and sid("ChatCompletion") in anomalies.group(1)
    caveats = re.findall(r'<div class="caveat">(.*?)</div>', dom, re.S)
    assert caveats and all("Unreliable: span 'ChatCompletion'" in caveat for caveat in caveats)


def test_a_long_trace_reads_in_minutes_with_labels_sized_to_their_boxes(tmp_path: Path) -> None:
    from otel_agent_profiler.core.findings import find_all
    from otel_agent_profiler.report.html import render_html
    from tests.support.span_builders import profile, sid, span

    second = 1_000_000_000
    chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}
    trace = profile(
        [
            span("root", None, 0, 136 * second, attributes={"gen_ai.operation.name": "invoke_agent"}),
            span("c1", "root", 0, 100 * second, attributes=chat),
            span("c2", "root", 100 * second, 136 * second, attributes=chat),
            # In parallel with c2, in a box about 110 px wide: room for its narrow letters in an 11 px font.
            span(
                "helper",
                "root",
                100 * second,
                round(111.6 * second),
                attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "little_list_filter_1"},
            ),
        ]
    )
    path = tmp_path / "long.html"
    path.write_text(render_html([trace], {trace.trace_id: find_all(trace)}), encoding="utf-8")
    dom = _dump_dom(path.as_uri())
    assert 'data-ready="true"' in dom, "the page's script did not finish"
    # The script writes durations as the text report does: "2 min 16 s", not "136 s".
    assert "<b>2 min 16 s</b>" in dom
    # Every tick of an axis in one unit; the category chart's title no longer says "ms/s".
    category_axis = re.search(r'<svg [^>]*id="category-svg".*?</svg>', dom, re.S)
    assert category_axis is not None
    ticks = re.findall(r'<text x="[^"]*" y="[^"]*" text-anchor="middle">([^<]+)</text>', category_axis.group())
    assert len(ticks) > 2 and len({tick.split()[-1] for tick in ticks}) == 1, ticks
    assert "ms/s" not in dom
    # Labels are measured in the page's font, not guessed at 6.3 px a character (which cut names in boxes
    # that held them): the helper's 20 narrow characters fit its box whole.
    bars = _group(dom, "flame-bars")
    labels = re.findall(r'<text class="inbar"[^>]*>([^<]*)</text>', bars)
    assert labels.count("gpt-4o") == 2 and "root" in labels
    helper = re.search(rf'<rect [^>]*width="([0-9.]+)"[^>]*data-span-id="{sid("helper")}"', bars)
    assert helper is not None and int((float(helper.group(1)) - 6) / 6.3) < len("little_list_filter_1")
    assert "little_list_filter_1" in labels


def test_the_traces_table_shows_that_it_scrolls(report: tuple[Path, list[TraceProfile]], tmp_path: Path) -> None:
    path, profiles = report
    page = path.read_text(encoding="utf-8")
    assert f"Slowest first; scroll the table to see all {len(profiles)}." in page
    # Measured as the browser lays the page out: the box ends partway through a row, so the cut
    # shows there is more (a box ending at a row's edge looks like the whole list).
    measure = (
        "<script>const box = document.querySelector('#traces .scroll');"
        "const row = box.querySelector('tbody tr');"
        "const head = box.querySelector('thead').offsetHeight;"
        "document.body.dataset.rowsInView = ((box.clientHeight - head) / row.offsetHeight).toFixed(2);</script></body>"
    )
    measured = tmp_path / "measured.html"
    measured.write_text(page.replace("</body>", measure), encoding="utf-8")
    rows_in_view = float(re.search(r'data-rows-in-view="([0-9.]+)"', _dump_dom(measured.as_uri())).group(1))  # type: ignore[union-attr]
    assert len(profiles) > rows_in_view
    assert 0.25 <= rows_in_view % 1 <= 0.75, rows_in_view

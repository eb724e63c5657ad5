"""The server's load in the outputs: analyze's JSON, the summary JSON, the text report, the HTML page
and the llm_queue finding; and read back from enriched spans by the offline analysis."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from otel_agent_profiler import profile_records
from otel_agent_profiler.core import trace_to_dict
from otel_agent_profiler.core.backend_load import attach_backend_load
from otel_agent_profiler.core.findings import LLM_QUEUE, find_all
from otel_agent_profiler.core.profile import LoadSample
from otel_agent_profiler.live import attributes as attr
from otel_agent_profiler.live.enrichment import span_attributes
from otel_agent_profiler.live.load_history import LoadHistory
from otel_agent_profiler.report.html import render_html
from otel_agent_profiler.report.summary import build_summary
from otel_agent_profiler.report.text import render_trace
from tests.core.test_call_anatomy import server_attributes
from tests.support.span_builders import CLIENT, SERVER, by_name, profile, span

S = 1_000_000_000
T0 = 1_700_000_000 * S
SOURCE = "http://vllm:8000/metrics"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
LLM = {"gen_ai.operation.name": "chat", "gen_ai.request.model": MODEL, "gen_ai.system": "openai"}


def fanned_out_trace():
    """An agent whose three summaries queue on one server: calls at [1, 3], [1, 4] and [1, 5] s."""
    records = [span("root", None, T0, T0 + 6 * S, attributes={"gen_ai.operation.name": "invoke_agent"})]
    for k, end in enumerate((3, 4, 5)):
        queue = 0.2 + k
        records += [
            span(f"call{k}", "root", T0 + S, T0 + end * S, CLIENT, attributes=LLM),
            span(f"srv{k}", f"call{k}", T0 + S + S // 10, T0 + end * S - S // 10, SERVER,
                 attributes=server_attributes(queue, 0.5, end - 1.2 - queue - 0.5)),
        ]  # fmt: skip
    return profile(records)


def history() -> LoadHistory:
    """One sample a second from the vLLM-like server: the queue fills, then drains."""
    loads = LoadHistory()
    for t, (running, waiting, hits) in enumerate([(0, 0, 0), (1, 2, 0), (1, 2, 500), (1, 1, 900), (1, 0, 1300),
                                                  (0, 0, 1300), (0, 0, 1300)]):  # fmt: skip
        loads.add(LoadSample(time_ns=T0 + t * S, source=SOURCE, running=running, waiting=waiting,
                             kv_cache_usage=0.1 * running, prefix_cache_queries=1000 * t, prefix_cache_hits=hits,
                             preemptions=0, models=(MODEL,)))  # fmt: skip
    return loads


def loaded_trace():
    trace = fanned_out_trace()
    assert attach_backend_load(trace, history()) == 3
    return trace


def test_analyze_json_has_the_load_on_each_call_and_a_summary_on_the_trace() -> None:
    document = trace_to_dict(loaded_trace())
    spans = {s["name"]: s for s in document["spans"]}
    first = spans["call0"]["backend_load"]
    assert first["source"] == SOURCE and first["samples"] == 3  # the sample at 1 s, and those at 2 and 3 s
    assert first["waiting_max"] == 2 and first["running_mean"] == 1
    assert first["prefix_cache_hit_rate"] == (1300 - 0) / (4000 - 1000)  # counters: the samples at 1 s and 4 s
    assert spans["srv0"]["backend_load"] is None and spans["root"]["backend_load"] is None
    summary = document["backend_load"]
    assert summary["calls"] == 3 and summary["waiting_max"] == 2 and summary["preemptions"] == 0
    assert summary["kv_cache_usage_max"] == 0.1
    assert trace_to_dict(fanned_out_trace())["backend_load"] is None


def test_summary_json_sums_the_load_up_per_server_and_model() -> None:
    trace = loaded_trace()
    summary = json.loads(json.dumps(build_summary([trace], {})))
    (row,) = summary["backend_load"]
    assert row["source"] == SOURCE and row["model"] == MODEL and row["calls"] == 3
    assert row["waiting_max"] == 2 and row["waiting_p50"] == 2
    assert build_summary([fanned_out_trace()], {})["backend_load"] is None


def test_text_report_says_what_the_calls_met_in_one_line() -> None:
    text = render_trace(loaded_trace())
    (line,) = [line for line in text.splitlines() if line.startswith("Server load:")]
    assert line.startswith("Server load: 3 LLM calls met up to 2 waiting requests on the server")
    assert "prefix-cache hit rate" in line and "KV cache up to 10% full" in line
    assert "Server load:" not in render_trace(fanned_out_trace())


def test_queue_finding_cites_the_servers_metrics() -> None:
    trace = loaded_trace()
    (queue,) = [f for f in find_all(trace) if f.kind == LLM_QUEUE]
    assert "its metrics showed up to 2 requests waiting" in queue.title
    evidence = queue.evidence["server_load"]
    assert isinstance(evidence, dict) and evidence["waiting_max"] == 2


def test_html_draws_the_load_track_and_the_load_of_each_call() -> None:
    trace = loaded_trace()
    page = render_html([trace], {trace.trace_id: find_all(trace)})
    data = json.loads(re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S)[1])
    view = data["traces"][trace.trace_id]
    fields = data["span_fields"]
    rows = {row[fields.index("name")]: row for row in view["spans"]}
    assert rows["call0"][fields.index("backend_load")][1] == 2  # waiting max
    assert rows["root"][fields.index("backend_load")] is None
    (track,) = view["load_track"]
    assert track["source"] == SOURCE
    assert [point[2] for point in track["points"]] == [0, 2, 2, 1, 0, 0, 0]  # one sample either side of the trace
    assert "drawLoadTrack" in page


def test_enriched_attributes_are_read_back_by_the_offline_analysis() -> None:
    trace = loaded_trace()
    calls = by_name(trace)
    enriched = []
    for record in fanned_out_trace().spans:
        extra = span_attributes(calls[record.name]) if record.name.startswith("call") else {}
        enriched.append(record.record.__class__(**{**vars_of(record.record), "attributes": {
            **record.record.attributes, **extra}}))  # fmt: skip
    assert attr.BACKEND_WAITING_MAX in enriched[1].attributes
    (again,) = profile_records(enriched)
    for name in ("call0", "call1", "call2"):
        assert by_name(again)[name].backend_load == calls[name].backend_load
    assert trace_to_dict(again)["backend_load"] == trace_to_dict(trace)["backend_load"]


def vars_of(record: object) -> dict[str, object]:
    import dataclasses

    return {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}  # type: ignore[arg-type]


def write_page(path: Path) -> Path:
    """The HTML page of the loaded trace (for a look in a browser)."""
    trace = loaded_trace()
    path.write_text(render_html([trace], {trace.trace_id: find_all(trace)}), encoding="utf-8")
    return path


@pytest.mark.e2e
def test_the_page_draws_the_load_track_in_a_real_browser(tmp_path: Path) -> None:
    from tests.report.test_html_report_browser import _dump_dom

    page = write_page(tmp_path / "report.html")
    dom = _dump_dom(page.as_uri())
    track = re.search(r'<svg[^>]*class="load-track".*?</svg>', dom, re.S)
    assert track is not None, "the page's script drew no load track"
    assert 'class="waiting"' in track[0] and 'class="running"' in track[0]
    assert SOURCE in track[0] and "server load (0 to 2)" in track[0]
    # Each queued call's bar says how many requests it met waiting, and its tooltip says the rest.
    assert ">2.00 s · 2 waiting</text>" in dom.split('id="waterfall-bars"', 1)[1]
    assert "server load: 1.0 running · up to 2 waiting · KV cache 10%" in dom

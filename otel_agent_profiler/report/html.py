"""The HTML report: one self-contained file (inline CSS, JavaScript and SVG; no network) per set of runs.

It holds, for one chosen trace (by default the slowest; a table of every trace switches the views
in the browser): the trace's facts, a waterfall (one row per span, in depth-first order) and a
flame chart (time across, nesting down, parallel spans on lanes from
:func:`.chrome_trace.assign_lanes`), both with the critical path outlined and the other spans
faded, the category breakdown (self time, critical-path time and share, as bars) and the findings
with their estimated savings. With several traces it adds cross-run charts: duration percentiles
per category and per operation, the concurrency distribution of LLM and tool calls and the most
frequent call sequences (from :mod:`otel_agent_profiler.analytics`, which needs pandas).

The per-trace data is embedded as JSON in ``<script type="application/json" id="report-data">``
(with ``<``, ``>`` and ``&`` escaped as ``\\u003c`` ..., so no span name can end the script) and
drawn by the inline script; text from traces reaches the page only through ``textContent`` and
``setAttribute``, or through :func:`html.escape` in the parts written here. Span details are
embedded for the chosen trace and then the slowest traces up to ``max_detail_spans`` spans in all,
so the file stays small (under 200 bytes per span: 0.36 MB for a 2,000-span trace); the other
traces are listed in the table only.

The summary JSON (``report --summary-json``) is built by :mod:`.summary`.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .._version import __version__
from ..core.categories import CATEGORIES
from ..core.findings import BY_KIND, Change, Finding, combined_projection, describe_location
from ..core.profile import BackendLoad, LlmPhases, TraceProfile
from ..core.units import NS_PER_MS, format_duration, format_usd, plural
from .chrome_trace import assign_lanes
from .html_assets import CSS, JS
from .text import combined_sentence, estimated_timing_note

#: One colour per category, used by every view of the report.
CATEGORY_COLORS: Mapping[str, str] = {
    "llm": "#7b5cf0",
    "embedding": "#c05bd6",
    "tool": "#f08c1a",
    "agent": "#1fa89a",
    "retrieval": "#3a86ff",
    "memory": "#e4572e",
    "internal": "#8d99ae",
}

#: The fields of a span row in the embedded data, in order.
SPAN_FIELDS: tuple[str, ...] = (
    "name",
    "category",
    "operation",
    "start_ms",
    "duration_ms",
    "self_ms",
    "critical_path_ms",
    "on_critical_path",
    "depth",
    "flame_row",
    "span_id",
    "status",
    "model",
    "tokens",
    # An LLM call split by the inference server's span: [queue, prefill, decode, other] in ms.
    "llm_phases",
    # The load the call met on its server: [running mean, waiting max, KV-cache use max, prefix-cache
    # hit rate, preemptions], each null when the server does not publish it (core.backend_load).
    "backend_load",
)

#: How the phases of an LLM call are drawn inside its waterfall bar (core.call_anatomy).
PHASE_COLORS: Mapping[str, str] = {
    "queue": "#d64545",
    "prefill": "#f2b134",
    "decode": "#2f9e66",
    "other": "#c9ced6",
}

#: Anomalies listed per trace (the JSON output lists all).
_SHOWN_ANOMALIES = 10
#: Spans whose details are embedded, over all traces (the chosen trace is always embedded).
DEFAULT_MAX_DETAIL_SPANS = 15_000
#: Traces listed in the table (the slowest).
MAX_TABLE_ROWS = 2_000
#: About how many rows of the traces table its box shows before it scrolls (`.scroll.short`).
ROWS_IN_VIEW = 13
_TOP_OPERATIONS = 15


def _ms(ns: int) -> float:
    """Milliseconds, rounded to the nanosecond (keeps the embedded JSON short)."""
    return round(ns / NS_PER_MS, 6)


def by_duration(profiles: Iterable[TraceProfile]) -> list[TraceProfile]:
    """Slowest first, then by start and trace id: the order of the report's table."""
    return sorted(profiles, key=lambda p: (-p.duration_ns, p.start_ns, p.trace_id))


def select_trace(profiles: Sequence[TraceProfile], trace_id: str | None = None) -> TraceProfile:
    """The trace ``trace_id`` (hex; a 16-digit Jaeger id is padded), or the slowest one.

    Raises ``KeyError`` when ``trace_id`` is not among ``profiles`` and ``ValueError`` when there
    are none.
    """
    if not profiles:
        raise ValueError("no traces")
    if trace_id is None:
        return by_duration(profiles)[0]
    wanted = trace_id.strip().lower()
    if len(wanted) == 16:
        wanted = wanted.rjust(32, "0")
    for profile in profiles:
        if profile.trace_id == wanted:
            return profile
    raise KeyError(trace_id)


# --------------------------------------------------------------------------------------------
# Data


def flame_rows(profile: TraceProfile) -> tuple[list[int], int]:
    """The row of each span of ``profile`` in the flame chart, and the number of rows.

    Each lane of :func:`assign_lanes` is a properly nested stack; lane ``k`` takes as many rows as
    it is deep, below the rows of lanes ``0 .. k-1``.
    """
    lanes = assign_lanes(profile)
    row = [0] * len(profile.spans)
    base = 0
    for k in range(lanes.count):
        depth = 0
        deepest = 0
        for index, opening in lanes.walk(k):
            if opening:
                row[index] = base + depth
                depth += 1
                deepest = max(deepest, depth)
            else:
                depth -= 1
        base += deepest
    return row, base


def trace_view_data(profile: TraceProfile, findings: Sequence[Finding]) -> dict[str, Any]:
    """What the page's script draws for one trace: totals, categories, findings and span rows."""
    start = profile.start_ns
    rows, row_count = flame_rows(profile)
    critical_path_ns = profile.critical_path_ns
    spans = []
    for i, span in enumerate(profile.spans):
        tokens = span.tokens.total if span.tokens is not None else None
        spans.append(
            [
                span.name,
                span.category,
                span.operation,
                _ms(span.start_ns - start),
                _ms(span.duration_ns),
                _ms(span.self_time_ns),
                _ms(span.critical_path_ns),
                1 if span.on_critical_path else 0,
                span.depth,
                rows[i],
                span.span_id,
                span.record.status.value.lower(),
                # The family, and the snapshot that answered when the span names one.
                f"{span.model} ({span.model_snapshot})" if span.model_snapshot else span.model,
                tokens or None,
                _phases_ms(span.llm_phases),
                _load_row(span.backend_load),
            ]
        )
    categories = {}
    for name in CATEGORIES:
        stats = profile.categories[name]
        share = stats.critical_path_ns / critical_path_ns if critical_path_ns else 0.0
        categories[name] = [_ms(stats.self_time_ns), _ms(stats.critical_path_ns), round(share, 6), stats.count]
    return {
        "trace_id": profile.trace_id,
        "root_name": profile.roots[0].name if profile.roots else "",
        "duration_ms": _ms(profile.duration_ns),
        "critical_path_ms": _ms(critical_path_ns),
        "span_count": profile.span_count,
        "llm_calls": profile.llm_calls,
        "tokens": profile.tokens.total,
        "cost_usd": profile.cost_usd,
        "categories": categories,
        "findings": [
            {
                "kind": f.kind,
                "title": f.title,
                "saving_ms": _ms(f.saving_ns),
                "span_ids": list(f.span_ids),
                "suggestion": f.suggestion,
                # Each span the finding is about, in words and by id: a link to its waterfall row.
                "where": [[describe_location(location), location["span_id"]] for location in f.where],
                "caveat": f.caveat,
            }
            for f in findings
        ],
        # Times the trace's adapter laid out (ATIF), said above the findings built on them.
        "estimated_timing": estimated_timing_note(profile),
        # Data problems the analysis worked around, shown above the findings they may affect.
        "anomalies": [[a.kind, a.span_id, a.detail] for a in profile.anomalies[:_SHOWN_ANOMALIES]],
        "more_anomalies": max(0, len(profile.anomalies) - _SHOWN_ANOMALIES),
        "combined": combined_sentence(combined_projection(profile, findings), findings) if findings else None,
        "largest_saving": largest_saving(findings),
        "flame_rows": row_count,
        "spans": spans,
        # The phases of the critical path's LLM time, when inference server spans split it.
        "llm_phases": _phases_ms(profile.critical_path_llm_phases),
        "load_track": _load_track(profile),
    }


def _load_row(load: BackendLoad | None) -> list[float | None] | None:
    if load is None:
        return None
    values = (load.running_mean, load.waiting_max, load.kv_cache_usage_max, load.prefix_cache_hit_rate)
    return [None if v is None else round(v, 4) for v in values] + [load.preemptions]


def _load_track(profile: TraceProfile) -> list[dict[str, Any]] | None:
    """Each polled server's running and waiting requests over the trace: ``[offset ms, running, waiting]``."""
    if not profile.backend_samples:
        return None
    tracks: dict[str, list[list[float | None]]] = {}
    for sample in profile.backend_samples:
        tracks.setdefault(sample.source, []).append(
            [_ms(sample.time_ns - profile.start_ns), sample.running, sample.waiting]
        )
    return [{"source": source, "points": points} for source, points in tracks.items()]


def _phases_ms(phases: LlmPhases | None) -> list[float] | None:
    if phases is None:
        return None
    return [_ms(phases.queue_ns), _ms(phases.prefill_ns), _ms(phases.decode_ns), _ms(phases.other_ns)]


def _charted_statistics(statistics: Mapping[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """The part of the statistics the charts draw: span durations, the busiest operations."""

    def durations(rows: list[dict[str, Any]], keys: tuple[str, ...]) -> list[dict[str, Any]]:
        fields = (*keys, "count", "min", "p50", "p90", "p99", "max")
        return [
            {k: row[k] for k in fields}
            for row in rows
            if row["metric"] == "duration_ms" and row["count"] and row["max"] is not None
        ]

    categories = durations(statistics["categories"], ("category",))
    operations = durations(statistics["operations"], ("category", "operation"))
    # The operations that take the most time in all: count x mean ~ count x p50 is good enough to rank.
    means = {
        (row["category"], row["operation"]): row["mean"] or 0.0
        for row in statistics["operations"]
        if row["metric"] == "duration_ms"
    }
    operations.sort(key=lambda r: (-r["count"] * means.get((r["category"], r["operation"]), 0.0), r["operation"]))
    return {
        "categories": categories,
        "operations": operations[:_TOP_OPERATIONS],
        "concurrency": [
            {"level": r["level"], "fraction": r["fraction"], "time_ms": r["time_ms"]} for r in statistics["concurrency"]
        ],
        # A sequence that one run took is no pattern: only those several runs took are shown.
        "sequences": [
            {
                "sequence": r["sequence"],
                "count": r["count"],
                "share": r["share"],
                "p50_duration_ms": r["p50_duration_ms"],
            }
            for r in statistics["sequences"]
            if r["count"] > 1
        ],
        "ngrams": [
            {
                "sequence": r["ngram"],
                "count": r["traces"],
                "share": r["share_of_traces"],
                "p50_duration_ms": r["p50_duration_ms"],
            }
            for r in statistics["ngrams"]
        ],
    }


# --------------------------------------------------------------------------------------------
# HTML


def script_json(data: Any) -> str:
    """``data`` as JSON safe inside a ``<script>`` element: no ``<``, ``>`` or ``&`` left in it."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return (
        text.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _fmt_ms(ms: float) -> str:
    return format_duration(ms * NS_PER_MS)


def _legend(phases: bool = False) -> str:
    items = "".join(
        f'<span><i style="background:{color}"></i>{html.escape(name)}</span>' for name, color in CATEGORY_COLORS.items()
    )
    phase_items = (
        "".join(
            f'<span><i style="background:{color}"></i>{html.escape(name)}</span>'
            for name, color in PHASE_COLORS.items()
        )
        if phases
        else ""
    )
    return (
        f'<div class="legend">{items}<span><i class="cp"></i>on the critical path</span>'
        '<span><i class="off"></i>off the critical path (faded)</span></div>'
        + (f'<div class="legend">LLM call phases (from the server\'s span): {phase_items}</div>' if phases else "")
    )


def saving_assumption(finding: Finding) -> str:
    """What a finding's saving takes to happen, as the end of a sentence "... would end the trace sooner"."""
    kind = BY_KIND.get(finding.kind)
    if kind is not None and (kind.saving_is_held_time or kind.change is Change.TWICE_AS_FAST):
        # The saving is all the time the calls hold: as if they took none, not as if they were faster.
        if finding.operation:
            tool = " tool" if finding.category == "tool" else ""
            return f"if the {finding.operation}{tool} calls took no time at all"
        return "if its spans took no time at all"
    if kind is not None and kind.change is Change.DROP_REPEATS:
        return "if each repeated call were made once"
    if kind is not None and kind.change is Change.START_TOGETHER:
        return "if the calls that wait for nothing started together"
    return "if its finding's change were made"


def largest_saving(findings: Sequence[Finding]) -> dict[str, Any] | None:
    """The largest saving among ``findings`` and what it assumes, in words; None when none saves time."""
    best = max(findings, key=lambda f: f.saving_ns, default=None)
    if best is None or best.saving_ns <= 0:
        return None
    return {"ms": _ms(best.saving_ns), "assumes": saving_assumption(best), "kind": best.kind}


def _saving_cell(saving: Mapping[str, Any] | None) -> str:
    if saving is None:
        return '<td class="num">-</td>'
    return f'<td class="num" title="{html.escape(saving["assumes"])}">{_fmt_ms(saving["ms"])}</td>'


def _table_note(traces: int) -> str:
    """How the traces table is ordered, and, when it holds more rows than its box shows, that it scrolls:
    a box cut at a row boundary looks like the whole list."""
    listed = min(traces, MAX_TABLE_ROWS)
    if listed <= ROWS_IN_VIEW:
        return "Slowest first."
    return f"Slowest first; scroll the table to see all {listed:,}."


def _trace_table(
    profiles: Sequence[TraceProfile], findings: Mapping[str, Sequence[Finding]], embedded: set[str]
) -> str:
    rows = []
    # A cost column only when some trace has a cost: no column of dashes otherwise.
    with_cost = any(profile.cost_usd is not None for profile in profiles[:MAX_TABLE_ROWS])
    for profile in profiles[:MAX_TABLE_ROWS]:
        trace_id = profile.trace_id
        root = profile.roots[0].name if profile.roots else ""
        best_saving = largest_saving(findings.get(trace_id, ()))
        cls = "" if trace_id in embedded else ' class="nodata" title="details not embedded (span budget)"'
        rows.append(
            f'<tr data-trace-id="{html.escape(trace_id)}"{cls}>'
            f'<td class="mono">{html.escape(trace_id)}</td>'
            f"<td>{html.escape(root)}</td>"
            f'<td class="num">{_fmt_ms(profile.duration_ns / NS_PER_MS)}</td>'
            f'<td class="num">{_fmt_ms(profile.critical_path_ns / NS_PER_MS)}</td>'
            f'<td class="num">{profile.span_count:,}</td>'
            f'<td class="num">{profile.llm_calls:,}</td>'
            f'<td class="num">{profile.tokens.total:,}</td>'
            + (
                f'<td class="num">{format_usd(profile.cost_usd) if profile.cost_usd is not None else "-"}</td>'
                if with_cost
                else ""
            )
            + _saving_cell(best_saving)
            + "</tr>"
        )
    more = ""
    if len(profiles) > MAX_TABLE_ROWS:
        unlisted = plural(len(profiles) - MAX_TABLE_ROWS, "fastest trace")
        more = f'<p class="note">The {unlisted} {"is" if unlisted.startswith("1 ") else "are"} not listed.</p>'
    return (
        '<div class="scroll short"><table id="trace-table"><thead><tr><th>trace id</th><th>root span</th>'
        '<th class="num">duration</th><th class="num">critical path</th><th class="num">spans</th>'
        '<th class="num">LLM calls</th><th class="num">tokens</th>'
        + ('<th class="num">cost</th>' if with_cost else "")
        + '<th class="num">largest saving</th>'
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table></div>{more}"
        '<p class="note">Largest saving: what the trace\'s largest finding would save, on its own assumption: '
        "for calls that hold the critical path, if they took no time at all (hover a figure for its "
        "assumption).</p>"
    )


_STATISTICS_SECTION = """
<section class="card" id="cross-run">
<h2>Across {runs} runs</h2>
<p class="note">Span durations per category and per operation, on a log scale: the bar runs from the median
(dot) to the 90th percentile (p90), the black tick is the 99th (p99), the thin line runs from the shortest to the
longest.</p>
<div class="grid2">
<div><h3>Duration by category</h3><div id="category-percentiles"></div></div>
<div><h3>Duration by operation (the {top} taking the most time)</h3><div id="operation-percentiles"></div></div>
</div>
<div class="grid2">
<div><h3>Concurrency of LLM and tool calls</h3><div id="concurrency-chart"></div></div>
<div><h3>Frequent call patterns</h3><div id="ngram-table"></div></div>
</div>
<h3>Whole-run call sequences that more than one run took</h3><div id="sequence-table"></div>
</section>
"""


def detail_traces(
    profiles: Sequence[TraceProfile], selected: TraceProfile, max_detail_spans: int = DEFAULT_MAX_DETAIL_SPANS
) -> list[TraceProfile]:
    """The traces whose details the page embeds: the selected one, then the slowest that fit
    within ``max_detail_spans`` spans in all."""
    chosen = [selected]
    budget = max_detail_spans - selected.span_count
    for profile in by_duration(profiles):
        if profile is selected or profile.span_count > budget:
            continue
        chosen.append(profile)
        budget -= profile.span_count
    return chosen


def render_html(
    profiles: Sequence[TraceProfile],
    findings: Mapping[str, Sequence[Finding]],
    *,
    selected_trace_id: str | None = None,
    statistics: Mapping[str, list[dict[str, Any]]] | None = None,
    title: str = "Agent trace profile",
    max_detail_spans: int = DEFAULT_MAX_DETAIL_SPANS,
) -> str:
    """The report page (see the module docs). ``profiles`` must still have their span trees.

    ``findings`` maps trace ids to their findings (``core.findings.find_all``); ``statistics`` is
    :func:`cross_run_statistics`'s result or None (no cross-run section).
    """
    selected = select_trace(profiles, selected_trace_id)
    ordered = by_duration(profiles)
    traces: dict[str, Any] = {
        profile.trace_id: trace_view_data(profile, findings.get(profile.trace_id, ()))
        for profile in detail_traces(profiles, selected, max_detail_spans)
    }
    data = {
        "categories": list(CATEGORIES),
        "colors": dict(CATEGORY_COLORS),
        "phase_colors": list(PHASE_COLORS.values()),
        "span_fields": list(SPAN_FIELDS),
        "selected": selected.trace_id,
        "traces": traces,
        "statistics": _charted_statistics(statistics) if statistics else None,
    }
    total_spans = sum(p.span_count for p in profiles)
    subtitle = (
        f"{len(profiles):,} trace{'s' if len(profiles) != 1 else ''}, {total_spans:,} spans"
        f" \u00b7 otel-agent-profiler {__version__}"
    )
    not_embedded = len(profiles) - len(traces)
    budget_note = (
        f" Details of {not_embedded:,} traces are not embedded, to keep the file small (span budget "
        f"{max_detail_spans:,}); pick them with --trace."
        if not_embedded
        else ""
    )
    statistics_section = (
        _STATISTICS_SECTION.format(runs=f"{len(profiles):,}", top=_TOP_OPERATIONS) if statistics else ""
    )
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; \
script-src 'unsafe-inline'; img-src data:">
<title>{html.escape(title)}</title>
<style>{CSS}</style>
</head>
<body>
<header><h1>{html.escape(title)}</h1><div class="sub">{html.escape(subtitle)}</div></header>
<main>
<section class="card" id="traces">
<h2>Traces</h2>
<p class="note">{_table_note(len(ordered))} Click a trace to show it below.{html.escape(budget_note)}</p>
{_trace_table(ordered, findings, set(traces))}
</section>
<section class="card" id="trace-view">
<h2 id="trace-heading">Trace</h2>
<div class="facts" id="trace-facts"></div>
</section>
<section class="card" id="categories">
<h2>Time by category</h2>
<p class="note">Self time: each span's own time, its children's taken out. Critical path: the time each
category holds on the chain of spans that decided when the run ended, and its share of that chain.</p>
<div id="category-chart"></div>
</section>
<section class="card" id="findings-card">
<h2>Findings</h2>
<p class="note">Savings are recomputed on the trace's tree: work running alongside something longer saves
nothing.</p>
<div id="findings"></div>
</section>
<section class="card" id="waterfall-card">
<h2>Waterfall</h2>
<p class="note">One row per span, in call order; hover a bar for its details.</p>
{_legend(any(p.critical_path_llm_phases is not None for p in profiles))}
<div class="wide" id="waterfall"></div>
</section>
<section class="card" id="flame-card">
<h2>Flame chart</h2>
<p class="note">Time across, nesting down; spans running in parallel with a sibling get rows of their own.</p>
{_legend()}
<div class="scroll" id="flame"></div>
</section>
{statistics_section}
</main>
<footer>Generated by otel-agent-profiler {html.escape(__version__)}; self-contained, works offline.</footer>
<script type="application/json" id="report-data">{script_json(data)}</script>
<script>{JS}</script>
</body>
</html>
"""

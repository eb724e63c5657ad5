"""The text report: category table, top operations and a flame chart, per trace.

Written for a terminal 80 columns wide: long names are cut, never wrapped.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from ..core.backend_load import summarize_loads
from ..core.categories import CATEGORIES
from ..core.findings import (
    BUDGET_EXCEEDED,
    BY_KIND,
    Change,
    CombinedProjection,
    Finding,
    combined_projection,
    describe_where,
)
from ..core.findings.rests_on import SHOWN_BY_THE_TRACE
from ..core.profile import SpanProfile, TraceProfile
from ..core.units import format_duration, format_usd, plural

WIDTH = 80
_BAR_WIDTH = 22
_TOP_OPERATIONS = 8
#: The span tree's category column: as wide as the longest category's name, written in full.
_CATEGORY_WIDTH = max(len(name) for name in CATEGORIES)
#: What a table cell shows where there is none of something (no critical-path time, no self time):
#: one mark for every table, explained by ``NONE_LEGEND`` under a table that shows it.
NONE = "-"
NONE_LEGEND = f"({NONE} means none)"


class Glyphs(NamedTuple):
    """The characters the report draws with."""

    on_path: str
    off_path: str
    separator: str
    ellipsis: str
    rule: str


UNICODE = Glyphs("█", "░", "·", "…", "─")
ASCII = Glyphs("#", ".", "-", "~", "-")


def can_draw(stream: object) -> bool:
    """Whether ``stream`` can show the Unicode glyphs; if not, draw with ``ASCII``."""
    try:
        "".join(UNICODE).encode(getattr(stream, "encoding", None) or "ascii")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def _cut(text: str, width: int, glyphs: Glyphs) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + glyphs.ellipsis


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:5.1f}%" if whole and part else f"{NONE:>6}"


def time_cell(ns: float) -> str:
    """A duration in a table: ``NONE`` for none of it, never "0 ns" in one table and "-" in another."""
    return format_duration(ns) if ns else NONE


def with_none_legend(lines: list[str], rows: list[str]) -> list[str]:
    """``lines`` and ``rows``, with ``NONE_LEGEND`` under them when a row shows ``NONE``."""
    lines += rows
    if any(f" {NONE} " in row + " " for row in rows):
        lines.append("  " + NONE_LEGEND)
    return lines


def _usage_facts(llm_calls: int, tokens: int, cost_usd: float | None) -> list[str]:
    """The LLM calls, tokens and cost of a header line (one trace's or many traces'), those there are."""
    facts = [plural(llm_calls, "LLM call")] if llm_calls else []
    if tokens:
        facts.append(plural(tokens, "token"))
    if cost_usd is not None:
        facts.append(format_usd(cost_usd))
    return facts


def _header(profile: TraceProfile, glyphs: Glyphs) -> list[str]:
    facts = [format_duration(profile.duration_ns), plural(profile.span_count, "span")]
    if len(profile.roots) > 1:
        facts.append(plural(len(profile.roots), "root"))
    facts += _usage_facts(profile.llm_calls, profile.tokens.total, profile.cost_usd)
    lines = [f"Trace {profile.trace_id}", "  " + f" {glyphs.separator} ".join(facts)]
    note = estimated_timing_note(profile)
    if note is not None:
        lines += _paragraph(note, "  ", "  ", glyphs)
    for anomaly in profile.anomalies[:5]:
        line = f"! {anomaly.kind} {anomaly.span_id}: {anomaly.detail}"
        if anomaly.parent_span_id is not None:
            # A child running past its parent says where its time went: worth the extra lines.
            lines += _paragraph(line, "  ", "    ", glyphs)
        else:
            lines.append(_cut("  " + line, WIDTH, glyphs))
    if len(profile.anomalies) > 5:
        lines.append(f"  ! and {plural(len(profile.anomalies) - 5, 'more data problem')} (see --format json)")
    return lines


def estimated_timing_note(profile: TraceProfile) -> str | None:
    """A sentence saying how many of the trace's spans have times its adapter laid out, or None."""
    estimated = sum(1 for span in profile.spans if span.timing_estimated)
    if not estimated:
        return None
    which = "all" if estimated == profile.span_count else f"{estimated} of {profile.span_count}"
    return (
        f"Times of {which} spans are estimates: the trace's format records when each step happened, not how "
        "long its calls took, so the times and savings built on them are not measurements."
    )


def _category_table(profile: TraceProfile, glyphs: Glyphs) -> list[str]:
    critical = profile.critical_path_ns
    lines = [
        "",
        f"Where the time went (critical path {format_duration(critical)})",
        f"  {'category':<10} {'count':>6} {'self time':>11} {'critical path':>13} {'share':>6}",
    ]
    rows = []
    for name in CATEGORIES:
        stats = profile.categories[name]
        if not stats.count and not stats.critical_path_ns and not stats.self_time_ns:
            continue
        bar = glyphs.on_path * round(20 * stats.critical_path_ns / critical) if critical else ""
        row = (
            f"  {name:<10} {stats.count:>6} {time_cell(stats.self_time_ns):>11} "
            f"{time_cell(stats.critical_path_ns):>13} {_share(stats.critical_path_ns, critical)} {bar}"
        )
        rows.append(row.rstrip())
    return with_none_legend(lines, rows)


def _llm_phases(profile: TraceProfile, glyphs: Glyphs) -> list[str]:
    """The critical path's time in LLM calls, split by the inference server's spans (none without them)."""
    phases = profile.critical_path_llm_phases
    if phases is None:
        return []
    critical = profile.critical_path_ns
    llm = profile.categories["llm"].critical_path_ns
    lines = [
        "",
        f"Inside the LLM calls on the critical path ({format_duration(phases.total_ns)} of the {format_duration(llm)} "
        "in llm, from the server's spans)",
    ]
    for name, ns in (
        ("queue", phases.queue_ns),
        ("prefill", phases.prefill_ns),
        ("decode", phases.decode_ns),
        ("other", phases.other_ns),
    ):
        bar = glyphs.on_path * round(20 * ns / critical) if critical else ""
        lines.append(f"  {name:<10} {'':>6} {'':>11} {time_cell(ns):>13} {_share(ns, critical)} {bar}".rstrip())
    return lines


def _backend_load(profile: TraceProfile) -> list[str]:
    """One line on what the LLM calls met on their servers, when the servers' metrics were polled."""
    summary = summarize_loads(profile.spans)
    if summary is None:
        return []
    parts = []
    if summary.waiting_max:
        parts.append(f"up to {plural(round(summary.waiting_max), 'waiting request')} on the server")
    elif summary.waiting_max is not None:
        parts.append("no waiting requests on the server")
    if summary.running_mean is not None:
        parts.append(f"{summary.running_mean:.1f} running on average")
    if summary.kv_cache_usage_max is not None:
        parts.append(f"KV cache up to {summary.kv_cache_usage_max:.0%} full")
    if summary.prefix_cache_hit_rate is not None:
        parts.append(f"prefix-cache hit rate {summary.prefix_cache_hit_rate:.0%}")
    if summary.preemptions:
        parts.append(plural(summary.preemptions, "preemption"))
    calls = plural(summary.calls, "LLM call")
    return ["", f"Server load: {calls} met " + ("; ".join(parts) if parts else "a server with no load metrics")]


def _operations_table(profile: TraceProfile, glyphs: Glyphs) -> list[str]:
    critical = profile.critical_path_ns
    ranked = sorted(profile.operations.values(), key=lambda o: (-o.critical_path_ns, -o.self_time_ns, o.operation))
    lines = [
        "",
        "Top operations by critical-path time",
        f"  {'operation':<24} {'category':<9} {'count':>5} {'self time':>11} {'critical path':>13} {'share':>6}",
    ]
    rows = [
        f"  {_cut(op.operation, 24, glyphs):<24} {op.category:<9} {op.count:>5} "
        f"{time_cell(op.self_time_ns):>11} {time_cell(op.critical_path_ns):>13} "
        f"{_share(op.critical_path_ns, critical)}"
        for op in ranked[:_TOP_OPERATIONS]
    ]
    with_none_legend(lines, rows)
    if len(ranked) > _TOP_OPERATIONS:
        lines.append(f"  {glyphs.ellipsis} {plural(len(ranked) - _TOP_OPERATIONS, 'more operation')}")
    return lines


def _bar(span: SpanProfile, start: int, scale: float, glyphs: Glyphs) -> str:
    first = int((span.start_ns - start) * scale)
    last = max(first + 1, round((span.end_ns - start) * scale))
    first = min(first, _BAR_WIDTH - 1)
    last = min(last, _BAR_WIDTH)
    fill = glyphs.on_path if span.on_critical_path else glyphs.off_path
    return " " * first + fill * (last - first) + " " * (_BAR_WIDTH - last)


def _spans_to_show(spans: list[SpanProfile], limit: int) -> list[SpanProfile]:
    # Keep the critical path first, then the longest other spans; show them in tree order.
    if len(spans) <= limit:
        return spans
    ranked = sorted(range(len(spans)), key=lambda i: (not spans[i].on_critical_path, -spans[i].duration_ns, i))
    keep = sorted(ranked[:limit])
    return [spans[i] for i in keep]


#: The span tree's lines around its spans: a blank line, its title, its axis, the note on the spans left
#: out and the legend of ``NONE``.
_TREE_FRAME_LINES = 5
#: A span tree cut to fit a line budget still shows this many spans (the critical path first).
MIN_TREE_SPANS = 5


def _flame_chart(profile: TraceProfile, max_spans: int, glyphs: Glyphs) -> list[str]:
    start, duration = profile.start_ns, profile.duration_ns
    scale = _BAR_WIDTH / duration if duration else 0.0
    shown = _spans_to_show(profile.spans, max_spans)
    totals = [format_duration(span.duration_ns) for span in shown]
    own_paths = [time_cell(span.critical_path_ns) for span in shown]
    # Seven characters hold "35.1 s"; a trace of minutes needs "2 min 16 s": the columns widen to it.
    width = max([7, *map(len, totals), *map(len, own_paths)])
    axis = f"0{format_duration(duration):>{_BAR_WIDTH - 1}}"
    lines = [
        "",
        f"Span tree ({glyphs.on_path} on the critical path, {glyphs.off_path} off it; "
        "crit. = the span's own share of it)",
        f"  {axis}  {'total':>{width}} {'crit.':>{width}} {'category':<{_CATEGORY_WIDTH}} span",
    ]
    for span, total, own_path in zip(shown, totals, own_paths, strict=True):
        indent = "  " * min(span.depth, 8)
        times = f"{total:>{width}} {own_path:>{width}}"
        prefix = f" |{_bar(span, start, scale, glyphs)}| {times} {span.category:<{_CATEGORY_WIDTH}} "
        lines.append(prefix + _cut(indent + span.name, WIDTH - len(prefix), glyphs))
    hidden = len(profile.spans) - len(shown)
    if hidden:
        # The critical path is shown first, but a path longer than --max-spans is cut too.
        hidden_on_path = sum(span.on_critical_path for span in profile.spans) - sum(
            span.on_critical_path for span in shown
        )
        where = f", {hidden_on_path} of them on the critical path" if hidden_on_path else " off the critical path"
        note = f"  {glyphs.ellipsis} {plural(hidden, 'more span')}{where} (--max-spans N shows more)"
        lines.append(_cut(note, WIDTH, glyphs))
    if any(own_path == NONE for own_path in own_paths):
        lines.append("  " + NONE_LEGEND)
    return lines


#: What the combined projection takes each kind of change to be, in the order a sentence lists them.
_ASSUMED: dict[Change, str] = {
    Change.TWICE_AS_FAST: "each slow step becomes twice as fast",
    Change.DROP_REPEATS: "each repeated call is made once",
    Change.START_TOGETHER: "the steps that wait for nothing start together",
}


def combined_sentence(projection: CombinedProjection, findings: Sequence[Finding] = ()) -> str | None:
    """The combined projection of a trace's findings as a sentence, if their changes save anything,
    with what it assumes each change does (the changes of ``findings``' kinds)."""
    if projection.changes == 0 or projection.saving_ns <= 0:
        return None
    # A share rather than "X instead of Y": both ends can round to the same figure.
    share = projection.saving_ns / projection.duration_ns
    changes = "this change" if projection.changes == 1 else "these changes"
    sentence = f"Made together, {changes} would end the trace {format_duration(projection.saving_ns)} sooner"
    if share >= 0.005:
        sentence += f" ({share:.0%} of its {format_duration(projection.duration_ns)})"
    # Only the changes the projection made: findings resting on an assumption or an estimate are not in it.
    made = {BY_KIND[f.kind].change for f in findings if f.kind in BY_KIND and f.rests_on in SHOWN_BY_THE_TRACE}
    assumed = [words for change, words in _ASSUMED.items() if change in made]
    if assumed:
        listed = assumed[0] if len(assumed) == 1 else ", ".join(assumed[:-1]) + " and " + assumed[-1]
        sentence += f", assuming {listed}"
    return sentence + "."


#: A duration as ``format_duration`` writes it, which a wrapped line never splits ("2 min" / "38 s").
_DURATION = re.compile(r"\d+(?:\.\d+)? (?:min \d+ s|h \d+ min|min|h|s|ms|µs|ns)\b")
#: What holds a duration's words together while a paragraph is wrapped: a character no report writes.
_JOINED = "\ue000"


def _paragraph(text: str, first: str, rest: str, glyphs: Glyphs) -> list[str]:
    text = _DURATION.sub(lambda match: match.group().replace(" ", _JOINED), text)
    wrapped = [line.replace(_JOINED, " ") for line in textwrap.wrap(text, WIDTH - len(rest))] or [""]
    if glyphs is ASCII:
        wrapped = [line.encode("ascii", "replace").decode() for line in wrapped]
    return [first + wrapped[0]] + [rest + line for line in wrapped[1:]]


def _findings(profile: TraceProfile, findings: Sequence[Finding], limit: int, glyphs: Glyphs) -> list[str]:
    if not findings:
        return []
    order = "the largest saving of end-to-end time first"
    if any(finding.kind == BUDGET_EXCEEDED for finding in findings):
        order = "budgets exceeded first, then the largest saving"
    lines = ["", f"What to change ({order})"]
    combined = combined_sentence(combined_projection(profile, findings), findings) if profile.spans else None
    if combined:
        lines += _paragraph(combined, "  ", "  ", glyphs)
    for number, finding in enumerate(findings[:limit], 1):
        lines += _paragraph(finding.title, f"  {number}. ", "     ", glyphs)
        if finding.where:
            lines += _paragraph(f"Where: {describe_where(finding.where)}.", "     ", "       ", glyphs)
        if finding.suggestion:
            lines += _paragraph(f"Suggestion: {finding.suggestion}", "     ", "       ", glyphs)
        if finding.caveat:
            lines += _paragraph(finding.caveat, "     ", "       ", glyphs)
    if len(findings) > limit:
        more = plural(len(findings) - limit, "more finding")
        lines.append(f"  {glyphs.ellipsis} {more} (--format json --findings lists all)")
    return lines


def render_findings(
    profile: TraceProfile, findings: Sequence[Finding], *, max_findings: int = 5, ascii_only: bool = False
) -> str:
    """The "What to change" section of the text report alone: what ``render_trace`` says of ``findings``."""
    lines = _findings(profile, findings, max_findings, ASCII if ascii_only else UNICODE)
    return "\n".join(lines[1:]) + "\n" if lines else ""


def render_trace(
    profile: TraceProfile,
    *,
    max_spans: int = 60,
    ascii_only: bool = False,
    findings: Sequence[Finding] = (),
    max_findings: int = 5,
    max_lines: int | None = None,
) -> str:
    """The text report of one trace; ``findings`` (from ``core.findings.find_all``) are listed too.

    With ``max_lines``, the span tree shows fewer than ``max_spans`` spans where the report would
    otherwise run longer, but never fewer than ``MIN_TREE_SPANS``: every other part is bounded
    by constants, so the tree is what makes a report long.
    """
    glyphs = ASCII if ascii_only else UNICODE
    lines = _header(profile, glyphs)
    lines += _category_table(profile, glyphs)
    lines += _llm_phases(profile, glyphs)
    lines += _backend_load(profile)
    lines += _operations_table(profile, glyphs)
    lines += _findings(profile, findings, max_findings, glyphs)
    if max_lines is not None:
        max_spans = min(max_spans, max(MIN_TREE_SPANS, max_lines - len(lines) - _TREE_FRAME_LINES))
    lines += _flame_chart(profile, max_spans, glyphs)
    return "\n".join(lines) + "\n"


def render_traces(
    profiles: Iterable[TraceProfile],
    *,
    max_spans: int = 60,
    ascii_only: bool = False,
    findings: Mapping[str, Sequence[Finding]] | None = None,
    max_findings: int = 5,
) -> str:
    """The text report of several traces, separated by a rule; ``findings`` by trace id, ``max_findings`` each."""
    rule = "\n" + (ASCII if ascii_only else UNICODE).rule * WIDTH + "\n\n"
    return rule.join(
        render_trace(
            p,
            max_spans=max_spans,
            ascii_only=ascii_only,
            findings=(findings or {}).get(p.trace_id, ()),
            max_findings=max_findings,
        )
        for p in profiles
    )

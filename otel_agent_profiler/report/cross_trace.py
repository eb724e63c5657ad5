"""The text report of many traces: one cross-trace summary, then the slowest traces in detail.

A file of thousands of traces printed in full is too long to read (hundreds of thousands of
lines); what a reader wants first is what is typical and what keeps coming back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from ..core.categories import CATEGORIES
from ..core.findings import BY_KIND, KINDS, Finding, FindingKind, Grouping
from ..core.findings.rests_on import ASSUMED_NO_RECORDED_FLOW, ESTIMATED_TIMING, MEASURED_TIMES, SHOWN_BY_THE_TRACE
from ..core.genai import TokenUsage
from ..core.percentiles import percentile
from ..core.profile import CategoryStats, OperationStats, TraceProfile
from ..core.split_traces import (
    CallFacts,
    Counted,
    SplitLLMCall,
    TraceCalls,
    calls_of,
    cross_trace_totals,
    find_split_llm_calls,
)
from ..core.units import format_duration, plural
from .defaults import DEFAULT_TOP as DEFAULT_TOP, MANY_TRACES as MANY_TRACES, REPORT_MAX_LINES as REPORT_MAX_LINES
from .text import (
    ASCII,
    UNICODE,
    WIDTH,
    Glyphs,
    _cut,
    _paragraph,
    _share,
    _usage_facts,
    render_trace,
    render_traces,
    time_cell,
    with_none_legend,
)

_TOP_OPERATIONS = 10
#: The operation column: wide enough for most names within 80 columns, and at most as wide as the
#: single trace's (report/text.py), however long a name.
_OPERATION_WIDTH = 18
_OPERATION_MAX_WIDTH = 24
#: The legend of the tables' median and p90 columns, of a category or an operation.
_PERCENTILES = "median and p90: the critical-path time that half, and 90%, of the traces with the {what} hold at most"
_TOP_FINDINGS = 10
_WITH_SAVING = 6
FINDINGS_PER_TRACE = 3
_WITHOUT_SAVING = 4


class Totals(Counted, Protocol):
    """What the summary reads of a trace: a ``TraceProfile``, or the ``TraceTotals`` kept of one."""

    @property
    def trace_id(self) -> str: ...
    @property
    def start_ns(self) -> int: ...
    @property
    def duration_ns(self) -> int: ...
    @property
    def span_count(self) -> int: ...
    @property
    def critical_path_ns(self) -> int: ...
    @property
    def categories(self) -> Mapping[str, CategoryStats]: ...
    @property
    def operations(self) -> Mapping[tuple[str, str], OperationStats]: ...


@dataclass(frozen=True, slots=True)
class TraceTotals:
    """A trace's totals without its spans: what the summary of traces profiled elsewhere keeps of each."""

    trace_id: str
    start_ns: int
    duration_ns: int
    span_count: int
    llm_calls: int
    tokens: TokenUsage
    cost_usd: float | None
    critical_path_ns: int
    categories: Mapping[str, CategoryStats]
    operations: Mapping[tuple[str, str], OperationStats]
    #: What finding LLM calls split into traces of their own reads.
    calls: TraceCalls

    def __reduce__(self) -> tuple[Callable[..., TraceTotals], tuple[object, ...]]:
        # Every worker sends one back for every trace. Its nested stats (about 50 objects a
        # trace) go as tuples of plain values, which pickle writes and reads in C: reduced
        # object by object they took 0.42 s to pickle and 0.25 s to read back for 4,400 traces,
        # against 0.16 s and 0.17 s so.
        return _totals_from_values, (
            self.trace_id,
            self.start_ns,
            self.duration_ns,
            self.span_count,
            self.llm_calls,
            _usage_values(self.tokens),
            self.cost_usd,
            self.critical_path_ns,
            [
                (name, stats.count, stats.duration_ns, stats.self_time_ns, stats.critical_path_ns)
                for name, stats in self.categories.items()
            ],
            [
                (
                    op.category,
                    op.operation,
                    op.count,
                    op.duration_ns,
                    op.self_time_ns,
                    op.critical_path_ns,
                    *_usage_values(op.tokens),
                )
                for op in self.operations.values()
            ],
            self.calls.llm_only,
            [
                (
                    call.span_id,
                    call.model,
                    call.cost_usd,
                    call.start_ns,
                    call.end_ns,
                    call.process,
                    *_usage_values(call.tokens),
                )
                for call in self.calls.calls
            ],
        )

    @classmethod
    def of(cls, profile: TraceProfile) -> TraceTotals:
        return cls(
            profile.trace_id,
            profile.start_ns,
            profile.duration_ns,
            profile.span_count,
            profile.llm_calls,
            profile.tokens,
            profile.cost_usd,
            profile.critical_path_ns,
            profile.categories,
            profile.operations,
            calls_of(profile),
        )


def _usage_values(usage: TokenUsage) -> tuple[int, int, int, int]:
    return usage.input, usage.output, usage.cached_input, usage.reasoning


def _totals_from_values(
    trace_id: str,
    start_ns: int,
    duration_ns: int,
    span_count: int,
    llm_calls: int,
    tokens: tuple[int, int, int, int],
    cost_usd: float | None,
    critical_path_ns: int,
    categories: list[tuple[str, int, int, int, int]],
    operations: list[tuple[Any, ...]],
    llm_only: bool,
    calls: list[tuple[Any, ...]],
) -> TraceTotals:
    """A ``TraceTotals`` again from what its ``__reduce__`` gave."""
    return TraceTotals(
        trace_id,
        start_ns,
        duration_ns,
        span_count,
        llm_calls,
        TokenUsage(*tokens),
        cost_usd,
        critical_path_ns,
        {name: CategoryStats(*values) for name, *values in categories},
        {
            (category, operation): OperationStats(
                category, operation, count, duration, self_time, critical, TokenUsage(*usage)
            )
            for category, operation, count, duration, self_time, critical, *usage in operations
        },
        TraceCalls(
            trace_id,
            llm_only,
            tuple(
                CallFacts(span_id, model, TokenUsage(*usage), cost, start, end, process)
                for span_id, model, cost, start, end, process, *usage in calls
            ),
        ),
    )


def split_calls_note(splits: Sequence[SplitLLMCall]) -> str | None:
    """What the report says about LLM calls split into traces of their own, if there are any."""
    if not splits:
        return None
    traces = len({split.trace_id for split in splits})
    tokens = sum(split.tokens.total for split in splits)
    return (
        f"{plural(traces, 'LLM-only trace')} {'repeats' if traces == 1 else 'repeat'} "
        f"{plural(len(splits), 'LLM call')} of agent traces "
        f"(instrumentations that did not share context): counted once, in the agent's trace; "
        f"{plural(tokens, 'token')} left out of the totals across traces."
    )


def _header(profiles: Sequence[Totals], splits: Sequence[SplitLLMCall], glyphs: Glyphs) -> list[str]:
    durations = [profile.duration_ns for profile in profiles]
    facts = [plural(len(profiles), "trace"), plural(sum(p.span_count for p in profiles), "span")]
    totals = cross_trace_totals(profiles, splits)
    facts += _usage_facts(totals.llm_calls, totals.tokens.total, totals.cost_usd)
    spread = (
        f"A trace took {format_duration(percentile(durations, 0.5))} at the median; "
        f"90% took at most {format_duration(percentile(durations, 0.9))}, "
        f"99% at most {format_duration(percentile(durations, 0.99))}; the longest {format_duration(max(durations))}."
    )
    lines = [f" {glyphs.separator} ".join(facts), *_paragraph(spread, "  ", "  ", glyphs)]
    note = split_calls_note(splits)
    if note:
        lines += _paragraph("! " + note, "  ", "    ", glyphs)
    return lines


def _category_table(profiles: Sequence[Totals], glyphs: Glyphs) -> list[str]:
    critical = sum(profile.critical_path_ns for profile in profiles)
    lines = [
        "",
        f"Where the time went across traces (critical path {format_duration(critical)} in all)",
        f"  {'category':<10} {'traces':>6} {'critical path':>13} {'share':>6} {'median':>10} {'p90':>10}",
    ]
    rows = []
    for name in CATEGORIES:
        per_trace = [
            profile.categories[name].critical_path_ns
            for profile in profiles
            if profile.categories[name].count or profile.categories[name].critical_path_ns
        ]
        if not per_trace:
            continue
        total = sum(per_trace)
        # 15 characters, not the trace report's 20: the median and p90 columns take the rest of the line.
        bar = glyphs.on_path * round(15 * total / critical) if critical else ""
        row = (
            f"  {name:<10} {len(per_trace):>6} {time_cell(total):>13} {_share(total, critical)} "
            f"{time_cell(percentile(per_trace, 0.5)):>10} {time_cell(percentile(per_trace, 0.9)):>10} {bar}"
        )
        rows.append(row.rstrip())
    with_none_legend(lines, rows)
    return lines + _paragraph(f"({_PERCENTILES.format(what='category')})", "  ", "   ", glyphs)


def _operations_table(profiles: Sequence[Totals], glyphs: Glyphs) -> list[str]:
    critical = sum(profile.critical_path_ns for profile in profiles)
    per_operation: dict[tuple[str, str], list[int]] = {}
    for profile in profiles:
        for key, stats in profile.operations.items():
            per_operation.setdefault(key, []).append(stats.critical_path_ns)
    ranked = sorted(per_operation.items(), key=lambda item: (-sum(item[1]), -len(item[1]), item[0]))
    shown = ranked[:_TOP_OPERATIONS]
    # As wide as the longest name shown, up to the single trace's table: short names keep the
    # table within 80 columns, and a name like "text-embedding-3-small" is not cut.
    width = max(_OPERATION_WIDTH, min(_OPERATION_MAX_WIDTH, max((len(op) for (_, op), _ in shown), default=0)))
    lines = [
        "",
        "Top operations across traces by critical-path time",
        f"  {'operation':<{width}} {'category':<9} {'traces':>6} {'critical path':>13} {'share':>6} "
        f"{'median':>10} {'p90':>10}",
    ]
    rows = []
    for (category, operation), per_trace in shown:
        total = sum(per_trace)
        rows.append(
            f"  {_cut(operation, width, glyphs):<{width}} {category:<9} {len(per_trace):>6} {time_cell(total):>13} "
            f"{_share(total, critical)} {time_cell(percentile(per_trace, 0.5)):>10} "
            f"{time_cell(percentile(per_trace, 0.9)):>10}"
        )
    with_none_legend(lines, rows)
    if len(ranked) > _TOP_OPERATIONS:
        lines.append(f"  {glyphs.ellipsis} {plural(len(ranked) - _TOP_OPERATIONS, 'more operation')}")
    return lines + _paragraph(f"({_PERCENTILES.format(what='operation')})", "  ", "   ", glyphs)


@dataclass(slots=True)
class _Group:
    """Findings of one kind about the same operation or span names, in several traces."""

    kind: str
    subject: tuple[str, ...]
    #: What its findings rest on: ``MEASURED_TIMES`` for all that the trace shows, else the assumption
    #: or the estimate, whose findings are grouped apart and whose savings are not added up.
    rests_on: str
    #: The group's saving in each trace it appears in, by trace id.
    savings: dict[str, int] = field(default_factory=dict)

    @property
    def total_ns(self) -> int:
        return sum(self.savings.values())


def _subject(finding: Finding) -> tuple[str, ...]:
    """What the finding is about, by its kind's ``Grouping``: the key of its group with the kind."""
    kind = BY_KIND.get(finding.kind)
    grouping = kind.grouping if kind is not None else Grouping.SPAN_NAMES
    if grouping is Grouping.KIND:
        return ()
    if grouping is Grouping.BUDGET:
        return tuple(str(finding.evidence.get(key) or "") for key in ("budget", "category"))
    if finding.operation and grouping is Grouping.OPERATION:
        return (finding.operation, finding.category or "")
    return tuple(sorted({str(place.get("name")) for place in finding.where if place.get("name")}))


def _leads(kind: str) -> bool:
    record = BY_KIND.get(kind)
    return record is not None and record.leads


def aggregate_findings(findings: Mapping[str, Sequence[Finding]]) -> list[_Group]:
    """Every trace's findings grouped by kind and by what they are about, the largest total saving first."""
    groups: dict[tuple[str, tuple[str, ...], str], _Group] = {}
    for trace_id, found in findings.items():
        for finding in found:
            shown = finding.rests_on in SHOWN_BY_THE_TRACE
            key = (finding.kind, _subject(finding), MEASURED_TIMES if shown else finding.rests_on)
            group = groups.get(key) or groups.setdefault(key, _Group(*key))
            # A saving that rests on an assumption or an estimate is no saving to add up across traces.
            saving = max(0, finding.saving_ns) if shown else 0
            group.savings[trace_id] = group.savings.get(trace_id, 0) + saving
    order = {kind: number for number, kind in enumerate(KINDS)}
    return sorted(
        groups.values(),
        key=lambda g: (
            not _leads(g.kind),
            -g.total_ns,
            -len(g.savings),
            order.get(g.kind, len(order)),
            g.subject,
        ),
    )


def _names(names: Sequence[str]) -> str:
    shown = [f"'{name}'" for name in names[:4]]
    if len(names) > 4:
        shown.append(f"{len(names) - 4} more")
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]


def _what(group: _Group) -> str:
    """What the group's findings say, as the end of a sentence that starts "In 18 of 20 traces, "."""
    kind, subject = BY_KIND.get(group.kind), group.subject
    named = _names(subject) if subject else "spans"
    if kind is None:
        # A finding made by hand, of a kind the registry does not know.
        return _kind_was_about(group.kind, named)
    if kind.grouping is Grouping.OPERATION and len(subject) != 2:
        # Findings that name no operation are grouped by their spans' names (no finder makes them
        # today): there are no calls to name, only the spans.
        return _kind_was_about(kind.kind, named)
    if group.rests_on == ASSUMED_NO_RECORDED_FLOW and kind.across_traces_assumed is not None:
        return kind.across_traces_assumed.format(**_placeholders(kind, subject, named))
    what = kind.across_traces.format(**_placeholders(kind, subject, named))
    if group.rests_on == ESTIMATED_TIMING:
        return what + " (by times the trace's adapter estimated, not measured ones)"
    return what


def _placeholders(kind: FindingKind, subject: tuple[str, ...], named: str) -> dict[str, str]:
    """The words the sentences of the kind's ``Grouping`` may use (``core.findings.kinds.PLACEHOLDERS``)."""
    if kind.grouping is Grouping.BUDGET:
        budget, category = subject
        return {"budget": f"{category + ' ' if category else ''}{budget.replace('_', ' ')}"}
    if kind.grouping is Grouping.OPERATION:
        operation, category = subject
        return {"calls": f"the {operation} tool calls" if category == "tool" else f"the {operation} calls"}
    if kind.grouping is Grouping.SPAN_NAMES:
        return {"named": named, "calls_of_named": f"{'calls of ' if len(subject) == 1 else ''}{named}"}
    return {}


def _kind_was_about(kind: str, named: str) -> str:
    return f"a {kind.replace('_', ' ')} finding was about {named}"


def _sentence(group: _Group, traces: int) -> str:
    count = len(group.savings)
    share = f"all {plural(traces, 'trace')}" if count == traces else f"{count:,} of {plural(traces, 'trace')}"
    sentence = f"In {share}, {_what(group)}"
    savings = list(group.savings.values())
    if group.total_ns <= 0:
        return sentence + "."
    kind = BY_KIND.get(group.kind)
    if kind is not None and kind.saving_is_held_time:
        # A bottleneck's saving is all of its time: what it holds, not what a change would save.
        if len(savings) == 1:
            return sentence + f": {format_duration(group.total_ns)}."
        return (
            sentence + f": a median of {format_duration(percentile(savings, 0.5))} per trace, "
            f"{format_duration(group.total_ns)} in all."
        )
    if len(savings) == 1:
        return sentence + f"; saving {format_duration(group.total_ns)}."
    return (
        sentence + f"; median saving {format_duration(percentile(savings, 0.5))}, "
        f"{format_duration(group.total_ns)} in all."
    )


def _findings_section(
    profiles: Sequence[Totals], findings: Mapping[str, Sequence[Finding]], glyphs: Glyphs
) -> list[str]:
    groups = aggregate_findings(findings)
    if not groups:
        return []
    saving = [group for group in groups if group.total_ns > 0 or _leads(group.kind)]
    # Findings that save no time are listed by how many traces they occur in.
    other = sorted((group for group in groups if group not in saving), key=lambda g: -len(g.savings))
    lines = ["", "What to change across traces (the largest total saving first)"]
    for number, group in enumerate(saving[:_WITH_SAVING], 1):
        lines += _paragraph(_sentence(group, len(profiles)), f"  {number:>2}. ", "      ", glyphs)
    if len(saving) > _WITH_SAVING:
        lines.append(f"  {glyphs.ellipsis} {plural(len(saving) - _WITH_SAVING, 'more finding')} with a saving")
    if other:
        lines += ["", "Also found, without an estimated saving (in the most traces first)"]
        for group in other[:_WITHOUT_SAVING]:
            lines += _paragraph(_sentence(group, len(profiles)), "  - ", "    ", glyphs)
        if len(other) > _WITHOUT_SAVING:
            lines.append(f"  {glyphs.ellipsis} {plural(len(other) - _WITHOUT_SAVING, 'more finding')}")
    return lines


def cross_trace_summary(
    profiles: Sequence[Totals],
    findings: Mapping[str, Sequence[Finding]] | None = None,
    *,
    ascii_only: bool = False,
    splits: Sequence[SplitLLMCall] | None = None,
) -> str:
    """The summary of many traces: durations, categories, top operations and findings aggregated across traces.

    Args:
        profiles: The traces; at least one.
        findings: Each trace's findings (``core.findings.find_all``) by trace id; none are listed without them.
        ascii_only: Draw with ASCII characters only.
        splits: The LLM calls split into traces of their own (``core.split_traces``); found here when not given.
    """
    glyphs = ASCII if ascii_only else UNICODE
    if splits is None:
        splits = find_split_llm_calls(_calls(trace) for trace in profiles)
    lines = _header(profiles, splits, glyphs)
    lines += _category_table(profiles, glyphs)
    lines += _operations_table(profiles, glyphs)
    if findings:
        lines += _findings_section(profiles, findings, glyphs)
    return "\n".join(lines) + "\n"


def render_many_traces(
    profiles: Sequence[TraceProfile],
    *,
    top: int | None = DEFAULT_TOP,
    max_spans: int = 60,
    ascii_only: bool = False,
    findings: Mapping[str, Sequence[Finding]] | None = None,
    max_lines: int | None = None,
) -> str:
    """The text report of many traces: the cross-trace summary, then the ``top`` slowest traces in detail.

    With ``MANY_TRACES`` traces or fewer, every trace in detail as ``render_traces`` writes them.

    Args:
        profiles: The traces.
        top: How many of the slowest traces to show in detail; ``None`` for every trace, in input order.
        max_spans: Spans shown per trace in the span tree.
        ascii_only: Draw with ASCII characters only.
        findings: Each trace's findings by trace id.
        max_lines: With ``top``, the length the report is fitted to (see ``compose_report``).
    """
    if len(profiles) <= MANY_TRACES:
        detail = render_traces(profiles, max_spans=max_spans, ascii_only=ascii_only, findings=findings)
        note = split_calls_note(find_split_llm_calls(profiles))
        if note is None:
            return detail
        lines = _paragraph("! " + note, "", "  ", ASCII if ascii_only else UNICODE)
        return "\n".join(lines) + "\n\n" + detail
    shown = list(profiles) if top is None else sorted(profiles, key=slowest_first)[:top]

    def details(budget: int | None) -> Iterable[str]:
        for profile in shown:
            found = (findings or {}).get(profile.trace_id)
            yield trace_detail(profile, found, max_spans=max_spans, ascii_only=ascii_only, max_lines=budget)

    return compose_report(
        profiles, findings, details, len(shown), every=top is None, ascii_only=ascii_only, max_lines=max_lines
    )


def _calls(trace: Totals) -> TraceProfile | TraceCalls:
    return trace.calls if isinstance(trace, TraceTotals) else cast(TraceProfile, trace)


def trace_detail(
    profile: TraceProfile,
    findings: Sequence[Finding] | None,
    *,
    max_spans: int,
    ascii_only: bool,
    max_lines: int | None = None,
) -> str:
    """One trace's own report after the summary: as ``render_trace`` writes it, with at most
    ``FINDINGS_PER_TRACE`` findings (the summary has ranked them across traces), its span tree
    cut to ``max_lines`` if given."""
    return render_trace(
        profile,
        max_spans=max_spans,
        ascii_only=ascii_only,
        findings=findings or (),
        max_findings=FINDINGS_PER_TRACE,
        max_lines=max_lines,
    )


def slowest_first(trace: Totals) -> tuple[int, str]:
    """The order of the traces shown in detail after the summary: slowest first, then by trace id."""
    return (-trace.duration_ns, trace.trace_id)


def compose_report(
    traces: Sequence[Totals],
    findings: Mapping[str, Sequence[Finding]] | None,
    details: Callable[[int | None], Iterable[str]],
    shown: int,
    *,
    every: bool,
    ascii_only: bool = False,
    max_lines: int | None = None,
) -> str:
    """The cross-trace summary of ``traces``, then the ``shown`` traces' own reports, every trace
    in input order when ``every``, else the slowest first.

    ``details(budget)`` yields those reports (``trace_detail``, at most ``FINDINGS_PER_TRACE``
    findings each), each fitted to ``budget`` lines if not None. With ``max_lines`` and not
    ``every``, the budget is what the summary leaves of ``max_lines``, shared equally: the
    summary is bounded by constants, and each report's span tree gives way first.
    """
    glyphs = ASCII if ascii_only else UNICODE
    if every:
        heading = f"All {plural(shown, 'trace')} in detail"
    else:
        slowest = "The slowest trace" if shown == 1 else f"The {plural(shown, 'slowest trace')}"
        heading = f"{slowest} in detail (--top N shows more, --all every trace)"
    summary = cross_trace_summary(traces, findings, ascii_only=ascii_only)
    rule = glyphs.rule * WIDTH
    if not shown:
        return summary
    budget = None
    if max_lines is not None and not every:
        # The heading takes four lines (a blank line, it, a rule, a blank line), each rule between two
        # reports three.
        budget = (max_lines - summary.count("\n") - 4 - 3 * (shown - 1)) // shown
    # The summary has ranked the findings across traces: fewer of each trace's own keep the report short.
    detail = f"\n{rule}\n\n".join(details(budget))
    return f"{summary}\n{heading}\n{rule}\n\n{detail}"

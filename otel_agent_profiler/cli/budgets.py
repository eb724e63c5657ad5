"""``--budget`` and ``--what-if``: their argument types, options and what the commands do with them.

Budgets are checked as findings (``find_budget_overruns``); a trace over any budget makes the
command exit with ``EXIT_BUDGET_EXCEEDED``, so CI can gate on it. What-ifs are applied together
(``what_ifs_together``) and reported per trace.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

from ..core.categories import CATEGORIES
from ..core.units import format_duration, plural
from .arguments import EXIT_BUDGET_EXCEEDED, PROG

# The findings are imported where they are used: the options here are in every command's `--help`,
# which does not need them.
if TYPE_CHECKING:
    from ..core import TraceProfile
    from ..core.findings import Finding, FindingOptions, JSONValue, WhatIfProjection

#: The measures of ``--budget``, as written on the command line.
MEASURES = ("cost", "duration", "tokens")

_DURATION_UNITS_MS = {"ms": 1.0, "s": 1000.0, "m": 60_000.0}
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(ms|s|m)\s*$")
_BUDGET_USAGE = "expected MEASURE=LIMIT or CATEGORY.MEASURE=LIMIT, such as cost=0.50, duration=30s or llm.tokens=100000"


class Budget(NamedTuple):
    """One ``--budget``: a limit on a measure of the trace, or of one category of its spans.

    A named tuple, not a dataclass: defining a dataclass costs every start-up of the command line
    the import of ``dataclasses`` (and ``inspect``) before any option is read.
    """

    #: ``cost`` (US dollars), ``duration`` (milliseconds) or ``tokens``.
    measure: str
    limit: float
    #: None: the whole trace.
    category: str | None = None


def budget(text: str) -> Budget:
    """``--budget``'s type: ``cost=0.50``, ``duration=30s``, ``tokens=200000``, ``llm.tokens=...``."""
    name, equals, value = text.partition("=")
    if not equals or not name.strip() or not value.strip():
        raise argparse.ArgumentTypeError(_BUDGET_USAGE)
    category, dot, measure = name.strip().rpartition(".")
    if dot and category not in CATEGORIES:
        raise argparse.ArgumentTypeError(f"unknown category {category!r} in {text!r}; one of {', '.join(CATEGORIES)}")
    if measure not in MEASURES:
        raise argparse.ArgumentTypeError(f"unknown measure {measure!r} in {text!r}; one of {', '.join(MEASURES)}")
    value = value.strip()
    if measure == "duration":
        match = _DURATION.match(value)
        if match is None:
            raise argparse.ArgumentTypeError(f"{value!r} is not a duration such as 30s, 500ms or 2m")
        limit = float(match.group(1)) * _DURATION_UNITS_MS[match.group(2)]
    elif measure == "tokens":
        try:
            limit = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r} is not a whole number of tokens") from None
    else:
        try:
            limit = float(value.removeprefix("$"))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r} is not an amount of US dollars, such as 0.50") from None
    if not (limit >= 0 and math.isfinite(limit)):
        raise argparse.ArgumentTypeError(f"a budget must be a finite number of at least 0, got {value!r}")
    return Budget(measure, limit, category or None)


def what_if(text: str) -> tuple[str, float]:
    """``--what-if``'s type: ``SELECTOR=FACTOR`` such as ``llm:gpt-4o=2x``, as ``(selector, speedup)``."""
    selector, equals, factor = text.rpartition("=")
    selector, factor = selector.strip(), factor.strip()
    if not equals or not selector or not factor:
        raise argparse.ArgumentTypeError(f"expected SELECTOR=FACTOR, such as llm:gpt-4o=2x, got {text!r}")
    head, colon, tail = selector.partition(":")
    if head != "span" and head not in CATEGORIES:
        raise argparse.ArgumentTypeError(f"unknown category {head!r} in {text!r}; one of {', '.join(CATEGORIES)}")
    if colon and not tail:
        raise argparse.ArgumentTypeError(f"no operation after {head + ':'!r} in {text!r}")
    try:
        speedup = float(factor.removesuffix("x").removesuffix("X"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{factor!r} is not a factor such as 2x (twice as fast) or 0.5x (twice as slow)"
        ) from None
    if not (speedup > 0 and math.isfinite(speedup)):
        raise argparse.ArgumentTypeError(f"the factor must be above 0 and finite, got {factor!r}")
    return selector, speedup


#: What the ``--help`` of a command with ``--budget`` says about exit codes.
EXIT_CODES_HELP = (
    "Exit codes: 0 all went well, 1 the output could not be written, 2 some input could not be read or "
    f"the command line was wrong, {EXIT_BUDGET_EXCEEDED} a budget was exceeded (checked last: a run with "
    "unreadable input exits 2 even when over budget)."
)


def add_budget_option(parser: argparse.ArgumentParser) -> None:
    """``--budget MEASURE=LIMIT`` (repeatable)."""
    _add_repeatable(
        parser,
        "--budget",
        budget,
        "MEASURE=LIMIT",
        (
            "a limit every trace must keep, reported as a finding and on standard error when exceeded, "
            f"and then the exit code is {EXIT_BUDGET_EXCEEDED}; repeatable. Measures: cost (US dollars, "
            "e.g. cost=0.50; needs prices, see --prices), duration (end to end, with a unit: 30s, 500ms, 2m), "
            "tokens (e.g. tokens=200000). CATEGORY.MEASURE limits one category: llm.tokens=100000, "
            "llm.cost=0.10, tool.duration=5s, where a category's duration is the time its spans hold on the "
            "critical path (their share of the end-to-end time; self time would count parallel calls twice)"
        ),
    )


def add_what_if_option(parser: argparse.ArgumentParser) -> None:
    """``--what-if SELECTOR=FACTOR`` (repeatable)."""
    _add_repeatable(
        parser,
        "--what-if",
        what_if,
        "SELECTOR=FACTOR",
        (
            "project each trace with some spans faster or slower and show its duration and new critical path; "
            "repeatable, and all given apply together. SELECTOR: a category (llm, tool, ...), "
            "CATEGORY:OPERATION (llm:gpt-4o, a model also matching its dated snapshots; tool:search) or "
            "span:SPAN_ID; the spans and everything they called change. FACTOR: 2x = twice as fast, "
            "0.5x = twice as slow. A span two selectors pick takes the last one's factor"
        ),
    )


def _add_repeatable(
    parser: argparse.ArgumentParser, flag: str, type_: Callable[[str], object], metavar: str, help_: str
) -> None:
    # Given any number of times, each value parsed on its own, into a list (empty when not given).
    parser.add_argument(flag, type=type_, action="append", default=[], metavar=metavar, help=help_)


def finding_options(
    min_saving: float, budgets: Sequence[Budget], context_windows: Mapping[str, int] | None = None
) -> FindingOptions:
    """The findings' options with the given budgets (a later budget on the same measure wins) and
    context windows (None: the built-in ones)."""
    import dataclasses

    from ..core.findings import FindingOptions

    trace: dict[str, float] = {}
    categories: dict[str, dict[str, float]] = {}
    core_measure = {"cost": "cost_usd", "duration": "critical_path_ms", "tokens": "tokens"}
    for given in budgets:
        if given.category is None:
            trace[given.measure] = given.limit
        else:
            categories.setdefault(given.category, {})[core_measure[given.measure]] = given.limit
    tokens = trace.get("tokens")
    options = FindingOptions(
        min_saving=min_saving,
        budget_tokens=int(tokens) if tokens is not None else None,
        budget_cost_usd=trace.get("cost"),
        budget_latency_ms=trace.get("duration"),
        category_budgets=categories,
    )
    return options if context_windows is None else dataclasses.replace(options, context_windows=dict(context_windows))


def overruns(
    profiles: Iterable[TraceProfile], options: FindingOptions, findings: Mapping[str, list[Finding]] | None = None
) -> int:
    """Print a line on standard error per budget a trace exceeds; how many there were.

    Uses the traces' findings where they were made, else checks the budgets alone (no projection).
    """
    if not has_budgets(options):
        return 0
    from ..core.findings import find_budget_overruns

    by_trace: dict[str, Sequence[Finding]] = {}
    for profile in profiles:
        found = findings.get(profile.trace_id) if findings is not None else None
        by_trace[profile.trace_id] = find_budget_overruns(profile, options) if found is None else found
    return print_overruns(by_trace)


def print_overruns(findings: Mapping[str, Sequence[Finding]]) -> int:
    """Print a line on standard error per budget overrun among ``findings`` (by trace id); how many there were."""
    from ..core.findings import BUDGET_EXCEEDED

    count = 0
    for trace_id, found in findings.items():
        for finding in found:
            if finding.kind == BUDGET_EXCEEDED:
                count += 1
                print(f"{PROG}: budget exceeded: trace {trace_id}: {finding.title}", file=sys.stderr)
    return count


def has_budgets(options: FindingOptions) -> bool:
    """Whether ``options`` set any budget."""
    trace = (options.budget_tokens, options.budget_cost_usd, options.budget_latency_ms)
    return any(limit is not None for limit in trace) or bool(options.category_budgets)


# What-ifs


def projections(profiles: Iterable[TraceProfile], changes: Sequence[tuple[str, float]]) -> dict[str, WhatIfProjection]:
    """Every trace with the what-ifs applied together, by trace id (empty without what-ifs)."""
    if not changes:
        return {}
    from ..core.findings import what_ifs_together

    return {profile.trace_id: what_ifs_together(profile, changes) for profile in profiles}


def add_to_document(document: dict[str, JSONValue], projected: Mapping[str, WhatIfProjection]) -> None:
    """Put each trace's ``what_if`` into the JSON document of ``analyze``."""
    traces = document.get("traces")
    if not projected or not isinstance(traces, list):
        return
    for trace in traces:
        if isinstance(trace, dict) and isinstance(trace.get("trace_id"), str):
            found = projected.get(str(trace["trace_id"]))
            if found is not None:
                trace["what_if"] = found.to_dict()


def _change_words(selector: str, speedup: float) -> str:
    head, colon, tail = selector.partition(":")
    if head == "span":
        spans = f"span {tail}"
    elif colon:
        spans = f"{tail} calls" if head in ("llm", "embedding", "tool") else f"{head} {tail} spans"
    else:
        spans = {"llm": "LLM calls", "embedding": "embedding calls", "tool": "tool calls"}.get(head, f"{head} spans")
    verb = "was" if head == "span" else "were"
    if speedup == 1:
        return f"{spans} {verb} unchanged"
    if speedup > 1:
        return f"{spans} {verb} {'twice' if speedup == 2 else f'{speedup:g} times'} as fast"
    slower = 1 / speedup
    return f"{spans} {verb} {'twice' if slower == 2 else f'{slower:g} times'} as slow"


def _step_words(step: Mapping[str, JSONValue]) -> str:
    name, operation, duration = step.get("name"), step.get("operation"), step.get("duration_ns")
    text = f"'{name}'"
    if isinstance(operation, str) and isinstance(name, str) and operation and operation not in name:
        text += f" ({operation})"
    return f"{text} for {format_duration(duration)}" if isinstance(duration, int) else text


def what_if_text(
    profiles: Sequence[TraceProfile], changes: Sequence[tuple[str, float]], projected: Mapping[str, WhatIfProjection]
) -> str:
    """The text report's what-if section: per trace, the projected duration and the new critical path."""
    if not changes or not profiles:
        return ""
    words = [_change_words(selector, speedup) for selector, speedup in changes]
    said = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
    lines = ["", f"What if {said}{' (together)' if len(words) > 1 else ''}"]
    for profile in profiles:
        if len(profiles) > 1:
            lines.append(f"  Trace {profile.trace_id}")
        lines.extend(_what_if_lines(profile, projected[profile.trace_id]))
    return "\n".join(lines) + "\n"


def _what_if_lines(profile: TraceProfile, result: WhatIfProjection) -> list[str]:
    if not any(change["matched_spans"] for change in result.changes):
        return ["  No span matches, so the trace is unchanged."]
    before, after = result.duration_ns, result.projected_duration_ns
    if after < before:
        change = f"{format_duration(before - after)} sooner, {(before - after) / before:.0%} less"
    elif after > before:
        change = f"{format_duration(after - before)} later, {(after - before) / before:.0%} more"
    else:
        change = "no change"
    shown = _path_words(profile, result, after)
    sentence = f"The trace would take {format_duration(after)} instead of {format_duration(before)} ({change})."
    path = f"Its critical path would run through {_listed(shown)}." if shown else ""
    return [
        *textwrap.wrap(sentence, 78, initial_indent="  ", subsequent_indent="    "),
        # A duration's number and unit stay on one line: wrapped with a no-break space between them.
        *(
            line.replace(_NO_BREAK, " ")
            for line in textwrap.wrap(path, 78, initial_indent="  ", subsequent_indent="    ", break_on_hyphens=False)
        ),
    ]


_NO_BREAK = "\u00a0"


def _unbroken(duration_ns: int) -> str:
    return format_duration(duration_ns).replace(" ", _NO_BREAK)


def _listed(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _path_words(profile: TraceProfile, result: WhatIfProjection, after: int) -> list[str]:
    """The projected critical path as the spans whose own time is on it, with that time, so that the
    times named add up to the path: a parent's time between its children counts as the parent's own
    ("'invoke_agent a' itself for 350 ms"), not only the spans at the bottom."""
    parent_of = {s.record.span_id: s.record.parent_span_id for s in profile.spans}
    steps = [step for step in result.critical_path if isinstance(step.get("span_id"), str)]
    length: dict[str, int] = {}
    for step in steps:
        duration = step.get("duration_ns")
        length[str(step["span_id"])] = duration if isinstance(duration, int) else 0
    # A span's own time on the path: its length less that of its children on the path.
    own = dict(length)
    leaves = set(length)
    for span_id in length:
        parent = parent_of.get(span_id)
        if parent is not None and parent in own:
            own[parent] -= length[span_id]
            leaves.discard(parent)
    return _named_shares([(step, own[str(step["span_id"])], str(step["span_id"]) in leaves) for step in steps], after)


def _named_shares(shares: list[tuple[Mapping[str, JSONValue], int, bool]], after: int) -> list[str]:
    """The largest shares of the path by name, in the path's order; the rest counted with their time."""
    holding = [(step, ns, leaf) for step, ns, leaf in shares if ns > 0]
    largest = sorted(range(len(holding)), key=lambda i: -holding[i][1])[:_PATH_SPANS_SHOWN]
    words = []
    for index in sorted(largest):
        step, ns, leaf = holding[index]
        itself = "" if leaf else " itself"
        words.append(f"{_step_words({**step, 'duration_ns': None})}{itself} for {_unbroken(ns)}")
    rest = [ns for index, (_, ns, _) in enumerate(holding) if index not in largest]
    if rest:
        words.append(f"{plural(len(rest), 'more span')} for {_unbroken(sum(rest))}")
    between = after - sum(ns for _, ns, _ in holding)
    if between > 0 and words:
        # Time between the roots of a trace with several: no span holds it.
        words.append(f"{_unbroken(between)} between spans")
    return words


_PATH_SPANS_SHOWN = 6

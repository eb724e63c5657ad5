"""What the text report says of each finding kind: a golden text per kind, and a trace where it must stay quiet.

Every kind in the registry has a small hand-built trace on which it fires (``FIRES``); its findings are
rendered as the text report's "What to change" section and compared with
tests/data/golden/findings/<kind>.txt, to be read as a user would read them. After a deliberate change
to what findings say, refresh every golden file in one step and read the diff:

    UPDATE_GOLDEN=1 pytest tests/report/test_finding_texts.py

Every kind also has a trace on which it must not fire (``QUIET``), each with the reason. A kind added
to the registry without both fails ``test_every_kind_has_a_golden_and_a_quiet_trace``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import pytest

from otel_agent_profiler.adapters.recorded_attributes import RECORDED_ATTRIBUTES
from otel_agent_profiler.core import PriceTable, SpanRecord, TraceProfile, profile_trace
from otel_agent_profiler.core.findings import (
    BOTTLENECK,
    BUDGET_EXCEEDED,
    BY_KIND,
    KINDS,
    LARGE_PROMPT,
    LLM_DECODE,
    LLM_GAPS,
    LLM_PREFILL,
    LLM_QUEUE,
    LLM_TIMING,
    PARALLELIZABLE,
    PREFIX_CACHE,
    REPEATED_TOOL_CALL,
    SEQUENTIAL_LLM_CHAIN,
    SLOW_TOOL,
    TOKEN_PROFILE,
    WHAT_IF,
    Finding,
    FindingOptions,
    find_all,
)
from otel_agent_profiler.report.text import WIDTH, render_findings
from tests.core.test_call_anatomy import agent_with_served_call
from tests.support.paths import DATA
from tests.support.span_builders import span, with_events

GOLDEN = DATA / "golden" / "findings"
MS = 1_000_000
CHUNK = "gen_ai.content.completion.chunk"


def agent(name: str, start: int, end: int) -> SpanRecord:
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}
    return span(name, None, start * MS, end * MS, attributes=attributes)


def llm(
    name: str,
    start: int,
    end: int,
    model: str = "gpt-4o",
    tokens: tuple[int, int] | None = None,
    cached: int | None = None,
    **extra: object,
) -> SpanRecord:
    attributes: dict[str, object] = {"gen_ai.operation.name": "chat", "gen_ai.request.model": model, **extra}
    if tokens is not None:
        attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"] = tokens
    if cached is not None:
        attributes["gen_ai.usage.cache_read.input_tokens"] = cached
    return span(name, "root", start * MS, end * MS, attributes=attributes)


def tool(name: str, start: int, end: int, tool_name: str, **extra: object) -> SpanRecord:
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool_name, **extra}
    return span(name, "root", start * MS, end * MS, attributes=attributes)


def embedding(name: str, start: int, end: int) -> SpanRecord:
    attributes = {"gen_ai.operation.name": "embeddings", "gen_ai.request.model": "text-embedding-3-small"}
    return span(name, "root", start * MS, end * MS, attributes=attributes)


@dataclass(frozen=True)
class Case:
    """A trace and the options a finder looks at it with."""

    records: list[SpanRecord]
    options: FindingOptions = field(default_factory=FindingOptions)
    prices: PriceTable | None = None
    #: Why the kind must stay quiet on this trace (``QUIET`` only).
    why: str = ""

    def profile(self) -> TraceProfile:
        return profile_trace(self.records, prices=self.prices, recorded=RECORDED_ATTRIBUTES)


PRICES = PriceTable.from_mapping({"gpt-4o": {"input": 2.5, "output": 10.0, "cached_input": 1.25}})
REFUND = '{"query": "refund policy"}'

# An LLM call, a tool, another LLM call: the shape most agents have.
SUPPORT = [
    agent("root", 0, 1000),
    llm("llm1", 0, 300, tokens=(3000, 120)),
    tool("search", 300, 650, "search_kb"),
    llm("llm2", 650, 1000, tokens=(4200, 300)),
]

FIRES: dict[str, Case] = {
    BUDGET_EXCEEDED: Case(SUPPORT, FindingOptions(budget_tokens=5000, budget_latency_ms=800)),
    # The embedding call runs beside a tool almost as long: removing it saves only the difference.
    BOTTLENECK: Case(
        [
            agent("root", 0, 1000),
            embedding("embed", 0, 400),
            tool("lookup", 0, 350, "lookup"),
            llm("answer", 400, 1000, tokens=(2000, 80)),
        ],
        FindingOptions(top_n=2),
    ),
    PARALLELIZABLE: Case(
        [
            agent("root", 0, 1000),
            llm("llm1", 0, 200),
            tool("weather", 200, 500, "get_weather", **{"gen_ai.tool.call.id": "call_a"}),
            tool("clock", 500, 700, "get_time", **{"gen_ai.tool.call.id": "call_b"}),
            llm("llm2", 700, 950),
        ]
    ),
    REPEATED_TOOL_CALL: Case(
        [
            agent("root", 0, 800),
            llm("llm1", 0, 100),
            tool("s1", 100, 300, "search_kb", **{"gen_ai.tool.call.arguments": REFUND}),
            llm("llm2", 300, 400),
            tool("s2", 400, 600, "search_kb", **{"gen_ai.tool.call.arguments": REFUND}),
            llm("llm3", 600, 800),
        ]
    ),
    SLOW_TOOL: Case(
        [
            agent("root", 0, 2000),
            llm("llm1", 0, 100),
            tool("fetch", 100, 1600, "web_fetch"),
            tool("warm", 100, 700, "warm_cache"),
            llm("llm2", 1600, 1950),
        ]
    ),
    WHAT_IF: Case(SUPPORT, FindingOptions(what_ifs=(("tool:search_kb", 2.0),))),
    LLM_QUEUE: Case(agent_with_served_call(queue_s=0.5, prefill_s=0.2, decode_s=0.2)),
    SEQUENTIAL_LLM_CHAIN: Case(
        [
            agent("root", 0, 1000),
            llm("l1", 0, 150, tokens=(1000, 10)),
            llm("l2", 150, 300, tokens=(1100, 20)),
            tool("t1", 300, 350, "lookup"),
            llm("l3", 350, 500, tokens=(1200, 30)),
            llm("l4", 500, 700, tokens=(1300, 40)),
        ]
    ),
    LARGE_PROMPT: Case([agent("root", 0, 300), llm("big", 0, 300, tokens=(100_000, 500))]),
    LLM_TIMING: Case(
        [
            agent("root", 0, 1000),
            with_events(llm("l1", 0, 400, tokens=(500, 100)), (CHUNK, 300 * MS), (CHUNK, 390 * MS)),
            with_events(llm("l2", 500, 900, tokens=(500, 50)), (CHUNK, 800 * MS)),
        ]
    ),
    LLM_GAPS: Case(
        [
            agent("root", 0, 700),
            llm("l1", 0, 100),
            tool("t", 120, 300, "lookup"),
            llm("l2", 350, 500),
            llm("l3", 520, 700),
        ]
    ),
    LLM_PREFILL: Case(agent_with_served_call(queue_s=0.0, prefill_s=0.7, decode_s=0.2)),
    LLM_DECODE: Case(agent_with_served_call(queue_s=0.0, prefill_s=0.1, decode_s=0.8)),
    # The third call's prompt is below OpenAI's caching minimum (1,024 tokens): it is left out.
    PREFIX_CACHE: Case(
        [
            agent("root", 0, 900),
            llm("l1", 0, 300, tokens=(4000, 100), cached=0),
            llm("l2", 300, 600, tokens=(4200, 100), cached=1000),
            llm("l3", 600, 900, tokens=(800, 100), cached=0),
        ]
    ),
    TOKEN_PROFILE: Case(SUPPORT, prices=PRICES),
}

QUIET: dict[str, Case] = {
    BUDGET_EXCEEDED: Case(
        SUPPORT, FindingOptions(budget_tokens=10_000, budget_latency_ms=1000), why="within every budget"
    ),
    BOTTLENECK: Case([agent("root", 5, 5)], why="nothing holds any time of the critical path"),
    PARALLELIZABLE: Case(
        [
            agent("root", 0, 800),
            llm("llm1", 0, 200),
            tool("weather", 200, 500, "get_weather"),
            tool("clock", 200, 400, "get_time"),
            llm("llm2", 500, 800),
        ],
        why="the tools already ran together",
    ),
    REPEATED_TOOL_CALL: Case(
        [
            agent("root", 0, 600),
            tool("s1", 0, 200, "search_kb", **{"gen_ai.tool.call.arguments": REFUND}),
            tool("s2", 200, 400, "search_kb", **{"gen_ai.tool.call.arguments": '{"query": "shipping"}'}),
        ],
        why="the arguments differ",
    ),
    SLOW_TOOL: Case(
        [agent("root", 0, 1000), llm("llm1", 0, 800), tool("t", 800, 950, "lookup")],
        why="the tool's 150 ms is below 1 s and below a fifth of the trace",
    ),
    WHAT_IF: Case(SUPPORT, why="no what-if was asked"),
    LLM_QUEUE: Case(
        agent_with_served_call(queue_s=0.05, prefill_s=0.4, decode_s=0.4), why="50 ms in the queue is no saturation"
    ),
    SEQUENTIAL_LLM_CHAIN: Case(SUPPORT, why="two calls in a row are no chain"),
    LARGE_PROMPT: Case(
        [agent("root", 0, 300), llm("small", 0, 300, tokens=(20_000, 500))], why="20,000 tokens of 128,000"
    ),
    LLM_TIMING: Case(SUPPORT, why="no call streams"),
    LLM_GAPS: Case(
        [agent("root", 0, 400), llm("l1", 0, 200), llm("l2", 200, 400)],
        why="the calls ran back to back: no time passed between them",
    ),
    LLM_PREFILL: Case(
        agent_with_served_call(queue_s=0.0, prefill_s=0.4, decode_s=0.4), why="prefill is half, not most"
    ),
    LLM_DECODE: Case(agent_with_served_call(queue_s=0.0, prefill_s=0.4, decode_s=0.4), why="decode is half, not most"),
    PREFIX_CACHE: Case(
        [agent("root", 0, 600), llm("l1", 0, 300, tokens=(4000, 100)), llm("l2", 300, 600, tokens=(4200, 100))],
        why="the instrumentation records no cached tokens, so the cache's share is unknown",
    ),
    TOKEN_PROFILE: Case([agent("root", 0, 300), tool("t", 0, 300, "lookup")], why="no LLM call used a token"),
}


def found(kind: str, case: Case) -> tuple[TraceProfile, list[Finding]]:
    """What the kind's finder finds of its kind on the case's trace."""
    trace = case.profile()
    return trace, [f for f in BY_KIND[kind].finder(trace, case.options) if f.kind == kind]


def test_every_kind_has_a_golden_and_a_quiet_trace() -> None:
    assert set(FIRES) == set(KINDS)
    assert set(QUIET) == set(KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_the_text_of_each_kind_matches_its_golden_file(kind: str) -> None:
    trace, findings = found(kind, FIRES[kind])
    assert findings, f"{kind} did not fire on its trace"
    text = render_findings(trace, findings)
    golden = GOLDEN / f"{kind}.txt"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text, encoding="utf-8")
    assert text == golden.read_text(encoding="utf-8"), f"{kind}: UPDATE_GOLDEN=1 refreshes {golden.name}"
    assert all(len(line) <= WIDTH for line in text.splitlines())


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_stays_quiet_where_the_trace_does_not_show_it(kind: str) -> None:
    case = QUIET[kind]
    _, findings = found(kind, case)
    assert findings == [], f"{kind} fired though {case.why}"


def test_findings_folded_into_another_are_not_announced_in_text() -> None:
    # Each gpt-4o call is a bottleneck of its own, folded into the finding about both: the text report
    # shows neither, so it does not say "this includes 2 smaller findings".
    trace = Case(SUPPORT).profile()
    findings = find_all(trace)
    assert any(f.details for f in findings)
    assert "smaller finding" not in render_findings(trace, findings)

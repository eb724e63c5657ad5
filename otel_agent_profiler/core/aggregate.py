"""Per-trace totals: time per category and operation, token usage, LLM call counts."""

from __future__ import annotations

from .call_parts import repeated_self_time_ns
from .categories import EMBEDDING, LLM, TOOL
from .genai import TokenUsage, same_model
from .pricing import PriceTable
from .profile import OperationStats, SpanProfile, TraceProfile
from .recorded import RecordedValues
from .same_call import is_nested


def mark_nested_llm_duplicates(spans: list[SpanProfile]) -> None:
    """Count an LLM call once when two instrumentations nest a span each for it.

    A chain is an LLM span whose only child is an LLM span for the same model (and so on
    down). Of each chain, the span with the most complete token usage is counted (the deepest
    of those as complete: the closest to the wire), else the deepest; the others are marked
    ``counted = False`` and ``same_call_as`` the counted one.
    """
    for span in spans:
        if span.category != LLM:
            continue
        # Most LLM spans have no LLM child of their model: asked first, that spares the look at the parent.
        child = _single_same_model_llm_child(span)
        if child is None or _is_chain_link_below(span):
            continue
        chain = [span, child]
        while (child := _single_same_model_llm_child(chain[-1])) is not None:
            chain.append(child)
        # max() keeps the first of equals: reversed, that is the deepest.
        keep = max(reversed(chain), key=usage_completeness)
        for link in chain:
            link.counted = link is keep
            if link is not keep:
                link.same_call_as = keep


def usage_completeness(span: SpanProfile) -> tuple[bool, int]:
    """How completely a span records its call's usage: whether it records any, then how many counts."""
    usage = span.tokens
    if usage is None:
        return (False, 0)
    return (True, sum(1 for count in (usage.input, usage.output, usage.cached_input, usage.reasoning) if count))


def mark_nested_tool_duplicates(spans: list[SpanProfile]) -> None:
    """Count a tool call once when it is described by nested spans, and a ``(merged)`` wrapper not at all.

    A tool span whose only child is a tool span of the same tool (AutoGen, a framework's span
    around an instrumentation's) is one call: the deepest is counted, the others point at it
    with ``same_call_as``. Google ADK writes an ``execute_tool (merged)`` span for the parallel
    tool calls of one model response: it is no call of a tool named ``(merged)`` (nor of ``(merged tools)``,
    the tool name ADK 2.x gives it).
    """
    for span in spans:
        if span.category != TOOL or not span.counted:
            continue
        if span.operation in MERGED_TOOLS:
            span.counted = False
            continue
        if len(span.children) != 1:
            continue  # no chain goes down from here (most tool spans): nothing to mark
        parent = span.parent
        if parent is not None and parent.category == TOOL and _single_same_tool_child(parent) is span:
            continue
        chain = [span]
        while (child := _single_same_tool_child(chain[-1])) is not None:
            chain.append(child)
        keep = chain[-1]
        for link in chain[:-1]:
            link.counted = False
            link.same_call_as = keep


#: The operation of Google ADK's span around the parallel tool calls of one model response: its span name's
#: suffix, or the ``gen_ai.tool.name`` ADK 2.x writes on it.
MERGED_TOOLS = frozenset({"(merged)", "(merged tools)"})


def _single_same_tool_child(span: SpanProfile) -> SpanProfile | None:
    if len(span.children) != 1:
        return None
    child = span.children[0]
    return child if child.category == TOOL and child.operation == span.operation else None


def _single_same_model_llm_child(span: SpanProfile) -> SpanProfile | None:
    if len(span.children) != 1:
        return None
    child = span.children[0]
    if child.category == LLM and child.same_call_as is None and same_model(span.model, child.model):
        return child
    return None


def _is_chain_link_below(span: SpanProfile) -> bool:
    parent = span.parent
    return parent is not None and parent.category == LLM and _single_same_model_llm_child(parent) is span


def aggregate(profile: TraceProfile, prices: PriceTable | None = None, recorded: RecordedValues | None = None) -> None:
    """Fill the trace-level totals of ``profile`` from its spans (and costs, given prices, or
    costs recorded on the spans that ``recorded`` reads)."""
    recorded_cost = recorded.cost_usd if recorded is not None else None
    operations = profile.operations
    critical_path_tokens = profile.critical_path_tokens
    llm_calls = 0
    # A call is on the critical path when any of its spans is (a copy the walk went through).
    calls_on_path: set[int] = set()
    for span in profile.spans:
        call = span.same_call_as
        if call is not None and span.on_critical_path and span.category == call.category:
            calls_on_path.add(id(call))
    for span in profile.spans:
        category = span.category
        key = (category, span.operation)
        op = operations.get(key)
        if op is None:
            op = operations[key] = OperationStats(category, span.operation)
        call = span.same_call_as
        if call is not None and category == call.category:
            # A copy of a call, or its request on the wire: the call's duration is counted on its
            # own span, and a copy beside it adds only its self time outside the call's span.
            self_time = span.self_time_ns
            if not is_nested(span, call):
                self_time -= repeated_self_time_ns(span, call)
            op.self_time_ns += self_time
        else:
            op.duration_ns += span.end_ns - span.start_ns
            op.self_time_ns += span.self_time_ns
        op.critical_path_ns += span.critical_path_ns
        if not span.counted:
            continue
        op.count += 1
        if category == LLM:
            llm_calls += 1
        # Only LLM and embedding spans count tokens: agent spans often repeat their
        # children's usage as a total, which would count it twice.
        usage = span.tokens
        if category == LLM or category == EMBEDDING:
            on_path = span.on_critical_path or id(span) in calls_on_path
            if usage is not None:
                op.tokens.add(usage)
                if on_path:
                    critical_path_tokens.add(usage)
            cost = recorded_cost(span.record.attributes) if recorded_cost is not None else None
            if cost is not None or (usage is not None and prices is not None):
                _add_cost(profile, span, prices, cost, on_path)
    profile.llm_calls = llm_calls

    # Every span has one category and one operation, so the category totals, and (as an LLM
    # or embedding span's operation is its model) the model totals follow from the
    # operation totals, with far fewer additions than per span.
    categories = profile.categories
    tokens_by_model = profile.tokens_by_model
    critical_path_ns = 0
    for (category, operation), op in operations.items():
        stats = categories[category]
        stats.count += op.count
        stats.duration_ns += op.duration_ns
        stats.self_time_ns += op.self_time_ns
        stats.critical_path_ns += op.critical_path_ns
        critical_path_ns += op.critical_path_ns
        if (category == LLM or category == EMBEDDING) and not op.tokens.is_empty():
            profile.tokens.add(op.tokens)
            model_usage = tokens_by_model.get(operation)
            if model_usage is None:
                model_usage = tokens_by_model[operation] = TokenUsage()
            model_usage.add(op.tokens)
    # The trace's too: every span's time is in one operation's.
    profile.summed_critical_path_ns = critical_path_ns


def _add_cost(
    profile: TraceProfile, span: SpanProfile, prices: PriceTable | None, cost: float | None, on_path: bool
) -> None:
    model = span.model or span.operation
    # The cost the run recorded (ATIF's cost_usd, a span enriched earlier), when given, is what was billed.
    if cost is None and prices is not None and span.tokens is not None:
        # A snapshot may be priced apart from its family (gpt-4o-2024-05-13 costs more than gpt-4o).
        cost = prices.cost_usd(span.model_snapshot or model, span.tokens)
    span.cost_usd = cost
    if cost is None:
        return
    profile.cost_usd = (profile.cost_usd or 0.0) + cost
    profile.cost_by_model[model] = profile.cost_by_model.get(model, 0.0) + cost
    if on_path:
        profile.critical_path_cost_usd = (profile.critical_path_cost_usd or 0.0) + cost

"""Which LLM spans are model calls, each counted once: the rules beyond two nested spans for one call.

``aggregate.mark_nested_llm_duplicates`` counts once a call that two instrumentations describe
with nested spans. Real exports show two more ways a trace counts calls that never happened:

* **Side by side.** When a framework's instrumentation and a client library's do not share
  context, their spans for one call land apart in the tree (LangChain's OpenInference span deep
  under the agent, the OpenAI instrumentation's span under the root), or a framework ends its
  span when the call returns a stream, before the client's span for the same call even starts
  (LlamaIndex's ``astream_chat``). Two counted LLM spans are taken for one call when they come
  from different instrumentation scopes, neither contains the other, they name the same model
  family, they overlap in time (a span's events count as its time: a stream's first-chunk event
  may come after a span that ended early), and their input and output tokens are equal or one of
  them records none. A call is described at most once by each scope, so two parallel calls from
  one instrumentation are never merged; and when more than ``CROWD`` calls of one instrumentation
  and model are running as another's span starts, none is matched with it (too many to tell).
  Of each such group the span with the most complete usage is counted (then one recording a time
  to first token, then the one closest to the wire: the latest to start).
* **Not a call.** Instrumentations mark helper methods as LLM spans (LlamaIndex's
  ``OpenAI._prepare_chat_with_tools``). An LLM span is not counted when it shows no exchange
  with a model (no token usage, no first-token time, no error, no request or response
  attributes or messages) while a sibling or a descendant of the same model family (of any model,
  when the span names none) does. Alone, such a span is still a call: an instrumentation may
  hide content and record no usage.

Only ``SpanProfile.counted`` and ``same_call_as`` (of a copy: the span counted for its call) change here;
times, self times and the critical path stay as they are, and ``aggregate`` counts a call's time once.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping

from .categories import LLM
from .genai import same_model
from .profile import SpanProfile
from .records import AttributeValue, StatusCode

#: More spans of one instrumentation and model than this still running when a span of another starts
#: are too many to tell which of them describes the same call: none of them is matched with it.
CROWD = 16

#: Attribute key prefixes that show a request sent to a model or a response from one, in the
#: conventions real instrumentations write: GenAI's (an operation, request and response attributes,
#: messages), Traceloop's legacy keys, OpenInference's messages. OpenInference marks a span LLM by
#: its span kind alone, with no request attribute of its own: its helper spans have none of these.
_EXCHANGE_PREFIXES = (
    "gen_ai.operation.name",
    "gen_ai.request.",
    "gen_ai.response.",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.prompt",
    "gen_ai.completion",
    "llm.request.type",
    "llm.prompts",
    "llm.input_messages",
    "llm.output_messages",
    "llm.finish_reason",
)


def shows_exchange(span: SpanProfile) -> bool:
    """Whether an LLM span shows that a model was asked or answered."""
    if span.tokens is not None or span.time_to_first_token_ns is not None:
        return True
    if span.record.status is StatusCode.ERROR:
        return True
    return _has_exchange_attribute(span.record.attributes)


def _has_exchange_attribute(attributes: Mapping[str, AttributeValue]) -> bool:
    return any(key.startswith(_EXCHANGE_PREFIXES) for key in attributes)


def mark_non_calls(spans: list[SpanProfile]) -> None:
    """Leave out of the count LLM spans that call no model beside or above a span that does."""
    # By parent: the models its LLM children show an exchange with (built when first needed).
    answered_under: dict[int, set[str | None]] = {}
    for span in spans:
        if span.category != LLM or not span.counted or shows_exchange(span):
            continue
        parent = span.parent
        if parent is not None:
            answered = answered_under.get(id(parent))
            if answered is None:
                answered = answered_under[id(parent)] = {
                    s.model for s in parent.children if s.category == LLM and shows_exchange(s)
                }
            if span.model in answered or (span.model is None and answered):
                span.counted = False
                continue
        if any(_answers_for(s, span) for s in _descendants(span)):
            span.counted = False


def _answers_for(call: SpanProfile, span: SpanProfile) -> bool:
    """Whether ``call`` is an exchange with the model ``span`` names (any model, if it names none)."""
    return call.category == LLM and (span.model is None or same_model(call.model, span.model)) and shows_exchange(call)


def _descendants(span: SpanProfile) -> list[SpanProfile]:
    found: list[SpanProfile] = []
    stack = list(span.children)
    while stack:
        node = stack.pop()
        found.append(node)
        stack.extend(node.children)
    return found


def mark_side_by_side_duplicates(spans: list[SpanProfile]) -> None:
    """Count once a call that two or more instrumentations describe with spans that do not nest."""
    candidates = [s for s in spans if s.category == LLM and s.counted and s.model is not None and s.record.scope]
    if len(candidates) < 2:
        return
    # Only spans of different scopes are paired: with one instrumentation (most traces) there is nothing to sweep.
    first_scope = candidates[0].record.scope
    if all(s.record.scope == first_scope for s in candidates):
        return
    pairs = _overlapping_pairs(candidates)
    if not pairs:
        return
    # The surest matches first: both recording usage (then equal), then the longest overlap.
    pairs.sort(key=lambda pair: pair[0], reverse=True)
    matching = {(id(a), id(b)) for _, a, b in pairs} | {(id(b), id(a)) for _, a, b in pairs}
    group_of: dict[int, list[SpanProfile]] = {}
    for _, a, b in pairs:
        group_a = group_of.get(id(a), [a])
        group_b = group_of.get(id(b), [b])
        if group_a is group_b:
            continue
        # One call has at most one span per instrumentation, and every two of its spans must match.
        if {x.record.scope for x in group_a} & {y.record.scope for y in group_b}:
            continue
        if any((id(x), id(y)) not in matching for x in group_a for y in group_b):
            continue
        merged = group_a + group_b
        for span in merged:
            group_of[id(span)] = merged
    done: set[int] = set()
    for group in group_of.values():
        if id(group) in done:
            continue
        done.add(id(group))
        keep = max(group, key=_preference)
        for span in group:
            span.counted = span is keep
            if span is not keep:
                span.same_call_as = keep


def _overlapping_pairs(candidates: list[SpanProfile]) -> list[tuple[tuple[bool, int], SpanProfile, SpanProfile]]:
    """Pairs of candidates from different scopes whose windows overlap and that may be one call.

    A sweep by start time keeps, per model family and scope, the spans whose window is still
    open (in a heap by end), so spans of one scope are never compared with each other, and a
    crowd of more than ``CROWD`` is never compared at all.
    """
    windows = {id(s): _window(s) for s in candidates}
    candidates = sorted(candidates, key=lambda s: s.start_ns)
    open_by_model: dict[str | None, dict[str, list[tuple[int, int, SpanProfile]]]] = {}
    pairs: list[tuple[tuple[bool, int], SpanProfile, SpanProfile]] = []
    for order, b in enumerate(candidates):
        b_start, b_end = windows[id(b)]
        by_scope = open_by_model.setdefault(b.model, {})
        for scope, still_open in by_scope.items():
            while still_open and still_open[0][0] < b_start:
                heapq.heappop(still_open)
            if scope == b.record.scope or len(still_open) > CROWD:
                continue
            for a_end, _, a in still_open:
                if _may_be_one_call(a, b):
                    pairs.append(((a.tokens is not None and b.tokens is not None, min(a_end, b_end) - b_start), a, b))
        heapq.heappush(by_scope.setdefault(b.record.scope, []), (b_end, order, b))
    return pairs


def _window(span: SpanProfile) -> tuple[int, int]:
    """The span's time, to its last event if that comes after its end (a stream read after the span ended)."""
    end = span.end_ns
    for event in span.record.events:
        if event.time_ns > end:
            end = event.time_ns
    return span.start_ns, end


def _may_be_one_call(a: SpanProfile, b: SpanProfile) -> bool:
    if not same_model(a.model, b.model):
        return False
    a_usage, b_usage = a.tokens, b.tokens
    if a_usage is not None and b_usage is not None:  # noqa: SIM102 (one condition per line reads better)
        if (a_usage.input, a_usage.output) != (b_usage.input, b_usage.output):
            return False
    return not is_nested(a, b)


def is_nested(a: SpanProfile, b: SpanProfile) -> bool:
    """Whether one of the spans is an ancestor of the other."""
    if a.depth == b.depth:
        return False
    outer, inner = (a, b) if a.depth < b.depth else (b, a)
    node: SpanProfile | None = inner
    while node is not None and node.depth > outer.depth:
        node = node.parent
    return node is outer


def _preference(span: SpanProfile) -> tuple[bool, int, bool, int, str]:
    """Most complete usage, then a first-token time, then the latest start (closest to the wire)."""
    usage = span.tokens
    recorded = 0
    if usage is not None:
        recorded = sum(1 for count in (usage.input, usage.output, usage.cached_input, usage.reasoning) if count)
    return (usage is not None, recorded, span.time_to_first_token_ns is not None, span.start_ns, span.span_id)

"""The spans that make up one LLM or tool call besides the call's own span, so that each call is one call.

Real traces describe one model call with several spans. Counting copies once is ``aggregate`` and
``same_call``'s work; this module recognises the spans around a call that are not the model's
span, in the shapes instrumentations really write:

* **The request on the wire.** An HTTP client instrumentation (httpx, requests, aiohttp, urllib3)
  writes a CLIENT span with ``http.request.method`` (or the older ``http.method``) below the LLM
  span of the OpenAI client's instrumentation. That span is the call's request, not the
  application's own code: it takes the call's category and model, is not counted as a call
  again, and ``same_call_as`` points at the call. So do HTTP client spans below it (a retry
  library's, urllib3's under requests). An inference server's span below them is the same call
  too (``core.call_anatomy``).
* **The request beside its call.** OpenInference's LangChain instrumentation does not make its
  model span the current span, so with the profiler installed in code httpx's ``POST`` lands
  under the root, beside the ``ChatOpenAI`` span it belongs to. An HTTP client span with no
  children, to a model API's path (``/chat/completions``, ``/completions``, ``/embeddings``,
  ``/responses``, ``/messages``), inside the time of exactly one call (of one call's spans) that
  has no request of its own, is that call's request, as above.
* **A wrapper beside the call.** LangGraph's prebuilt ReAct agent (with the OpenInference or the
  Traceloop LangChain instrumentation) writes its node span ``call_model`` as a *sibling* of the
  ``RunnableSequence`` that holds the model's span: the node starts a moment before it and ends a
  moment after, with no child of its own. Left as it is, the node takes the whole call as its own
  time and the critical path, and the model's span is off it. A childless agent or internal span
  that covers exactly one sibling holding an LLM or tool call, starting at most ``WRAPPER_SLACK_NS``
  before it and ending at most that after, is taken for that call's wrapper: the sibling is moved
  under it in the analysed tree (the span's recorded parent is unchanged), and the wrapper's
  ``same_call_as`` points at the call.

Nothing else is merged. A span covering two siblings, one starting or ending further away, one
with children of its own, an LLM, embedding or tool span, a span that is not an HTTP client, an
HTTP span below anything but a call, or one beside calls that is to another path, runs while two
calls run or while none does, is profiled as it is.
"""

from __future__ import annotations

from .categories import AGENT, EMBEDDING, INTERNAL, LLM, TOOL
from .genai import CHUNK_EVENT_NAMES
from .intervals import union_length
from .profile import SpanProfile
from .records import SpanKind
from .span_tree import depth_first

#: How far a wrapper may start before, or end after, the call it wraps: the framework's own work
#: around the call (LangGraph's node starts about 1 ms before its model call and ends 2-6 ms after).
WRAPPER_SLACK_NS = 10_000_000

_CALL_CATEGORIES = (LLM, EMBEDDING)

#: Where a request to a model API goes: the URL path's end, in the OpenAI-compatible and Anthropic APIs.
_MODEL_API_PATHS = ("/chat/completions", "/completions", "/embeddings", "/responses", "/messages")
#: Attributes holding a request's URL or path: the current HTTP conventions' and the older ones.
_URL_KEYS = ("url.full", "http.url", "url.path", "http.target")
_WRAPPER_CATEGORIES = (AGENT, INTERNAL)

# An enum member read as a module global: ``SpanKind.X`` goes through the enum's class each time, several
# times slower, and this is read for every span.
_CLIENT = SpanKind.CLIENT


def is_http_client_span(span: SpanProfile) -> bool:
    """Whether a span is an HTTP client instrumentation's record of one request."""
    record = span.record
    if record.kind is not _CLIENT:
        return False
    attributes = record.attributes
    # The current HTTP conventions' method attribute and the older one. Two lookups rather than
    # any() over a tuple: the generator costs several times as much, for every span of every trace.
    return "http.request.method" in attributes or "http.method" in attributes


def mark_transport_spans(spans: list[SpanProfile]) -> None:
    """Make the HTTP client spans below an LLM or embedding call, or its request beside it, part of that call."""
    requests: list[SpanProfile] = []
    # Depth first: a span's parent is marked before it, so a chain of HTTP spans follows its call down.
    for span in spans:
        if not is_http_client_span(span):
            continue
        requests.append(span)
        parent = span.parent
        if parent is not None and parent.category in _CALL_CATEGORIES:
            # The parent is the call's own span, a copy of it, or an HTTP span already made part of it.
            _make_part_of(span, parent.same_call_as or parent)
    if requests:
        _mark_requests_beside_their_calls(spans, requests)


def _make_part_of(span: SpanProfile, call: SpanProfile) -> None:
    span.category = call.category
    span.operation = call.operation
    span.model = call.model
    span.model_snapshot = call.model_snapshot
    span.counted = False
    span.same_call_as = call


def _mark_requests_beside_their_calls(spans: list[SpanProfile], requests: list[SpanProfile]) -> None:
    """Make an HTTP request to a model API that is not below its call part of the one call running around it.

    ``requests`` are the HTTP client spans among ``spans``, in their order.
    """
    with_request = {id(span.same_call_as) for span in requests if span.same_call_as is not None}
    # Listed when a request first needs them: most requests are below their calls, and most traces have
    # no request beside one.
    calls: list[SpanProfile] | None = None
    for span in requests:
        # A request's category may already say llm: the live profiler recorded it on the span (an
        # export it enriched, analysed again), and the recorded category attribute is taken as it is.
        if span.same_call_as is not None or span.children or not _asks_a_model(span):
            continue
        if calls is None:
            calls = [c for c in spans if c.category in _CALL_CATEGORIES and not is_http_client_span(c)]
        # The calls around the request, each counted once however many copies of it cover the request.
        around = {
            id(call): call
            for call in (c.same_call_as or c for c in calls if c.start_ns <= span.start_ns and span.end_ns <= c.end_ns)
        }
        if len(around) != 1:
            continue
        call = next(iter(around.values()))
        if id(call) not in with_request:
            _make_part_of(span, call)
            with_request.add(id(call))


def is_request_beside_its_call(span: SpanProfile) -> bool:
    """Whether ``span`` is a call's HTTP request recorded outside the call's subtree, within its time.

    What ``_mark_requests_beside_their_calls`` made part of a call, as against a request below it.
    """
    call = span.same_call_as
    if call is None or span.children or not is_http_client_span(span):
        return False
    if not (call.start_ns <= span.start_ns and span.end_ns <= call.end_ns):
        return False
    # A request below its call (the nested shape) is the call's child and is scheduled as such.
    ancestor = span.parent
    while ancestor is not None:
        if ancestor is call or ancestor.same_call_as is call:
            return False
        ancestor = ancestor.parent
    return True


def _asks_a_model(span: SpanProfile) -> bool:
    attributes = span.record.attributes
    for key in _URL_KEYS:
        url = attributes.get(key)
        if isinstance(url, str):
            return url.split("?", 1)[0].rstrip("/").endswith(_MODEL_API_PATHS)
    return False


def adopt_wrapped_calls(spans: list[SpanProfile]) -> list[SpanProfile]:
    """Move each call that a childless sibling wraps under that sibling; the spans, depth first.

    Returns ``spans`` itself when nothing moved.
    """
    if not _has_possible_wrapper(spans):
        return spans
    holders = _holders_of_calls(spans)
    if not holders:
        return spans
    moved = False
    for parent in spans:
        children = parent.children
        if len(children) < 2 or id(parent) not in holders:
            continue
        adoptions: list[tuple[SpanProfile, SpanProfile, SpanProfile]] = []
        # Children are in start order (``build_tree``): the latest end among those that started before a
        # span tells, in one pass, whether an earlier sibling is still running when it starts.
        reach = earlier_reach = children[0].start_ns
        previous_start = None
        first_of_start = 0
        for index, wrapper in enumerate(children):
            if wrapper.start_ns != previous_start:
                earlier_reach, previous_start, first_of_start = reach, wrapper.start_ns, index
            if wrapper.end_ns > reach:
                reach = wrapper.end_ns
            if not _may_wrap(wrapper):
                continue
            wrapped = _only_wrapped_sibling(wrapper, children, first_of_start, earlier_reach)
            if wrapped is None or id(wrapped) not in holders:
                continue
            call = _call_in(wrapped)
            if call is not None:
                adoptions.append((wrapper, wrapped, call))
        for wrapper, wrapped, call in adoptions:
            children.remove(wrapped)
            wrapped.parent = wrapper
            wrapper.children.append(wrapped)
            wrapper.same_call_as = call
            moved = True
    return depth_first(spans) if moved else spans


def _may_wrap(span: SpanProfile) -> bool:
    """Whether ``span`` may be a step written beside the call it wraps: a childless agent or internal span."""
    return not span.children and span.category in _WRAPPER_CATEGORIES


def _has_possible_wrapper(spans: list[SpanProfile]) -> bool:
    """Whether some span that may wrap a call has a sibling: most traces have none, and this costs far
    less than finding the holders of calls."""
    for span in spans:
        if _may_wrap(span):
            parent = span.parent
            if parent is not None and len(parent.children) > 1:
                return True
    return False


def _only_wrapped_sibling(
    wrapper: SpanProfile, siblings: list[SpanProfile], first_of_start: int, earlier_reach: int
) -> SpanProfile | None:
    """The one sibling inside ``wrapper``'s interval, close to both of its ends; None if none or several.

    ``siblings`` are in start order, the first starting when ``wrapper`` does at ``first_of_start``;
    ``earlier_reach`` is the latest end of the siblings that started before it.
    """
    start, end = wrapper.start_ns, wrapper.end_ns
    found: SpanProfile | None = None
    if earlier_reach > start:
        return None  # a sibling that started earlier is still running: not one call's wrapper
    # From the first sibling starting with it: one listed before it may be the wrapped one.
    for position in range(first_of_start, len(siblings)):
        sibling = siblings[position]
        if sibling.start_ns >= end:
            break
        if sibling is wrapper or sibling.end_ns <= start:
            continue
        inside = sibling.end_ns <= end
        if not inside or sibling.start_ns - start > WRAPPER_SLACK_NS or end - sibling.end_ns > WRAPPER_SLACK_NS:
            return None  # another sibling overlapping the wrapper: it is not one call's wrapper
        if found is not None:
            return None
        found = sibling
    return found


def _holders_of_calls(spans: list[SpanProfile]) -> set[int]:
    """The ids of the spans that are or hold an LLM or tool span."""
    holders: set[int] = set()
    for span in spans:
        if span.category != LLM and span.category != TOOL:
            continue
        node: SpanProfile | None = span
        while node is not None and id(node) not in holders:
            holders.add(id(node))
            node = node.parent
    return holders


def _call_in(span: SpanProfile) -> SpanProfile | None:
    """The LLM or tool call ``span`` is or holds (the first found, depth first), or None."""
    stack = [span]
    while stack:
        node = stack.pop()
        if node.category == LLM or node.category == TOOL:
            return node
        stack.extend(reversed(node.children))
    return None


def link_parts_to_calls(spans: list[SpanProfile]) -> None:
    """Point every part of a call at the span counted for it, and measure the call's time to first
    token from its request.

    A copy of a copy (the outer span of a nested pair, whose inner span is a side-by-side copy of
    a third) ends up pointing at the call itself. The request is the latest of the call's spans
    to start before its first token (the closest to the wire: the HTTP client's span, else the
    client library's); the first token is the earliest that any of them saw.
    """
    parts_of: dict[int, list[SpanProfile]] = {}
    for span in spans:
        call = span.same_call_as
        if call is None:
            continue
        steps = 0
        while call.same_call_as is not None and call.same_call_as is not span and steps < len(spans):
            call = call.same_call_as
            steps += 1
        span.same_call_as = call
        if span.category == call.category:
            parts_of.setdefault(id(call), [call]).append(span)
    for group in parts_of.values():
        if group[0].category == LLM:
            _time_to_first_token_from_request(group[0], group)


def _time_to_first_token_from_request(call: SpanProfile, group: list[SpanProfile]) -> None:
    first_token: int | None = None
    for span in group:
        # A span with no events and no time to first token saw none (most spans of most calls).
        if not span.record.events and span.time_to_first_token_ns is None:
            continue
        seen = first_token_ns(span)
        if seen is not None and (first_token is None or seen < first_token):
            first_token = seen
    if first_token is None:
        return
    requested = max((span.start_ns for span in group if span.start_ns <= first_token), default=call.start_ns)
    call.time_to_first_token_ns = first_token - requested
    call.streaming = True


def first_token_ns(span: SpanProfile) -> int | None:
    """When a span saw its call's first token (Unix ns): its earliest chunk event, else its start plus
    the time to first token it records."""
    first: int | None = None
    for event in span.record.events:
        if event.name in CHUNK_EVENT_NAMES and (first is None or event.time_ns < first):
            first = event.time_ns
    if first is None and span.time_to_first_token_ns is not None:
        first = span.start_ns + span.time_to_first_token_ns
    return first


def repeated_self_time_ns(copy: SpanProfile, call: SpanProfile) -> int:
    """The part of a side-by-side copy's self time during which the counted span of its call ran too."""
    low, high = max(copy.start_ns, call.start_ns), min(copy.end_ns, call.end_ns)
    if high <= low:
        return 0
    covered = union_length((max(c.start_ns, low), min(c.end_ns, high)) for c in copy.children)
    return max(0, high - low - covered)


def llm_calls_among(siblings: list[SpanProfile]) -> list[SpanProfile]:
    """The LLM spans among ``siblings`` that stand for a call, one per call (the first to start).

    Left out: a span that calls no model (``core.same_call``), the HTTP span of a call, and a
    second span of a call already listed (two instrumentations' copies side by side).
    """
    seen: set[int] = set()
    calls: list[SpanProfile] = []
    for span in siblings:
        if span.category != LLM:
            continue
        call = span.same_call_as
        if call is None:
            if not span.counted:
                continue
            call = span
        elif is_http_client_span(span):
            continue
        if id(call) not in seen:
            seen.add(id(call))
            calls.append(span)
    return calls

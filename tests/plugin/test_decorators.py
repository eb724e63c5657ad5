"""The @tool/@agent/@traced decorators and span context managers, against a real SDK TracerProvider."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import gc
import inspect
import logging
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import AsyncGenerator, Generator, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanKind, StatusCode

import otel_agent_profiler
from otel_agent_profiler.adapters.sdk_spans import records_from_spans
from otel_agent_profiler.core.findings import find_parallelization
from otel_agent_profiler.plugin import decorators
from otel_agent_profiler.plugin.decorators import (
    CANCELLED_ATTRIBUTE,
    CHUNK_COUNT_ATTRIBUTE,
    CHUNK_EVENT_NAME,
    CHUNK_INDEX_ATTRIBUTE,
    agent,
    agent_span,
    profiled_span,
    tool,
    tool_span,
    traced,
)
from tests.support.paths import ROOT

# One exporter for the whole module; the global provider can be set only once per process.
EXPORTER = InMemorySpanExporter()

# Return annotations for decorated generators, so send/throw/close type-check.
Gen = Generator[Any, Any, Any]
AsyncGen = AsyncGenerator[Any, Any]


@pytest.fixture(scope="session", autouse=True)
def _sdk_provider() -> Gen:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    assert trace.get_tracer_provider() is provider, "another library installed a non-SDK TracerProvider"
    provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
    yield provider


@pytest.fixture(autouse=True)
def _clear_spans() -> Gen:
    EXPORTER.clear()
    yield
    EXPORTER.clear()


# --- helpers ---------------------------------------------------------------------------------------


def spans() -> tuple[ReadableSpan, ...]:
    return EXPORTER.get_finished_spans()


def only(name: str) -> ReadableSpan:
    matching = [s for s in spans() if s.name == name]
    assert len(matching) == 1, [s.name for s in spans()]
    return matching[0]


def attrs(span_or_event: Any) -> Mapping[str, Any]:
    attributes = span_or_event.attributes
    assert attributes is not None
    return attributes  # type: ignore[no-any-return]


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.span_id)


def trace_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.trace_id)


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def current_span_id() -> int:
    return trace.get_current_span().get_span_context().span_id


def chunk_indices(span: ReadableSpan) -> list[Any]:
    return [attrs(e)[CHUNK_INDEX_ATTRIBUTE] for e in span.events if e.name == CHUNK_EVENT_NAME]


def assert_ok(span: ReadableSpan) -> None:
    assert span.status.status_code is StatusCode.UNSET
    assert "error.type" not in attrs(span)
    assert not [e for e in span.events if e.name == "exception"]


def assert_error(span: ReadableSpan, exc: BaseException) -> None:
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == type(exc).__name__
    exception_events = [e for e in span.events if e.name == "exception"]
    assert len(exception_events) == 1
    assert attrs(exception_events[0])["exception.message"] == str(exc)


def assert_contains(parent: ReadableSpan, child: ReadableSpan) -> None:
    assert parent_id(child) == span_id(parent)
    assert trace_id(child) == trace_id(parent)
    assert parent.start_time is not None and parent.end_time is not None
    assert child.start_time is not None and child.end_time is not None
    assert parent.start_time <= child.start_time <= child.end_time <= parent.end_time


def innermost_frame_name(exc: BaseException) -> str:
    tb = exc.__traceback__
    assert tb is not None
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_code.co_name


class AgentError(Exception):
    """A user-defined exception, to check the qualified error.type."""


# --- @tool -----------------------------------------------------------------------------------------


def test_bare_tool_makes_an_execute_tool_span_and_returns_the_result() -> None:
    @tool
    def search_kb(query: str) -> list[str]:
        return [query, query.upper()]

    assert search_kb("q") == ["q", "Q"]
    span = only("execute_tool search_kb")
    assert span.kind is SpanKind.INTERNAL
    assert dict(attrs(span)) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "search_kb",
        "gen_ai.tool.type": "function",
    }
    assert parent_id(span) is None
    assert_ok(span)
    assert span.instrumentation_scope is not None
    assert span.instrumentation_scope.name == "otel_agent_profiler"
    assert span.instrumentation_scope.version == otel_agent_profiler.__version__


def test_tool_call_forms() -> None:
    @tool()
    def empty_parens() -> int:
        return 1

    @tool("search_kb")
    def positional_name() -> int:
        return 2

    @tool(name="lookup", description="Look a word up.")
    def keyword_name() -> int:
        return 3

    assert (empty_parens(), positional_name(), keyword_name()) == (1, 2, 3)
    assert attrs(only("execute_tool empty_parens"))["gen_ai.tool.name"] == "empty_parens"
    assert attrs(only("execute_tool search_kb"))["gen_ai.tool.name"] == "search_kb"
    lookup = only("execute_tool lookup")
    assert attrs(lookup)["gen_ai.tool.name"] == "lookup"
    assert attrs(lookup)["gen_ai.tool.description"] == "Look a word up."
    assert "gen_ai.tool.description" not in attrs(only("execute_tool search_kb"))


def test_tool_rejects_a_name_given_twice_or_empty() -> None:
    with pytest.raises(TypeError):
        tool("a", name="b")
    with pytest.raises(TypeError):
        tool(name="")
    with pytest.raises(TypeError):
        tool(42)  # type: ignore[call-overload]


def _call_ids() -> list[Any]:
    return [attrs(s).get("gen_ai.tool.call.id") for s in spans()]


def test_call_id_is_read_positionally_or_by_keyword() -> None:
    @tool(name="search_kb", call_id_param="call_id")
    def search(query: str, call_id: str | None = None) -> str:
        return query

    assert search("a", "call-1") == "a"
    assert search("b", call_id="call-2") == "b"
    assert search(query="c", call_id="call-3") == "c"
    search("d")  # absent
    search("e", None)  # explicitly None
    search("f", 7)  # type: ignore[arg-type]  # not a string: converted
    assert _call_ids() == ["call-1", "call-2", "call-3", None, None, "7"]


def test_call_id_default_keyword_only_positional_only_and_kwargs() -> None:
    @tool(call_id_param="call_id")
    def with_default(call_id: str = "default-id") -> None:
        pass

    @tool(call_id_param="call_id")
    def keyword_only(query: str, *, call_id: str | None = None) -> None:
        pass

    @tool(call_id_param="call_id")
    def positional_only(call_id: str, /) -> None:
        pass

    @tool(call_id_param="call_id")
    def from_kwargs(query: str, **kwargs: Any) -> None:
        pass

    with_default()
    with_default("given")
    keyword_only("q", call_id="kw")
    keyword_only("q")
    positional_only("pos")
    from_kwargs("q", call_id="extra")
    from_kwargs("q")
    assert _call_ids() == ["default-id", "given", "kw", None, "pos", "extra", None]


def test_call_id_param_must_name_a_parameter() -> None:
    def no_such(query: str) -> None:
        pass

    def star_args(*call_id: str) -> None:
        pass

    with pytest.raises(ValueError, match="not a parameter"):
        tool(call_id_param="call_id")(no_such)
    with pytest.raises(ValueError, match="single parameter"):
        tool(call_id_param="call_id")(star_args)


def test_wrong_arguments_still_raise_type_error_and_are_recorded() -> None:
    @tool(call_id_param="call_id")
    def needs_two(a: int, call_id: str) -> None:
        pass

    with pytest.raises(TypeError):
        needs_two()  # type: ignore[call-arg]
    span = only("execute_tool needs_two")
    assert span.status.status_code is StatusCode.ERROR
    assert "gen_ai.tool.call.id" not in attrs(span)


# --- @agent and nesting ----------------------------------------------------------------------------


def test_agent_span_is_the_parent_of_the_tools_it_calls() -> None:
    @tool
    def fetch() -> int:
        return 1

    @tool
    def rank() -> int:
        return fetch() + 1  # a tool calling a tool: grandchild of the agent

    @agent(name="planner", agent_id="agent-7")
    def plan() -> int:
        return fetch() + rank()

    assert plan() == 3
    root = only("invoke_agent planner")
    assert root.kind is SpanKind.INTERNAL
    assert dict(attrs(root)) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "planner",
        "gen_ai.agent.id": "agent-7",
    }
    assert parent_id(root) is None
    fetches = [s for s in spans() if s.name == "execute_tool fetch"]
    rank_span = only("execute_tool rank")
    assert len(fetches) == 2
    direct, nested = sorted(fetches, key=lambda s: s.start_time or 0)
    assert_contains(root, direct)
    assert_contains(root, rank_span)
    assert_contains(rank_span, nested)
    assert direct.end_time is not None and rank_span.start_time is not None
    assert direct.end_time <= rank_span.start_time  # called one after the other
    # Spans end child first, so the exporter sees them in that order.
    assert [s.name for s in spans()][-1] == "invoke_agent planner"


def test_agent_forms_and_defaults() -> None:
    @agent
    def researcher() -> str:
        return "done"

    @agent("writer")
    def write() -> str:
        return "text"

    assert researcher() == "done"
    assert write() == "text"
    assert attrs(only("invoke_agent researcher"))["gen_ai.agent.name"] == "researcher"
    assert "gen_ai.agent.id" not in attrs(only("invoke_agent researcher"))
    assert attrs(only("invoke_agent writer"))["gen_ai.agent.name"] == "writer"


def test_span_is_current_so_library_spans_become_children() -> None:
    library_tracer = trace.get_tracer("some.instrumentation")
    seen: list[int] = []

    @tool
    def call_model() -> None:
        seen.append(current_span_id())
        with library_tracer.start_as_current_span("chat gpt-4o"):
            pass

    call_model()
    tool_span_ = only("execute_tool call_model")
    assert seen == [span_id(tool_span_)]
    assert_contains(tool_span_, only("chat gpt-4o"))
    # Detached again afterwards.
    assert not trace.get_current_span().get_span_context().is_valid


# --- @traced ---------------------------------------------------------------------------------------


def test_traced_defaults_to_the_qualified_name_and_writes_category_and_attributes() -> None:
    @traced
    def load() -> int:
        return 5

    @traced(name="memory.lookup", category="memory", attributes={"memory.store": "redis", "k": 3})
    def lookup() -> int:
        return 6

    @traced("retrieve_docs", category="retrieval")
    def retrieve() -> int:
        return 7

    assert (load(), lookup(), retrieve()) == (5, 6, 7)
    plain = only(load.__qualname__)
    assert plain.name.endswith("<locals>.load")
    assert dict(attrs(plain)) == {}
    assert dict(attrs(only("memory.lookup"))) == {
        "memory.store": "redis",
        "k": 3,
        "agent_profiler.category": "memory",
    }
    assert attrs(only("retrieve_docs"))["agent_profiler.category"] == "retrieval"


def test_traced_copies_attributes_at_decoration_time() -> None:
    attributes = {"stage": "one"}

    @traced(attributes=attributes)
    def step() -> None:
        pass

    attributes["stage"] = "changed"
    step()
    assert attrs(only(step.__qualname__))["stage"] == "one"


@pytest.mark.parametrize("category", ["llm", "embedding", "tool", "agent", "retrieval", "memory", "internal"])
def test_every_category_is_accepted(category: str) -> None:
    @traced(name="x", category=category)
    def work() -> None:
        pass

    work()
    assert attrs(only("x"))["agent_profiler.category"] == category


def test_a_bad_category_raises_value_error_before_any_function_is_decorated() -> None:
    with pytest.raises(ValueError, match="category"):
        traced(category="database")
    with pytest.raises(ValueError, match="category"):
        traced(name="x", category="LLM")
    with pytest.raises(ValueError, match="category"):
        profiled_span("x", category="bogus")
    assert spans() == ()


# --- exceptions ------------------------------------------------------------------------------------


def test_exception_is_recorded_and_reraised_unchanged() -> None:
    error = AgentError("tool exploded")

    @tool
    def explode() -> None:
        raise error

    with pytest.raises(AgentError) as info:
        explode()
    assert info.value is error
    assert innermost_frame_name(info.value) == "explode"  # the original traceback, not a re-raise
    assert info.value.__cause__ is None and info.value.__context__ is None
    span = only("execute_tool explode")
    assert_error(span, error)
    assert attrs(span)["error.type"] == f"{AgentError.__module__}.AgentError"


def test_builtin_exception_error_type_is_its_plain_name() -> None:
    @agent
    def broken() -> int:
        values: dict[str, int] = {}
        return values["missing"]

    with pytest.raises(KeyError):
        broken()
    span = only("invoke_agent broken")
    assert attrs(span)["error.type"] == "KeyError"
    assert span.status.description == "KeyError"


def test_error_in_a_child_marks_the_child_and_the_parent_that_lets_it_escape() -> None:
    @tool
    def failing() -> None:
        raise ValueError("no")

    @agent
    def handles() -> str:
        try:
            failing()
        except ValueError:
            return "handled"
        return "unreachable"

    @agent
    def propagates() -> None:
        failing()

    assert handles() == "handled"
    assert_ok(only("invoke_agent handles"))
    EXPORTER.clear()
    with pytest.raises(ValueError):
        propagates()
    assert only("execute_tool failing").status.status_code is StatusCode.ERROR
    assert only("invoke_agent propagates").status.status_code is StatusCode.ERROR


def test_stop_iteration_out_of_a_function_is_not_an_error() -> None:
    @traced
    def first(items: Iterator[int]) -> int:
        return next(items)

    with pytest.raises(StopIteration):
        first(iter([]))
    assert_ok(only(first.__qualname__))


# --- async functions, tasks and threads -----------------------------------------------------------


def test_async_tool_returns_its_value_with_its_span_current() -> None:
    @tool(call_id_param="call_id")
    async def fetch(url: str, call_id: str) -> tuple[str, int]:
        await asyncio.sleep(0)
        return url, current_span_id()

    url, seen = asyncio.run(fetch("https://x", call_id="c-9"))
    span = only("execute_tool fetch")
    assert url == "https://x"
    assert seen == span_id(span)
    assert attrs(span)["gen_ai.tool.call.id"] == "c-9"


def test_async_span_starts_when_awaited_not_when_the_coroutine_is_created() -> None:
    @tool
    async def later() -> int:
        return 1

    async def main() -> None:
        coroutine = later()
        await asyncio.sleep(0.01)
        assert spans() == ()
        created_before = time.time_ns()
        assert await coroutine == 1
        span = only("execute_tool later")
        assert span.start_time is not None and span.start_time >= created_before

    asyncio.run(main())


def test_async_exception_is_recorded_and_reraised() -> None:
    error = AgentError("async failure")

    @agent
    async def failing() -> None:
        await asyncio.sleep(0)
        raise error

    with pytest.raises(AgentError) as info:
        asyncio.run(failing())
    assert info.value is error
    assert innermost_frame_name(error) == "failing"
    assert_error(only("invoke_agent failing"), error)


def test_gather_under_one_agent_makes_concurrent_children_of_it() -> None:
    @tool(call_id_param="call_id")
    async def lookup(call_id: str, delay: float) -> str:
        await asyncio.sleep(delay)
        return call_id

    @agent
    async def fan_out() -> list[str]:
        return list(await asyncio.gather(lookup("a", 0.03), lookup("b", 0.01), lookup("c", 0.02)))

    assert asyncio.run(fan_out()) == ["a", "b", "c"]
    root = only("invoke_agent fan_out")
    children = [s for s in spans() if s.name == "execute_tool lookup"]
    assert sorted(str(attrs(s)["gen_ai.tool.call.id"]) for s in children) == ["a", "b", "c"]
    assert len({span_id(s) for s in children}) == 3
    for child in children:
        assert_contains(root, child)
    # They really overlapped: every child started before the first one ended.
    first_end = min(s.end_time or 0 for s in children)
    assert all((s.start_time or 0) < first_end for s in children)
    # The shortest sleep ends first.
    assert [attrs(s)["gen_ai.tool.call.id"] for s in spans() if s.name == "execute_tool lookup"] == ["b", "c", "a"]


def test_tasks_created_inside_an_agent_inherit_it_even_after_it_awaits() -> None:
    @tool
    async def background() -> None:
        await asyncio.sleep(0.01)

    @agent
    async def orchestrate() -> None:
        task = asyncio.create_task(background())
        await asyncio.sleep(0)
        await task

    asyncio.run(orchestrate())
    assert_contains(only("invoke_agent orchestrate"), only("execute_tool background"))


def test_to_thread_carries_the_agent_span_into_the_worker_thread() -> None:
    @tool
    def blocking() -> tuple[int, int]:
        return threading.get_ident(), current_span_id()

    @agent
    async def runner() -> tuple[int, int]:
        return await asyncio.to_thread(blocking)

    thread_id, seen = asyncio.run(runner())
    assert thread_id != threading.get_ident()
    tool_span_ = only("execute_tool blocking")
    assert seen == span_id(tool_span_)
    assert_contains(only("invoke_agent runner"), tool_span_)


def test_concurrent_threads_keep_separate_trees() -> None:
    barrier = threading.Barrier(2)

    @tool(call_id_param="label")
    def step(label: str) -> str:
        # Both threads are inside a tool span at the same moment.
        barrier.wait(timeout=10)
        return label

    def run(label: str) -> list[str]:
        with agent_span(label):
            return [step(label), step(label)]

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(run, ["alpha", "beta"]))
    assert results == [["alpha", "alpha"], ["beta", "beta"]]

    roots = {s.name: s for s in spans() if s.name.startswith("invoke_agent")}
    assert set(roots) == {"invoke_agent alpha", "invoke_agent beta"}
    assert all(parent_id(root) is None for root in roots.values())
    assert trace_id(roots["invoke_agent alpha"]) != trace_id(roots["invoke_agent beta"])
    steps = [s for s in spans() if s.name == "execute_tool step"]
    assert len(steps) == 4
    for child in steps:
        assert_contains(roots[f"invoke_agent {attrs(child)['gen_ai.tool.call.id']}"], child)


def test_threads_see_the_span_only_when_the_context_is_propagated() -> None:
    @tool
    def work() -> None:
        pass

    with agent_span("main"), ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(contextvars.copy_context().run, work).result()  # propagated: a child
        pool.submit(work).result()  # a plain thread starts with an empty context: a new trace

    root = only("invoke_agent main")
    propagated, plain = (s for s in spans() if s.name == "execute_tool work")
    assert_contains(root, propagated)
    assert parent_id(plain) is None
    assert trace_id(plain) != trace_id(root)


def test_cancellation_is_recorded_but_not_as_an_error() -> None:
    @tool
    async def slow(started: asyncio.Event) -> None:
        started.set()
        await asyncio.sleep(10)

    async def main() -> None:
        started = asyncio.Event()
        task = asyncio.create_task(slow(started))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    span = only("execute_tool slow")
    assert_ok(span)
    assert attrs(span)[CANCELLED_ATTRIBUTE] is True


# --- generators ------------------------------------------------------------------------------------


def test_generator_span_runs_from_first_item_to_exhaustion_with_one_event_per_item() -> None:
    inside: list[int] = []

    @tool
    def stream(n: int) -> Gen:
        for i in range(n):
            inside.append(current_span_id())
            yield i * 10
        return None

    gen = stream(3)
    time.sleep(0.01)
    first_next = time.time_ns()
    assert spans() == ()  # creating the generator starts nothing
    assert next(gen) == 0
    assert spans() == ()  # still open
    assert list(gen) == [10, 20]
    span = only("execute_tool stream")
    assert span.start_time is not None and span.start_time >= first_next
    assert chunk_indices(span) == [0, 1, 2]
    assert attrs(span)[CHUNK_COUNT_ATTRIBUTE] == 3
    assert all(event.timestamp >= span.start_time for event in span.events)
    assert [e.timestamp for e in span.events] == sorted(e.timestamp for e in span.events)
    assert inside == [span_id(span)] * 3
    assert_ok(span)


def test_generator_span_is_current_inside_the_generator_but_not_in_the_consumer() -> None:
    tracer = trace.get_tracer("test")

    @tool
    def stream() -> Gen:
        yield current_span_id()
        yield current_span_id()

    with tracer.start_as_current_span("consumer") as consumer:
        consumer_id = consumer.get_span_context().span_id
        seen_in_consumer = []
        seen_in_generator = []
        for value in stream():
            seen_in_generator.append(value)
            seen_in_consumer.append(current_span_id())
    span = only("execute_tool stream")
    assert seen_in_generator == [span_id(span), span_id(span)]
    assert seen_in_consumer == [consumer_id, consumer_id]
    assert_contains(only("consumer"), span)


def test_generator_return_value_reaches_yield_from() -> None:
    @traced
    def produce() -> Gen:
        yield 1
        return "summary"

    def consume() -> Gen:
        result = yield from produce()
        assert result == "summary"
        yield 2

    assert list(consume()) == [1, 2]
    assert_ok(only(produce.__qualname__))


def test_unstarted_generator_makes_no_span() -> None:
    @tool
    def stream() -> Gen:
        yield 1

    stream().close()
    gen = stream()
    del gen
    gc.collect()
    assert spans() == ()


def test_generator_closed_early_ends_its_span_without_error() -> None:
    finally_ran_in: list[int] = []

    @tool
    def stream() -> Gen:
        try:
            yield from range(100)
        finally:
            finally_ran_in.append(current_span_id())

    gen = stream()
    assert [next(gen), next(gen)] == [0, 1]
    gen.close()
    span = only("execute_tool stream")
    assert_ok(span)
    assert chunk_indices(span) == [0, 1]
    assert attrs(span)[CHUNK_COUNT_ATTRIBUTE] == 2
    assert finally_ran_in == [span_id(span)]  # the generator's cleanup ran with its span current


def test_generator_abandoned_by_a_break_or_garbage_collected_ends_its_span() -> None:
    @tool
    def stream() -> Gen:
        yield from range(100)

    for item in stream():
        if item == 2:
            break
    gen = stream()
    next(gen)
    del gen
    gc.collect()
    ended = [s for s in spans() if s.name == "execute_tool stream"]
    assert [len(s.events) for s in ended] == [3, 1]
    for span in ended:
        assert_ok(span)


def test_generator_send_passes_values_through() -> None:
    @tool
    def accumulate() -> Gen:
        total = 0
        while True:
            value = yield total
            if value is None:
                return total
            total += value

    gen = accumulate()
    assert next(gen) == 0
    assert gen.send(5) == 5
    assert gen.send(2) == 7
    with pytest.raises(StopIteration) as stop:
        gen.send(None)
    assert stop.value.value == 7
    span = only("execute_tool accumulate")
    assert chunk_indices(span) == [0, 1, 2]
    assert_ok(span)


def test_generator_throw_handled_inside_the_generator() -> None:
    @tool
    def resilient() -> Gen:
        while True:
            try:
                yield "ok"
            except KeyError as exc:
                yield f"recovered {exc.args[0]}"

    gen = resilient()
    assert next(gen) == "ok"
    assert gen.throw(KeyError("k")) == "recovered k"
    assert next(gen) == "ok"
    gen.close()
    span = only("execute_tool resilient")
    assert_ok(span)
    assert chunk_indices(span) == [0, 1, 2]


def test_generator_throw_not_handled_propagates_and_is_recorded() -> None:
    error = AgentError("stop now")

    @tool
    def stream() -> Gen:
        yield 1
        yield 2

    gen = stream()
    next(gen)
    with pytest.raises(AgentError) as info:
        gen.throw(error)
    assert info.value is error
    span = only("execute_tool stream")
    assert_error(span, error)
    assert [e.name for e in span.events] == [CHUNK_EVENT_NAME, "exception"]


def test_generator_throw_generator_exit_closes_without_error() -> None:
    closed: list[bool] = []

    @tool
    def stream() -> Gen:
        try:
            yield 1
            yield 2
        except GeneratorExit:
            closed.append(True)
            raise

    gen = stream()
    next(gen)
    with pytest.raises(GeneratorExit):
        gen.throw(GeneratorExit)
    assert closed == [True]
    assert_ok(only("execute_tool stream"))


def test_generator_raising_midway_records_the_error_after_its_items() -> None:
    error = ValueError("bad page")

    @tool
    def pages() -> Gen:
        yield 1
        raise error

    received = []
    with pytest.raises(ValueError) as info:
        for page in pages():
            received.append(page)
    assert received == [1]
    assert info.value is error
    assert innermost_frame_name(error) == "pages"
    span = only("execute_tool pages")
    assert_error(span, error)
    assert attrs(span)["error.type"] == "ValueError"
    assert chunk_indices(span) == [0]


def test_generator_that_ignores_close_is_an_error() -> None:
    @tool
    def stubborn() -> Gen:
        ignored = False
        while True:
            try:
                yield 1
            except GeneratorExit:
                if ignored:  # give in the second time, so the garbage collector can finish it quietly
                    raise
                ignored = True

    gen = stubborn()
    next(gen)
    with pytest.raises(RuntimeError, match="ignored GeneratorExit"):
        gen.close()
    assert only("execute_tool stubborn").status.status_code is StatusCode.ERROR


# --- async generators ------------------------------------------------------------------------------


def test_async_generator_span_and_chunk_events() -> None:
    inside: list[int] = []

    @tool
    async def stream(n: int) -> AsyncGen:
        for i in range(n):
            await asyncio.sleep(0)
            inside.append(current_span_id())
            yield i

    async def main() -> list[int]:
        agen = stream(3)
        await asyncio.sleep(0.01)
        assert spans() == ()
        started = time.time_ns()
        items = [item async for item in agen]
        assert only("execute_tool stream").start_time >= started  # type: ignore[operator]
        return items

    assert asyncio.run(main()) == [0, 1, 2]
    span = only("execute_tool stream")
    assert chunk_indices(span) == [0, 1, 2]
    assert attrs(span)[CHUNK_COUNT_ATTRIBUTE] == 3
    assert inside == [span_id(span)] * 3
    assert_ok(span)


def test_async_generator_is_current_inside_but_not_in_the_consumer() -> None:
    @agent
    async def orchestrate() -> list[tuple[int, int]]:
        seen = []
        async for value in stream():
            seen.append((value, current_span_id()))
        return seen

    @tool
    async def stream() -> AsyncGen:
        yield current_span_id()

    seen = asyncio.run(orchestrate())
    root = only("invoke_agent orchestrate")
    child = only("execute_tool stream")
    assert seen == [(span_id(child), span_id(root))]
    assert_contains(root, child)


def test_async_generator_asend_and_athrow() -> None:
    @tool
    async def echo() -> AsyncGen:
        received = "start"
        while True:
            try:
                received = yield f"echo {received}"
            except KeyError:
                received = "recovered"

    async def main() -> None:
        agen = echo()
        assert await agen.asend(None) == "echo start"
        assert await agen.asend("a") == "echo a"
        assert await agen.athrow(KeyError("k")) == "echo recovered"
        await agen.aclose()

    asyncio.run(main())
    span = only("execute_tool echo")
    assert chunk_indices(span) == [0, 1, 2]
    assert_ok(span)


def test_async_generator_athrow_unhandled_is_recorded_and_propagates() -> None:
    error = AgentError("abort")

    @tool
    async def stream() -> AsyncGen:
        yield 1
        yield 2

    async def main() -> None:
        agen = stream()
        await agen.__anext__()
        with pytest.raises(AgentError) as info:
            await agen.athrow(error)
        assert info.value is error

    asyncio.run(main())
    assert_error(only("execute_tool stream"), error)


def test_async_generator_closed_early_or_collected_ends_its_span() -> None:
    cleanup: list[int] = []

    @tool
    async def stream() -> AsyncGen:
        try:
            for i in range(100):
                yield i
        finally:
            cleanup.append(current_span_id())

    async def main() -> None:
        async with contextlib.aclosing(stream()) as agen:
            async for item in agen:
                if item == 1:
                    break
        assert len(spans()) == 1  # ended by aclose, not at loop shutdown

        abandoned = stream()
        await abandoned.__anext__()
        del abandoned
        gc.collect()
        for _ in range(5):  # asyncio closes a collected async generator in a task of its own
            await asyncio.sleep(0)
        assert len(spans()) == 2

    asyncio.run(main())
    ended = [s for s in spans() if s.name == "execute_tool stream"]
    assert [chunk_indices(s) for s in ended] == [[0, 1], [0]]
    for span in ended:
        assert_ok(span)
    assert cleanup == [span_id(s) for s in ended]


def test_async_generator_error_is_recorded() -> None:
    error = AgentError("stream broke")

    @traced(category="llm")
    async def tokens() -> AsyncGen:
        yield "a"
        raise error

    async def main() -> list[str]:
        return [token async for token in tokens()]

    with pytest.raises(AgentError) as info:
        asyncio.run(main())
    assert info.value is error
    span = only(tokens.__qualname__)
    assert_error(span, error)
    assert attrs(span)["agent_profiler.category"] == "llm"
    assert chunk_indices(span) == [0]


# --- methods ---------------------------------------------------------------------------------------


class Toolbox:
    prefix = "kb"

    @tool(call_id_param="call_id")
    def search(self, query: str, call_id: str | None = None) -> str:
        return f"{self.prefix}:{query}"

    @classmethod
    @tool(call_id_param="call_id")
    def build(cls, call_id: str) -> type[Toolbox]:
        return cls

    @staticmethod
    @tool(name="normalize", call_id_param="call_id")
    def normalize(text: str, call_id: str | None = None) -> str:
        return text.strip()

    @tool
    async def fetch(self, url: str) -> str:
        return f"{self.prefix}:{url}"

    @tool
    def pages(self) -> Gen:
        yield self.prefix

    @agent(name="class_agent")
    @classmethod
    def above_classmethod(cls) -> type[Toolbox]:
        return cls

    @tool(name="static_above")
    @staticmethod
    def above_staticmethod(x: int) -> int:
        return x + 1


def test_instance_methods_see_self_and_read_the_call_id_after_it() -> None:
    box = Toolbox()
    assert box.search("q", "c-1") == "kb:q"
    assert box.search("q", call_id="c-2") == "kb:q"
    assert Toolbox.search(box, "q", "c-3") == "kb:q"
    assert asyncio.run(box.fetch("u")) == "kb:u"
    assert list(box.pages()) == ["kb"]
    assert _call_ids() == ["c-1", "c-2", "c-3", None, None]
    assert [s.name for s in spans()] == ["execute_tool search"] * 3 + ["execute_tool fetch", "execute_tool pages"]


def test_class_and_static_methods() -> None:
    box = Toolbox()
    assert Toolbox.build("c-1") is Toolbox
    assert box.build(call_id="c-2") is Toolbox
    assert Toolbox.normalize(" x ", "c-3") == "x"
    assert box.normalize(" y ", call_id="c-4") == "y"
    assert Toolbox.above_classmethod() is Toolbox
    assert box.above_staticmethod(1) == 2
    assert _call_ids() == ["c-1", "c-2", "c-3", "c-4", None, None]
    assert [s.name for s in spans()] == [
        "execute_tool build",
        "execute_tool build",
        "execute_tool normalize",
        "execute_tool normalize",
        "invoke_agent class_agent",
        "execute_tool static_above",
    ]
    assert isinstance(inspect.getattr_static(Toolbox, "above_classmethod"), classmethod)
    assert isinstance(inspect.getattr_static(Toolbox, "above_staticmethod"), staticmethod)


# --- wrapper metadata ------------------------------------------------------------------------------


def sync_original(a: int, b: str = "x", *, c: float = 1.0) -> int:
    """Sync docstring."""
    return a


async def async_original(a: int, b: str = "x", *, c: float = 1.0) -> int:
    """Async docstring."""
    return a


def generator_original(a: int, b: str = "x", *, c: float = 1.0) -> Gen:
    """Generator docstring."""
    yield a


async def async_generator_original(a: int, b: str = "x", *, c: float = 1.0) -> AsyncGen:
    """Async generator docstring."""
    yield a


PREDICATES = (inspect.iscoroutinefunction, inspect.isasyncgenfunction, inspect.isgeneratorfunction)


@pytest.mark.parametrize("original", [sync_original, async_original, generator_original, async_generator_original])
@pytest.mark.parametrize(
    "decorator",
    [tool, tool(name="n", call_id_param="b"), agent, agent(agent_id="1"), traced, traced(category="internal")],
    ids=["tool", "tool-args", "agent", "agent-args", "traced", "traced-args"],
)
def test_wrapper_keeps_metadata_signature_and_kind(original: Any, decorator: Any) -> None:
    wrapped = decorator(original)
    assert wrapped is not original
    assert wrapped.__wrapped__ is original
    for attribute in ("__name__", "__qualname__", "__doc__", "__module__", "__annotations__"):
        assert getattr(wrapped, attribute) == getattr(original, attribute)
    assert inspect.signature(wrapped) == inspect.signature(original)
    assert [p(wrapped) for p in PREDICATES] == [p(original) for p in PREDICATES]


# --- context managers ------------------------------------------------------------------------------


def test_tool_span_context_manager() -> None:
    with tool_span("search_kb", call_id="call-1", description="Searches.") as span:
        assert trace.get_current_span() is span
        assert span.is_recording()
    recorded = only("execute_tool search_kb")
    assert recorded.context == span.get_span_context()
    assert dict(attrs(recorded)) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "search_kb",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Searches.",
        "gen_ai.tool.call.id": "call-1",
    }
    assert recorded.kind is SpanKind.INTERNAL
    assert not trace.get_current_span().get_span_context().is_valid


def test_tools_declared_independent_are_advised_to_run_together() -> None:
    @tool(independent_group="quotes")
    def fetch_prices(symbol: str) -> list[float]:
        time.sleep(0.02)
        return [1.0]

    @agent("analyst")
    def run() -> None:
        fetch_prices("ACME")
        with tool_span("fetch_news", independent_group="quotes"):
            time.sleep(0.02)

    run()
    assert attrs(only("execute_tool fetch_prices"))["agent_profiler.independent_group"] == "quotes"
    (profile,) = otel_agent_profiler.profile_records(records_from_spans(spans()))
    (finding,) = find_parallelization(profile)
    assert finding.rests_on == "declared independent"
    assert finding.saving_ns > 0


@pytest.mark.parametrize("group", ["", 7])
def test_independent_group_must_be_a_name(group: object) -> None:
    with pytest.raises(TypeError, match="independent_group"):
        tool(independent_group=group)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="independent_group"):
        tool_span("x", independent_group=group)  # type: ignore[arg-type]


def test_nested_context_managers_and_decorators() -> None:
    @tool
    def inner() -> None:
        pass

    with agent_span("supervisor", agent_id="sup-1"):
        with profiled_span("plan", category="internal", attributes={"step": 1}):
            inner()
        with tool_span("search"):
            pass
    root = only("invoke_agent supervisor")
    assert attrs(root)["gen_ai.agent.id"] == "sup-1"
    plan = only("plan")
    assert dict(attrs(plan)) == {"step": 1, "agent_profiler.category": "internal"}
    assert_contains(root, plan)
    assert_contains(plan, only("execute_tool inner"))
    assert_contains(root, only("execute_tool search"))


def test_async_with_context_managers() -> None:
    async def main() -> tuple[int, int]:
        async with agent_span("async_agent") as outer:
            async with tool_span("async_tool", call_id="c") as inner:
                await asyncio.sleep(0)
                assert trace.get_current_span() is inner
            assert trace.get_current_span() is outer
            return outer.get_span_context().span_id, inner.get_span_context().span_id

    outer_id, inner_id = asyncio.run(main())
    root = only("invoke_agent async_agent")
    child = only("execute_tool async_tool")
    assert (span_id(root), span_id(child)) == (outer_id, inner_id)
    assert_contains(root, child)


def test_context_manager_records_and_propagates_exceptions() -> None:
    error = AgentError("inside the block")
    with pytest.raises(AgentError) as info, profiled_span("risky"):
        raise error
    assert info.value is error
    span = only("risky")
    assert_error(span, error)
    assert attrs(span)["error.type"] == f"{AgentError.__module__}.AgentError"

    async def main() -> None:
        async with agent_span("async_risky"):
            raise error

    with pytest.raises(AgentError):
        asyncio.run(main())
    assert_error(only("invoke_agent async_risky"), error)


def test_context_manager_instance_can_be_reused() -> None:
    scope = tool_span("again")
    with scope:
        pass
    with scope, scope:
        pass
    again = [s for s in spans() if s.name == "execute_tool again"]
    assert len(again) == 3
    first, inner, outer = again
    assert parent_id(first) is None
    assert_contains(outer, inner)


# --- provider lookup and telemetry failures --------------------------------------------------------


def test_a_provider_change_after_decoration_is_picked_up(monkeypatch: pytest.MonkeyPatch) -> None:
    @tool
    def decorated_early() -> int:
        return 1

    other_exporter = InMemorySpanExporter()
    other = TracerProvider()
    other.add_span_processor(SimpleSpanProcessor(other_exporter))
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: other)
    assert decorated_early() == 1
    monkeypatch.undo()
    assert decorated_early() == 1
    assert [s.name for s in other_exporter.get_finished_spans()] == ["execute_tool decorated_early"]
    assert [s.name for s in spans()] == ["execute_tool decorated_early"]


@pytest.mark.e2e
def test_global_provider_set_after_decoration_is_used() -> None:
    code = textwrap.dedent(
        """
        from otel_agent_profiler.plugin.decorators import tool

        @tool
        def early():
            return 41

        assert early() == 41  # no provider yet: a no-op span, the function still runs

        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        assert early() == 41
        print([s.name for s in exporter.get_finished_spans()])
        """
    )
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['execute_tool early']"


class _BrokenTracer:
    def start_span(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("tracer is broken")


class _SpanThatFailsToEnd(NonRecordingSpan):
    def record_exception(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("cannot record")

    def end(self, end_time: int | None = None) -> None:
        raise RuntimeError("cannot end")


class _TracerWithBrokenSpans:
    def start_span(self, *args: Any, **kwargs: Any) -> Any:
        return _SpanThatFailsToEnd(trace.INVALID_SPAN_CONTEXT)


def _exercise_every_kind() -> None:
    @tool(call_id_param="call_id")
    def sync(x: int, call_id: str = "c") -> int:
        return x + 1

    @agent
    async def coroutine(x: int) -> int:
        return x + 2

    @traced
    def generator() -> Gen:
        got = yield 1
        yield got

    @tool
    async def async_generator() -> AsyncGen:
        yield 1
        yield 2

    @tool
    def failing() -> None:
        raise AgentError("user error")

    async def consume() -> list[int]:
        return [item async for item in async_generator()]

    assert sync(1) == 2
    assert asyncio.run(coroutine(1)) == 3
    gen = generator()
    assert next(gen) == 1
    assert gen.send(5) == 5
    gen.close()
    assert asyncio.run(consume()) == [1, 2]
    with pytest.raises(AgentError, match="user error"):
        failing()
    with tool_span("block") as span:
        assert span is not None
    with pytest.raises(AgentError), agent_span("failing_block"):
        raise AgentError("block error")


@pytest.mark.parametrize("broken", [_BrokenTracer(), _TracerWithBrokenSpans()], ids=["start-fails", "end-fails"])
def test_telemetry_failures_never_break_the_code_and_are_logged_once(
    broken: Any, monkeypatch: pytest.MonkeyPatch, never_raise: None, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(decorators, "_get_tracer", lambda: broken)
    with caplog.at_level(logging.DEBUG, logger="otel_agent_profiler.plugin.decorators"):
        _exercise_every_kind()
        _exercise_every_kind()
    warnings = [
        r for r in caplog.records if r.name == "otel_agent_profiler.plugin.decorators" and r.levelno >= logging.WARNING
    ]
    assert len(warnings) == 1
    assert warnings[0].exc_info is not None
    assert [r for r in caplog.records if r.levelno == logging.DEBUG]  # the rest, quietly
    assert spans() == ()


def test_broken_tracer_yields_a_non_recording_span_from_context_managers(
    monkeypatch: pytest.MonkeyPatch, never_raise: None
) -> None:
    monkeypatch.setattr(decorators, "_get_tracer", lambda: _BrokenTracer())
    with tool_span("x") as span:
        assert span is trace.INVALID_SPAN
        span.set_attribute("still", "works")

"""Decorators and context managers that put a user's own tool and agent code on the trace.

``@tool``, ``@agent`` and ``@traced`` wrap sync functions, coroutine functions, generators and
async generators (and methods) in OpenTelemetry spans that follow the GenAI semantic conventions
(``execute_tool {name}``, ``invoke_agent {name}``), so the profiler classifies them without any
configuration. ``tool_span``, ``agent_span`` and ``profiled_span`` do the same for a block of code,
with ``with`` or ``async with``.

Each span is the current span while the user's code runs, so nested decorated calls and library
instrumentation (OpenAI, HTTP clients) become its children; asyncio tasks and ``asyncio.to_thread``
inherit it through ``contextvars``. A problem in the telemetry itself is logged once and the user's
code runs untraced; the user's own exceptions always propagate unchanged.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import AsyncGenerator, Callable, Generator, Mapping
from contextvars import Token
from types import TracebackType
from typing import Any, TypeVar, overload

from opentelemetry import context as otel_context, trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from .._version import __version__
from ..core.categories import CATEGORIES, CATEGORY_OVERRIDE_ATTRIBUTE
from ..core.findings.rests_on import INDEPENDENT_GROUP_ATTRIBUTE
from ..errors import InternalErrorLog

__all__ = [
    "CANCELLED_ATTRIBUTE",
    "CHUNK_COUNT_ATTRIBUTE",
    "CHUNK_EVENT_NAME",
    "CHUNK_INDEX_ATTRIBUTE",
    "SpanScope",
    "agent",
    "agent_span",
    "profiled_span",
    "tool",
    "tool_span",
    "traced",
]

logger = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])

#: Span event added for every item a decorated generator or async generator yields.
CHUNK_EVENT_NAME = "agent_profiler.chunk"
#: Attribute of ``CHUNK_EVENT_NAME`` events: 0 for the first item, 1 for the second, ...
CHUNK_INDEX_ATTRIBUTE = "agent_profiler.chunk.index"
#: Attribute set on a generator's span when it ends: how many items it yielded in all. The SDK keeps
#: only the most recent 128 events per span by default, so on long streams this is the reliable count.
CHUNK_COUNT_ATTRIBUTE = "agent_profiler.chunk.count"
#: Attribute set (to ``True``) on a span whose code was cancelled (``asyncio.CancelledError``).
CANCELLED_ATTRIBUTE = "agent_profiler.cancelled"

_OPERATION_NAME = "gen_ai.operation.name"
_TOOL_NAME = "gen_ai.tool.name"
_TOOL_TYPE = "gen_ai.tool.type"
_TOOL_DESCRIPTION = "gen_ai.tool.description"
_TOOL_CALL_ID = "gen_ai.tool.call.id"
_AGENT_NAME = "gen_ai.agent.name"
_AGENT_ID = "gen_ai.agent.id"
_ERROR_TYPE = "error.type"

_INTERNAL = SpanKind.INTERNAL
_CATEGORY_SET = frozenset(CATEGORIES)

# Ends of control flow, not failures: a consumer closing a generator early, iteration ending.
_NOT_ERRORS = (GeneratorExit, StopIteration, StopAsyncIteration)

_TRACER_NAME = "otel_agent_profiler"

Attributes = Mapping[str, AttributeValue]
CallIdGetter = Callable[[tuple[Any, ...], dict[str, Any]], Any]

# --- telemetry plumbing: every call into OpenTelemetry goes through these, none of them raises -----

# (provider, tracer): the tracer is looked up again whenever the global provider changes, so a
# TracerProvider installed after decoration (or after the first call) is used from then on.
_tracer_cache: tuple[object, trace.Tracer] | None = None

# Logged once per process: a broken exporter or provider would otherwise log on every call.
_TELEMETRY_FAILURES = InternalErrorLog(
    logger,
    "otel_agent_profiler could not %s a span; the decorated code keeps running (further failures "
    "are logged at DEBUG level)",
    level=logging.WARNING,
    repeat_level=logging.DEBUG,
    repeat_message="otel_agent_profiler could not %s a span",
)
# One key for every decorator and action: only the very first failure is a warning. The guards
# keep no state, so each is made once: a decorated call goes through five of them.
_TELEMETRY = "decorator telemetry"
_GUARD_START = _TELEMETRY_FAILURES.guard(_TELEMETRY, "start")
_GUARD_ACTIVATE = _TELEMETRY_FAILURES.guard(_TELEMETRY, "activate")
_GUARD_DEACTIVATE = _TELEMETRY_FAILURES.guard(_TELEMETRY, "deactivate")
_GUARD_RECORD_OUTCOME = _TELEMETRY_FAILURES.guard(_TELEMETRY, "record the outcome of")
_GUARD_END = _TELEMETRY_FAILURES.guard(_TELEMETRY, "end")
_GUARD_ADD_CHUNK = _TELEMETRY_FAILURES.guard(_TELEMETRY, "add a chunk event to")
_GUARD_CALL_ID = _TELEMETRY_FAILURES.guard(_TELEMETRY, "read the call id for")


def _get_tracer() -> trace.Tracer:
    global _tracer_cache
    provider = trace.get_tracer_provider()
    cache = _tracer_cache
    if cache is not None and cache[0] is provider:
        return cache[1]
    tracer = provider.get_tracer(_TRACER_NAME, __version__)
    _tracer_cache = (provider, tracer)
    return tracer


def _start_span(name: str, attributes: Attributes) -> Span | None:
    span = None  # no span when telemetry fails: the code runs untraced
    with _GUARD_START:
        span = _get_tracer().start_span(name, kind=_INTERNAL, attributes=attributes)
    return span


def _attach(span: Span | None) -> Token[Context] | None:
    if span is None:
        return None
    token = None
    with _GUARD_ACTIVATE:
        token = otel_context.attach(trace.set_span_in_context(span))
    return token


def _detach(token: Token[Context] | None) -> None:
    if token is None:
        return
    with _GUARD_DEACTIVATE:
        otel_context.detach(token)


def _error_type(exc: BaseException) -> str:
    # The name a traceback prints: module-qualified, except for builtins (and __main__).
    cls = type(exc)
    module = cls.__module__
    if module in ("builtins", "__main__"):
        return cls.__qualname__
    return f"{module}.{cls.__qualname__}"


def _end(span: Span | None, exc: BaseException | None, chunks: int | None = None) -> None:
    if span is None:
        return
    with _GUARD_RECORD_OUTCOME:
        if chunks is not None:
            span.set_attribute(CHUNK_COUNT_ATTRIBUTE, chunks)
        if exc is None or isinstance(exc, _NOT_ERRORS):
            pass
        elif isinstance(exc, asyncio.CancelledError):
            # Cancellation is how asyncio stops work it no longer needs (timeouts, races, shutdown);
            # marking it as an error would count deliberate stops as failures.
            span.set_attribute(CANCELLED_ATTRIBUTE, True)
        else:
            span.record_exception(exc)
            span.set_attribute(_ERROR_TYPE, _error_type(exc))
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
    with _GUARD_END:
        span.end()


def _add_chunk(span: Span | None, index: int) -> None:
    if span is None:
        return
    with _GUARD_ADD_CHUNK:
        span.add_event(CHUNK_EVENT_NAME, {CHUNK_INDEX_ATTRIBUTE: index})


def _as_attribute(value: Any) -> str:
    # gen_ai.tool.call.id is a string in the conventions; ids are often ints or UUIDs in user code.
    return value if isinstance(value, str) else str(value)


# --- what each decorated callable records --------------------------------------------------------


class _SpanSpec:
    """Everything about a decorated callable's spans that can be worked out at decoration time."""

    __slots__ = ("attributes", "call_id_of", "name")

    def __init__(self, name: str, attributes: dict[str, AttributeValue], call_id_of: CallIdGetter | None) -> None:
        self.name = name
        self.attributes = attributes
        self.call_id_of = call_id_of


def _start_call_span(spec: _SpanSpec, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Span | None:
    attributes = spec.attributes  # kept when the call id cannot be read
    if spec.call_id_of is not None:
        with _GUARD_CALL_ID:
            call_id = spec.call_id_of(args, kwargs)
            if call_id is not None:
                attributes = {**attributes, _TOOL_CALL_ID: _as_attribute(call_id)}
    return _start_span(spec.name, attributes)


def _call_id_getter(func: Callable[..., Any], param_name: str) -> CallIdGetter:
    """Build a fast lookup of one argument's value from ``(args, kwargs)``.

    The position and default are found once here, so a call only indexes a tuple or a dict.
    """
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"call_id_param={param_name!r}: cannot read the signature of {func!r}") from exc
    parameters = list(signature.parameters.values())
    param = signature.parameters.get(param_name)
    if param is None:
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
            # Not a named parameter, but **kwargs can still receive it.
            return lambda args, kwargs: kwargs.get(param_name)
        raise ValueError(f"call_id_param={param_name!r} is not a parameter of {func.__qualname__}{signature}")
    default = None if param.default is inspect.Parameter.empty else param.default
    if param.kind is inspect.Parameter.KEYWORD_ONLY:
        return lambda args, kwargs: kwargs.get(param_name, default)
    index = parameters.index(param)
    if param.kind is inspect.Parameter.POSITIONAL_ONLY:
        return lambda args, kwargs: args[index] if len(args) > index else default
    if param.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD:
        return lambda args, kwargs: args[index] if len(args) > index else kwargs.get(param_name, default)
    raise ValueError(f"call_id_param={param_name!r} names *args or **kwargs; it must name a single parameter")


def _default_name(func: Callable[..., Any], qualified: bool) -> str:
    target: Any = func
    while isinstance(target, functools.partial):
        target = target.func
    name = getattr(target, "__qualname__" if qualified else "__name__", None)
    return name if isinstance(name, str) and name else type(target).__name__


def _check_name(name: object, what: str) -> str:
    if not isinstance(name, str) or not name:
        raise TypeError(f"{what} must be a non-empty string, got {name!r}")
    return name


def _check_category(category: str | None) -> None:
    if category is not None and category not in _CATEGORY_SET:
        raise ValueError(f"category must be one of {', '.join(CATEGORIES)}; got {category!r}")


def _split_name(func: Any, name: str | None, decorator: str) -> tuple[Any, str | None]:
    # @tool("search_kb") passes the name where the function would go.
    if isinstance(func, str):
        if name is not None:
            raise TypeError(f"@{decorator}: the name was given both positionally and as name=")
        return None, _check_name(func, "name")
    if name is not None:
        _check_name(name, "name")
    return func, name


# --- wrappers, one per kind of callable ----------------------------------------------------------


def _instrument(func: Any, make_spec: Callable[[Callable[..., Any]], _SpanSpec]) -> Any:
    if isinstance(func, (classmethod, staticmethod)):
        # Decorator written above @classmethod/@staticmethod: wrap the function inside.
        return type(func)(_instrument(func.__func__, make_spec))
    if not callable(func):
        raise TypeError(f"expected a function to decorate, got {func!r}")
    spec = make_spec(func)
    if inspect.isasyncgenfunction(func):
        return _wrap_async_generator(func, spec)
    if inspect.iscoroutinefunction(func):
        return _wrap_coroutine(func, spec)
    if inspect.isgeneratorfunction(func):
        return _wrap_generator(func, spec)
    return _wrap_function(func, spec)


def _wrap_function(func: Callable[..., Any], spec: _SpanSpec) -> Callable[..., Any]:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        span = _start_call_span(spec, args, kwargs)
        token = _attach(span)
        try:
            result = func(*args, **kwargs)
        except BaseException as exc:
            _detach(token)
            _end(span, exc)
            raise
        _detach(token)
        _end(span, None)
        return result

    return wrapper


def _wrap_coroutine(func: Callable[..., Any], spec: _SpanSpec) -> Callable[..., Any]:
    # The span starts when the coroutine starts running (awaited or scheduled), not when the
    # coroutine object is created; attach and detach happen in the same task, so they pair up.
    @functools.wraps(func)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        span = _start_call_span(spec, args, kwargs)
        token = _attach(span)
        try:
            result = await func(*args, **kwargs)
        except BaseException as exc:
            _detach(token)
            _end(span, exc)
            raise
        _detach(token)
        _end(span, None)
        return result

    return wrapper


def _wrap_generator(func: Callable[..., Any], spec: _SpanSpec) -> Callable[..., Any]:
    # The inner generator is driven by hand rather than with `yield from` so that the span is
    # current only while the generator's own code runs, never while the consumer runs between
    # items: a context left attached across a yield would leak into the consumer and could not be
    # detached when the generator is closed from another context (or by the garbage collector).
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        span = _start_call_span(spec, args, kwargs)
        index = 0
        try:
            inner = func(*args, **kwargs)
            sent: Any = None
            thrown: BaseException | None = None
            while True:
                token = _attach(span)
                try:
                    if thrown is None:
                        item = inner.send(sent)
                    else:
                        try:
                            item = inner.throw(thrown)
                        finally:
                            thrown = None  # no frame -> exception -> traceback -> frame cycle
                except StopIteration as stop:
                    result = stop.value
                    break
                finally:
                    _detach(token)
                _add_chunk(span, index)
                index += 1
                try:
                    sent = yield item
                except GeneratorExit:
                    # Closed by the consumer (or collected): close the inner generator so its
                    # finally blocks run, with the span current as they would expect.
                    token = _attach(span)
                    try:
                        inner.close()
                    finally:
                        _detach(token)
                    raise
                except BaseException as exc:
                    # generator.throw(): hand the exception to the inner generator, as yield from does.
                    thrown = exc
                    sent = None
        except BaseException as exc:
            _end(span, exc, index)
            raise
        _end(span, None, index)
        return result

    return wrapper


def _wrap_async_generator(func: Callable[..., Any], spec: _SpanSpec) -> Callable[..., Any]:
    # Same shape as _wrap_generator; there is no `yield from` for async generators anyway.
    @functools.wraps(func)
    async def wrapper(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, Any]:
        span = _start_call_span(spec, args, kwargs)
        index = 0
        try:
            inner = func(*args, **kwargs)
            sent: Any = None
            thrown: BaseException | None = None
            while True:
                token = _attach(span)
                try:
                    if thrown is None:
                        item = await inner.asend(sent)
                    else:
                        try:
                            item = await inner.athrow(thrown)
                        finally:
                            thrown = None
                except StopAsyncIteration:
                    break
                finally:
                    _detach(token)
                _add_chunk(span, index)
                index += 1
                try:
                    sent = yield item
                except GeneratorExit:
                    token = _attach(span)
                    try:
                        await inner.aclose()
                    finally:
                        _detach(token)
                    raise
                except BaseException as exc:
                    thrown = exc
                    sent = None
        except BaseException as exc:
            _end(span, exc, index)
            raise
        _end(span, None, index)

    return wrapper


def _decorate_now_or_later(func: Any, make_spec: Callable[[Callable[..., Any]], _SpanSpec]) -> Any:
    """``@deco`` hands the function over at once; ``@deco(...)`` returns the decorator to apply."""

    def decorate(target: Any) -> Any:
        return _instrument(target, make_spec)

    return decorate if func is None else decorate(func)


# --- public decorators ---------------------------------------------------------------------------


@overload
def tool(func: F) -> F: ...
@overload
def tool(
    func: str | None = None,
    *,
    name: str | None = None,
    call_id_param: str | None = None,
    description: str | None = None,
    independent_group: str | None = None,
) -> Callable[[F], F]: ...
def tool(
    func: Any = None,
    *,
    name: str | None = None,
    call_id_param: str | None = None,
    description: str | None = None,
    independent_group: str | None = None,
) -> Any:
    """Record every call of a function as a GenAI ``execute_tool`` span.

    Usable as ``@tool``, ``@tool()``, ``@tool("search_kb")`` or
    ``@tool(name="search_kb", call_id_param="call_id")``, on sync and async functions, generators,
    async generators and methods.

    Args:
        func: The function to decorate, or the tool name when used as ``@tool("name")``.
        name: Tool name for ``gen_ai.tool.name`` and the span name ``execute_tool {name}``.
            Defaults to the function's ``__name__``.
        call_id_param: Name of the parameter holding the model's tool call id; its value (passed
            positionally or by keyword) becomes ``gen_ai.tool.call.id``. A missing or ``None``
            value records no attribute.
        description: Recorded as ``gen_ai.tool.description``.
        independent_group: Declares that calls of tools in the same group never need each other's
            results, recorded as ``agent_profiler.independent_group``: the profiler then reports
            such calls made one after another as calls to start together, with their saving.
            Without it (or a recorded LLM response that requested them together) it only notes
            that nothing recorded shows a data flow.

    Returns:
        The wrapped function, or a decorator when called without a function.

    Raises:
        ValueError: ``call_id_param`` is not a parameter of the function (at decoration time).
        TypeError: ``name`` or ``independent_group`` is not a non-empty string, or the name is given twice.
    """
    func, name = _split_name(func, name, "tool")
    if description is not None and not isinstance(description, str):
        raise TypeError(f"description must be a string, got {description!r}")
    if independent_group is not None:
        _check_name(independent_group, "independent_group")

    def make_spec(target: Callable[..., Any]) -> _SpanSpec:
        tool_name = name or _default_name(target, qualified=False)
        attributes = _tool_attributes(tool_name, description, independent_group)
        call_id_of = _call_id_getter(target, call_id_param) if call_id_param is not None else None
        return _SpanSpec(f"execute_tool {tool_name}", attributes, call_id_of)

    return _decorate_now_or_later(func, make_spec)


@overload
def agent(func: F) -> F: ...
@overload
def agent(func: str | None = None, *, name: str | None = None, agent_id: str | None = None) -> Callable[[F], F]: ...
def agent(func: Any = None, *, name: str | None = None, agent_id: str | None = None) -> Any:
    """Record every call of a function as a GenAI ``invoke_agent`` span.

    Usable as ``@agent``, ``@agent()``, ``@agent("planner")`` or ``@agent(name=..., agent_id=...)``,
    on the same kinds of callables as :func:`tool`.

    Args:
        func: The function to decorate, or the agent name when used as ``@agent("name")``.
        name: Agent name for ``gen_ai.agent.name`` and the span name ``invoke_agent {name}``.
            Defaults to the function's ``__name__``.
        agent_id: Recorded as ``gen_ai.agent.id``.

    Returns:
        The wrapped function, or a decorator when called without a function.

    Raises:
        TypeError: ``name`` is not a non-empty string, or is given twice.
    """
    func, name = _split_name(func, name, "agent")

    def make_spec(target: Callable[..., Any]) -> _SpanSpec:
        agent_name = name or _default_name(target, qualified=False)
        return _SpanSpec(f"invoke_agent {agent_name}", _agent_attributes(agent_name, agent_id), None)

    return _decorate_now_or_later(func, make_spec)


def _tool_attributes(
    name: str, description: str | None, independent_group: str | None = None
) -> dict[str, AttributeValue]:
    """The attributes every ``execute_tool`` span starts with, from ``@tool`` or ``tool_span``."""
    attributes: dict[str, AttributeValue] = {_OPERATION_NAME: "execute_tool", _TOOL_NAME: name, _TOOL_TYPE: "function"}
    if description is not None:
        attributes[_TOOL_DESCRIPTION] = description
    if independent_group is not None:
        attributes[INDEPENDENT_GROUP_ATTRIBUTE] = independent_group
    return attributes


def _agent_attributes(name: str, agent_id: object) -> dict[str, AttributeValue]:
    """The attributes of an ``invoke_agent`` span, from ``@agent`` or ``agent_span``."""
    attributes: dict[str, AttributeValue] = {_OPERATION_NAME: "invoke_agent", _AGENT_NAME: name}
    if agent_id is not None:
        attributes[_AGENT_ID] = _as_attribute(agent_id)
    return attributes


def _plain_attributes(category: str | None, attributes: Attributes | None) -> dict[str, AttributeValue]:
    _check_category(category)
    merged: dict[str, AttributeValue] = dict(attributes) if attributes else {}
    if category is not None:
        merged[CATEGORY_OVERRIDE_ATTRIBUTE] = category
    return merged


@overload
def traced(func: F) -> F: ...
@overload
def traced(
    func: str | None = None,
    *,
    name: str | None = None,
    category: str | None = None,
    attributes: Attributes | None = None,
) -> Callable[[F], F]: ...
def traced(
    func: Any = None,
    *,
    name: str | None = None,
    category: str | None = None,
    attributes: Attributes | None = None,
) -> Any:
    """Record every call of a function as a plain span.

    Usable as ``@traced``, ``@traced()``, ``@traced("load_memory")`` or
    ``@traced(name=..., category="memory", attributes={...})``.

    Args:
        func: The function to decorate, or the span name when used as ``@traced("name")``.
        name: Span name. Defaults to the function's ``__qualname__``.
        category: One of the profiler's categories (llm, embedding, tool, agent, retrieval, memory,
            internal), written as ``agent_profiler.category`` so the report files the span under it.
        attributes: Extra attributes set on every span (copied at decoration time).

    Returns:
        The wrapped function, or a decorator when called without a function.

    Raises:
        ValueError: ``category`` is not one of the categories (raised immediately).
        TypeError: ``name`` is not a non-empty string, or is given twice.
    """
    func, name = _split_name(func, name, "traced")
    static = _plain_attributes(category, attributes)

    def make_spec(target: Callable[..., Any]) -> _SpanSpec:
        return _SpanSpec(name or _default_name(target, qualified=True), static, None)

    return _decorate_now_or_later(func, make_spec)


# --- context managers ----------------------------------------------------------------------------


class SpanScope:
    """A span around a ``with`` or ``async with`` block, current while the block runs.

    Made by :func:`tool_span`, :func:`agent_span` and :func:`profiled_span`. Entering yields the
    OpenTelemetry span (a non-recording span if telemetry failed); an exception leaving the block is
    recorded on the span and propagates unchanged. An instance may be entered again after it exits;
    one instance per ``with`` statement is the intended use.
    """

    __slots__ = ("_active", "_attributes", "_name")

    def __init__(self, name: str, attributes: dict[str, AttributeValue]) -> None:
        self._name = name
        self._attributes = attributes
        self._active: list[tuple[Span | None, Token[Context] | None]] = []

    def __enter__(self) -> Span:
        span = _start_span(self._name, self._attributes)
        self._active.append((span, _attach(span)))
        return span if span is not None else trace.INVALID_SPAN

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if not self._active:  # __exit__ without __enter__: nothing to end, and never mask the block's error
            return
        span, token = self._active.pop()
        _detach(token)
        _end(span, exc)

    async def __aenter__(self) -> Span:
        return self.__enter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.__exit__(exc_type, exc, traceback)


def tool_span(
    name: str, *, call_id: str | None = None, description: str | None = None, independent_group: str | None = None
) -> SpanScope:
    """Make an ``execute_tool {name}`` span around a block of code.

    Args:
        name: Tool name (``gen_ai.tool.name``).
        call_id: The model's tool call id (``gen_ai.tool.call.id``); non-strings are converted with ``str``.
        description: Recorded as ``gen_ai.tool.description``.
        independent_group: Declares the block independent of other tool calls of the same group
            (see :func:`tool`).

    Returns:
        A context manager for ``with`` or ``async with`` that yields the span.
    """
    _check_name(name, "name")
    if independent_group is not None:
        _check_name(independent_group, "independent_group")
    attributes = _tool_attributes(name, description, independent_group)
    if call_id is not None:
        attributes[_TOOL_CALL_ID] = _as_attribute(call_id)
    return SpanScope(f"execute_tool {name}", attributes)


def agent_span(name: str, *, agent_id: str | None = None) -> SpanScope:
    """Make an ``invoke_agent {name}`` span around a block of code.

    Args:
        name: Agent name (``gen_ai.agent.name``).
        agent_id: Recorded as ``gen_ai.agent.id``.

    Returns:
        A context manager for ``with`` or ``async with`` that yields the span.
    """
    _check_name(name, "name")
    return SpanScope(f"invoke_agent {name}", _agent_attributes(name, agent_id))


def profiled_span(name: str, *, category: str | None = None, attributes: Attributes | None = None) -> SpanScope:
    """Make a plain span around a block of code.

    Args:
        name: Span name.
        category: One of the profiler's categories, written as ``agent_profiler.category``.
        attributes: Extra attributes for the span.

    Returns:
        A context manager for ``with`` or ``async with`` that yields the span.

    Raises:
        ValueError: ``category`` is not one of the categories.
    """
    _check_name(name, "name")
    return SpanScope(name, _plain_attributes(category, attributes))

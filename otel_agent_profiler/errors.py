"""The profiler's exceptions, and what it does with its own bugs.

Every exception the package raises on purpose is defined here, under ``AgentProfilerError``. Bad
input (an unusable span, an id that is not one, metrics text that is not Prometheus text) raises a
subclass that is also a ``ValueError``: code that catches ``ValueError`` keeps working.

The profiler's own bugs must not reach the user's app: OpenTelemetry does not guard span
processor hooks, and a service must keep serving. Every place that catches an unexpected error
to keep running reports it through an ``InternalErrorLog``, which logs it (the first time in
full) or, when the test suite has set ``raise_internal_errors``, re-raises it so the test fails.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from types import TracebackType

__all__ = [
    "AgentProfilerError",
    "BadIdError",
    "CannotAnalyse",
    "InternalErrorLog",
    "MetricsTextError",
    "Overloaded",
    "RequestTooLarge",
    "SpanDataError",
    "StoreError",
    "handle_internal_errors",
    "report_internal_error",
]


class AgentProfilerError(Exception):
    """Base class of every exception otel-agent-profiler raises on purpose."""


class SpanDataError(AgentProfilerError, ValueError):
    """One span in an otherwise readable document could not be used."""


class BadIdError(AgentProfilerError, ValueError):
    """An id that is neither hex nor base64 of the right length."""


class MetricsTextError(AgentProfilerError, ValueError):
    """The text is not Prometheus text exposition, or holds none of the series the profiler reads."""


class StoreError(AgentProfilerError):
    """A trace store could not be read; the message is one line saying why."""


class CannotAnalyse(AgentProfilerError):
    """Nothing can be analysed: a store or Prometheus could not be read, the copy of a store's traces not
    written, or an option cannot be honoured; the message is the one line to print."""


class Overloaded(AgentProfilerError):
    """``serve`` holds as much as it may (or is stopping): the sender should retry later."""


class RequestTooLarge(AgentProfilerError):
    """An OTLP request's body, once decompressed, is over ``serve``'s size limit."""


#: Set by the test suite: re-raise internal errors instead of logging them.
raise_internal_errors = False

# Keys whose first error has been logged, shared by every InternalErrorLog in the process.
_reported: set[str] = set()
_lock = threading.Lock()


class InternalErrorLog:
    """How one part of the profiler reports the unexpected errors it catches to keep running.

    ``guard`` wraps a block or a function; ``report`` is for the few ``except`` blocks that need
    the error itself. Under the test suite the error propagates. Otherwise it is logged with its
    traceback: the first error of each key at ``level``; later ones of the same key at
    ``repeat_level``, or not at all when that is None.

    Args:
        logger: where the errors are logged.
        message: the %-format of the first log line of a key; ``report``'s ``args`` fill it.
        level: the level of the first error of a key.
        repeat_level: the level of later errors of the same key; None: they are not logged.
        repeat_message: the format of those later lines; ``message`` when omitted.
    """

    __slots__ = ("_level", "_logger", "_message", "_repeat_level", "_repeat_message")

    def __init__(
        self,
        logger: logging.Logger,
        message: str,
        *,
        level: int = logging.ERROR,
        repeat_level: int | None = None,
        repeat_message: str | None = None,
    ) -> None:
        self._logger = logger
        self._message = message
        self._level = level
        self._repeat_level = repeat_level
        self._repeat_message = message if repeat_message is None else repeat_message

    def report(self, key: str, *args: object) -> None:
        """Re-raise the error being handled (under the test suite), or log it.

        Args:
            key: what "the first error" counts by: a place in the code, or one key for a
                whole part of the profiler.
            *args: the arguments of the log message.
        """
        if raise_internal_errors:
            raise  # called from an except block: re-raises the error being handled
        self._log(key, args, True)

    def guard(self, key: str, *args: object) -> _Guard:
        """Catch and ``report`` any ``Exception`` raised in the block (or the decorated function).

        Usable as ``with errors.guard("key"):`` and as ``@errors.guard("key")``. Only ``Exception``
        is caught: ``KeyboardInterrupt`` and ``SystemExit`` still end the program. The guard is a
        small object rather than a generator, as it runs on the application's thread on every span.
        """
        return _Guard(self, key, args)

    def _log(self, key: str, args: tuple[object, ...], exc_info: bool | BaseException) -> None:
        with _lock:
            first = key not in _reported
            _reported.add(key)
        if first:
            self._logger.log(self._level, self._message, *args, exc_info=exc_info)
        elif self._repeat_level is not None:
            self._logger.log(self._repeat_level, self._repeat_message, *args, exc_info=exc_info)


class _Guard(contextlib.ContextDecorator):
    """What ``InternalErrorLog.guard`` returns: a context manager and a decorator. It keeps no
    state between uses, so one guard may wrap many calls, on many threads at once."""

    __slots__ = ("_args", "_errors", "_key")

    def __init__(self, errors: InternalErrorLog, key: str, args: tuple[object, ...]) -> None:
        self._errors = errors
        self._key = key
        self._args = args

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> bool:
        if not isinstance(exc, Exception) or raise_internal_errors:
            return False  # no error, an interrupt, or the test suite: it propagates unchanged
        self._errors._log(self._key, self._args, exc)
        return True


_PLUGIN_ERRORS = InternalErrorLog(
    logging.getLogger("otel_agent_profiler"),
    "otel-agent-profiler: internal error in %s; spans are still exported (logged once)",
)


def handle_internal_errors(where: str) -> _Guard:
    """The plugin's guard: errors in the block are logged once per ``where`` and swallowed.

    A context manager and a decorator (``with handle_internal_errors("on_end"):``). Under the
    test suite (``raise_internal_errors``) the error propagates instead.
    """
    return _PLUGIN_ERRORS.guard(where, where)


def report_internal_error(where: str) -> None:
    """Call from an ``except`` block: logs the current exception once per ``where``.

    Under the test suite (``raise_internal_errors``) it re-raises the exception instead.
    """
    _PLUGIN_ERRORS.report(where, where)

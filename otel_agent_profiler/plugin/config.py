"""The profiler's options, resolved from arguments, environment variables and defaults."""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from ..core.analyze import Classifier
from ..core.context_window import parse_context_windows, with_built_in_context_windows
from ..core.pricing import PriceTable, parse_prices, with_built_in_prices
from ..live.attributes import SPAN_ATTRIBUTE_SETS
from ..live.backend_poller import check_metrics_url
from ..live.profile_options import CategoryOverrides, ProfileOptions, make_classifier, parse_category_overrides
from . import environment_variables as env

_logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProfilerConfig:
    """Resolved options; see ``environment_variables`` for what each one does."""

    max_traces: int = 1000
    max_spans_per_trace: int = 10_000
    trace_timeout_s: float = 60.0
    sample_rate: float = 1.0
    category_overrides: CategoryOverrides = ()
    #: The built-in list prices unless given (see ``_parse_prices``); an empty table prices nothing.
    prices: PriceTable | None = field(default_factory=lambda: with_built_in_prices(None))
    #: The built-in windows unless given; a given table is laid over them.
    context_windows: Mapping[str, int] = field(default_factory=lambda: with_built_in_context_windows(None))
    metrics_enabled: bool = True
    enrich_spans: bool = True
    #: ``essential`` or ``all``: see ``OTEL_AGENT_PROFILER_SPAN_ATTRIBUTES``.
    span_attributes: str = "essential"
    console_report: bool = False
    max_operations: int = 100
    max_buffer_bytes: int = 256 * 1024 * 1024
    shutdown_timeout_s: float = 30.0
    backend_metrics: tuple[str, ...] = ()
    backend_metrics_interval_s: float = 1.0

    def classifier(self) -> Classifier:
        return make_classifier(self.category_overrides)

    def profile_options(self) -> ProfileOptions:
        """The options of the live profiling step (``live/profiling.py``)."""
        return ProfileOptions(self.classifier(), self.prices, self.context_windows)


class ProfilerOptions(TypedDict, total=False):
    """The keyword options of ``install()`` and ``AgentProfilerSpanProcessor``, so that a type
    checker catches a misspelled one: the fields of ``ProfilerConfig``, each in the forms an
    argument may take (a test holds the two to the same names). An option left out, or None,
    comes from its environment variable, then the default."""

    max_traces: int | None
    max_spans_per_trace: int | None
    trace_timeout_s: float | None
    sample_rate: float | None
    #: ``pattern=category,...`` text, a mapping of span-name patterns to categories, or pairs.
    category_overrides: str | Mapping[str, str] | Iterable[tuple[str, str]] | None
    #: A price table (used as is), or a mapping, JSON text or the path of a JSON file, laid over the
    #: built-in prices; ``{}`` prices nothing.
    prices: PriceTable | Mapping[str, Mapping[str, float]] | str | Path | None
    #: Context windows in tokens by model (a mapping, JSON text, or the path of a JSON file),
    #: laid over the built-in ones.
    context_windows: Mapping[str, int] | str | Path | None
    metrics_enabled: bool | None
    enrich_spans: bool | None
    #: ``"essential"`` or ``"all"``: which attributes spans other than roots get.
    span_attributes: str | None
    console_report: bool | None
    max_operations: int | None
    max_buffer_bytes: int | None
    shutdown_timeout_s: float | None
    #: Metrics URLs: comma-separated text, or one per item.
    backend_metrics: str | Iterable[str] | None
    backend_metrics_interval_s: float | None


# Parsers turn a value (from an argument or the environment) into the option's value, or raise
# ValueError saying what is wrong.


def _parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "1", "yes", "on"):
        return True
    if isinstance(value, str) and value.strip().lower() in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def _parse_positive_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(f"expected a whole number of at least 1, got {value!r}")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"expected a whole number of at least 1, got {value!r}") from None
    if (isinstance(value, float) and value != number) or number < 1:
        raise ValueError(f"expected a whole number of at least 1, got {value!r}")
    return number


def _number(value: Any, accept: Callable[[float], bool], expected: str) -> float:
    """``value`` as a float that ``accept`` takes, or ValueError naming what was ``expected``."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"expected {expected}, got {value!r}") from None
    # A bool is an int to Python, but never a number of seconds or a rate to a user.
    if isinstance(value, bool) or not accept(number):
        raise ValueError(f"expected {expected}, got {value!r}")
    return number


def _parse_positive_float(value: Any) -> float:
    return _number(value, lambda number: math.isfinite(number) and number > 0, "a number of seconds above 0")


def _parse_rate(value: Any) -> float:
    return _number(value, lambda number: 0.0 <= number <= 1.0, "a fraction from 0 to 1")


def _parse_prices(value: Any) -> PriceTable:
    """A ``PriceTable`` is the whole table; any other form is laid over the built-in prices, as the
    command line's ``--prices`` is (``{}`` prices nothing)."""
    if isinstance(value, PriceTable):
        return value
    return with_built_in_prices(parse_prices(value))


def _parse_span_attributes(value: Any) -> str:
    text = value.strip().lower() if isinstance(value, str) else value
    if text not in SPAN_ATTRIBUTE_SETS:
        raise ValueError(f"expected {' or '.join(SPAN_ATTRIBUTE_SETS)}, got {value!r}")
    return str(text)


def _parse_metrics_urls(value: Any) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else value
    try:
        return tuple(check_metrics_url(str(item)) for item in items if str(item).strip())
    except TypeError:
        raise ValueError(f"expected metrics URLs separated by commas, got {value!r}") from None


_OPTIONS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "max_traces": (env.OTEL_AGENT_PROFILER_MAX_TRACES, _parse_positive_int),
    "max_spans_per_trace": (env.OTEL_AGENT_PROFILER_MAX_SPANS_PER_TRACE, _parse_positive_int),
    "trace_timeout_s": (env.OTEL_AGENT_PROFILER_TRACE_TIMEOUT, _parse_positive_float),
    "sample_rate": (env.OTEL_AGENT_PROFILER_SAMPLE_RATE, _parse_rate),
    "category_overrides": (env.OTEL_AGENT_PROFILER_CATEGORY_OVERRIDES, parse_category_overrides),
    "prices": (env.OTEL_AGENT_PROFILER_PRICES, _parse_prices),
    "context_windows": (
        env.OTEL_AGENT_PROFILER_CONTEXT_WINDOWS,
        lambda value: with_built_in_context_windows(parse_context_windows(value)),
    ),
    "metrics_enabled": (env.OTEL_AGENT_PROFILER_METRICS, _parse_bool),
    "enrich_spans": (env.OTEL_AGENT_PROFILER_ENRICH_SPANS, _parse_bool),
    "span_attributes": (env.OTEL_AGENT_PROFILER_SPAN_ATTRIBUTES, _parse_span_attributes),
    "console_report": (env.OTEL_AGENT_PROFILER_CONSOLE_REPORT, _parse_bool),
    "max_operations": (env.OTEL_AGENT_PROFILER_MAX_OPERATIONS, _parse_positive_int),
    "max_buffer_bytes": (env.OTEL_AGENT_PROFILER_MAX_BUFFER_BYTES, _parse_positive_int),
    "shutdown_timeout_s": (env.OTEL_AGENT_PROFILER_SHUTDOWN_TIMEOUT, _parse_positive_float),
    "backend_metrics": (env.OTEL_AGENT_PROFILER_BACKEND_METRICS, _parse_metrics_urls),
    "backend_metrics_interval_s": (env.OTEL_AGENT_PROFILER_BACKEND_METRICS_INTERVAL, _parse_positive_float),
}

#: The option names ``resolve_config`` accepts.
OPTION_NAMES = frozenset(_OPTIONS)


def resolve_config(environ: Mapping[str, str] | None = None, **arguments: Any) -> ProfilerConfig:
    """Options from ``arguments``, else the environment, else the defaults.

    A bad argument raises ``ValueError`` (a programming error); a bad environment value is
    logged and replaced by the default, so a typo in the environment cannot stop the app.
    """
    unknown = set(arguments) - OPTION_NAMES
    if unknown:
        raise ValueError(f"unknown profiler option(s): {', '.join(sorted(unknown))}")
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for option, (variable, parse) in _OPTIONS.items():
        argument = arguments.get(option)
        if argument is not None:
            try:
                values[option] = parse(argument)
            except ValueError as exc:
                raise ValueError(f"{option}: {exc}") from None
            continue
        raw = environ.get(variable)
        if raw is None or not raw.strip():
            continue
        try:
            values[option] = parse(raw)
        except ValueError as exc:
            _logger.warning("ignoring %s: %s; using the default", variable, exc)
    return ProfilerConfig(**values)


def enabled_in_environment(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the zero-code setup should install the profiler (``OTEL_AGENT_PROFILER_ENABLED``)."""
    environ = os.environ if environ is None else environ
    raw = environ.get(env.OTEL_AGENT_PROFILER_ENABLED)
    if raw is None or not raw.strip():
        return True
    try:
        return _parse_bool(raw)
    except ValueError as exc:
        _logger.warning("ignoring %s: %s; the profiler stays enabled", env.OTEL_AGENT_PROFILER_ENABLED, exc)
        return True

"""Every use of the OpenTelemetry SDK's private state, in one module.

The profiler reaches past the SDK's public API in a few places: where the public road costs too
much on a per-span path (every property read is a Python call, ``events`` copies a locked list),
and where there is no public road at all (putting a processor in front of a provider's
exporting processors, naming an exporter's endpoint). Each such use is named here, with the
code that depends on it. ``tests/plugin/test_sdk_internals.py`` checks every one against the installed
SDK, so an SDK release that changes one fails there, by name, rather than somewhere downstream.
The plugin supports every SDK from 1.28 on (pyproject.toml), and where the layout differs between
releases, each layout is handled here; ``scripts/test`` runs the plugin's tests on the oldest and the
newest supported SDK.

Callers keep a public fallback for each (except the configurator, which is the SDK's documented
extension point for distributions): an unexpected layout makes them slower or less capable,
never wrong.
"""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import Callable
from operator import itemgetter
from typing import Any

from opentelemetry.sdk import _configuration as sdk_configuration, trace as sdk_trace
from opentelemetry.sdk._configuration import _OTelSDKConfigurator
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter

__all__ = [
    "ATTRIBUTES_FIELD",
    "BOUNDED_ATTRIBUTES_DICT",
    "EVENTS_FIELD",
    "LINKS_FIELD",
    "PLAIN_LAYOUT_SPAN_TYPES",
    "SDK_SETUP_TAKES_SPAN_PROCESSORS",
    "SdkConfigurator",
    "batch_queue",
    "configure_sdk",
    "exporter_endpoint",
    "replace_span_processors",
    "span_fields",
    "span_processors",
]

# -- a provider's span processors (plugin/wiring.py) ----------------------------------------------
# ``TracerProvider._active_span_processor`` is a ``SynchronousMultiSpanProcessor`` that keeps the
# processors as a tuple in ``_span_processors``, replaced whole under its ``_lock``. The public API
# can only append a processor; the profiler must sit in front of the exporting ones.


def span_processors(provider: TracerProvider) -> tuple[SpanProcessor, ...]:
    """The span processors of ``provider``, in call order; empty for an unexpected layout."""
    processors = getattr(getattr(provider, "_active_span_processor", None), "_span_processors", ())
    return processors if isinstance(processors, tuple) else ()


def replace_span_processors(
    provider: TracerProvider, change: Callable[[tuple[SpanProcessor, ...]], tuple[SpanProcessor, ...]]
) -> bool:
    """Replace ``provider``'s span processors with ``change(current)``, under the provider's lock.

    Returns:
        False, having changed nothing, when the provider does not have the expected layout.
    """
    multi = getattr(provider, "_active_span_processor", None)
    lock = getattr(multi, "_lock", None)
    if not isinstance(getattr(multi, "_span_processors", None), tuple) or lock is None:
        return False
    with lock:
        multi._span_processors = change(multi._span_processors)  # type: ignore[union-attr]
    return True


# -- a batching processor's queue (plugin/downstream.py) -------------------------------------------
# Since SDK 1.34 ``BatchSpanProcessor`` hands spans to a ``BatchProcessor`` (``_batch_processor``)
# that queues them in ``_queue``; before, it queued them itself, in ``queue``. Either is a ``deque``
# whose ``maxlen`` is the queue size: a span added to a full queue pushes the oldest out ("Queue
# full, dropping Span"). Nothing public tells how full it is, and the profiler, which hands a whole
# trace over at once, must wait for room rather than lose spans.


def batch_queue(processor: SpanProcessor) -> deque[Any] | None:
    """The bounded queue of a ``BatchSpanProcessor`` (or a subclass), or None for any other processor."""
    batch_processor = getattr(processor, "_batch_processor", None)
    queue = getattr(processor, "queue", None) if batch_processor is None else getattr(batch_processor, "_queue", None)
    return queue if isinstance(queue, deque) and queue.maxlen is not None else None


# -- an exporter's endpoint (plugin/export_accounting.py) -----------------------------------------
# The OTLP exporters (HTTP and gRPC) keep where they send in ``_endpoint``; nothing public says it.


def exporter_endpoint(exporter: SpanExporter) -> str | None:
    """Where ``exporter`` sends spans (a URL, or host:port for gRPC), or None when it does not say."""
    endpoint = getattr(exporter, "_endpoint", None)
    return endpoint if isinstance(endpoint, str) and endpoint else None


# -- the SDK span's layout (adapters/sdk_spans.py, plugin/enriched_span.py) -----------------------
# A span keeps its fields in its instance dict under these names, and its properties return them
# unchanged (``events``/``links`` return copies). Reading the dict directly saves a Python call per
# field, once per span.

#: The instance-dict key of a span's attributes: a ``BoundedAttributes`` on SDK spans, a plain dict
#: on the profiler's enriched copies (``EnrichedSpan.of`` sets it).
ATTRIBUTES_FIELD = "_attributes"
#: The instance-dict keys of a span's raw (uncopied) events and links lists.
EVENTS_FIELD = "_events"
LINKS_FIELD = "_links"
#: The plain dict inside ``BoundedAttributes`` (an attribute of it) that holds the attributes.
BOUNDED_ATTRIBUTES_DICT = "_dict"

#: Reads a span's fields from its instance dict in one call, raising ``KeyError`` when one is missing:
#: end time, attributes, context, parent, name, start time, kind, status, events, links, resource,
#: instrumentation scope.
span_fields = itemgetter(
    "_end_time",
    ATTRIBUTES_FIELD,
    "_context",
    "_parent",
    "_name",
    "_start_time",
    "_kind",
    "_status",
    EVENTS_FIELD,
    LINKS_FIELD,
    "_resource",
    "_instrumentation_scope",
)

#: Exactly these types have the layout above and properties that return its fields unchanged; a
#: subclass may override a property, so it is not here. The tracer makes ``_Span``s (a private
#: subclass of ``Span`` that adds nothing).
PLAIN_LAYOUT_SPAN_TYPES: frozenset[type[ReadableSpan]] = frozenset(
    {ReadableSpan, Span, getattr(sdk_trace, "_Span", Span)}
)

# -- the zero-code configurator (plugin/wiring.py) ------------------------------------------------
# ``opentelemetry-instrument`` runs the first ``opentelemetry_configurator`` entry point; a
# distribution's configurator subclasses the SDK's (``_OTelSDKConfigurator``), overrides its
# ``_configure(**kwargs)`` hook and passes ``span_processors`` and ``export_span_processor`` on to
# the SDK's setup (``_initialize_components``). The setup takes those two only since SDK 1.40; an
# older one rejects them, so the profiler's configurator runs it as it is and then wires the
# profiler into the provider it made.

#: The SDK's own configurator, which the profiler's extends.
SdkConfigurator = _OTelSDKConfigurator


def _sdk_setup_takes_span_processors() -> bool:
    setup = getattr(sdk_configuration, "_initialize_components", None)
    try:
        parameters = inspect.signature(setup).parameters  # type: ignore[arg-type]
    except (TypeError, ValueError):  # not there, or not a function: nothing to pass processors to
        return False
    return "span_processors" in parameters and "export_span_processor" in parameters


#: Whether the SDK's setup takes the processors a configurator adds (SDK 1.40 and later).
SDK_SETUP_TAKES_SPAN_PROCESSORS: bool = _sdk_setup_takes_span_processors()


def configure_sdk(configurator: SdkConfigurator, **kwargs: Any) -> None:
    """Run the SDK's own setup for ``configurator``, with the keyword arguments of its ``_configure`` hook."""
    _OTelSDKConfigurator._configure(configurator, **kwargs)  # type: ignore[no-untyped-call]

"""Getting the profiler into an application: ``install()``, the zero-code configurator and the
post-instrument hook.

``install()`` is tested in-process on providers made here. The configurator and the hook work
on the global providers, which can be set only once per process, so they run in subprocesses
(marked ``e2e``) that export spans to the console; their output is parsed here.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import (
    ConcurrentMultiSpanProcessor,
    ReadableSpan,
    Span,
    SpanProcessor,
    SynchronousMultiSpanProcessor,
    TracerProvider,
)
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_agent_profiler.live import attributes as attr
from otel_agent_profiler.plugin import wiring
from otel_agent_profiler.plugin.config import _OPTIONS
from otel_agent_profiler.plugin.processor import AgentProfilerSpanProcessor
from otel_agent_profiler.plugin.wiring import AgentProfilerConfigurator, find_profiler, install, post_instrument

T0 = 1_700_000_000_000_000_000
MS = 1_000_000


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable, _ in _OPTIONS.values():
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.delenv("OTEL_AGENT_PROFILER_ENABLED", raising=False)


@pytest.fixture
def providers() -> Iterator[list[TracerProvider]]:
    made: list[TracerProvider] = []
    yield made
    for provider in made:
        provider.shutdown()


@pytest.fixture
def meter_provider() -> Iterator[MeterProvider]:
    provider = MeterProvider(metric_readers=[InMemoryMetricReader()], shutdown_on_exit=False)
    yield provider
    provider.shutdown()


class Recorder(SpanProcessor):
    def __init__(self) -> None:
        self.started: list[Span] = []
        self.ended: list[ReadableSpan] = []
        self.shutdowns = 0

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.started.append(span)

    def on_end(self, span: ReadableSpan) -> None:
        self.ended.append(span)

    def shutdown(self) -> None:
        self.shutdowns += 1

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        # SpanProcessor's own returns None in older SDKs (1.40 among them), which fails the provider's flush.
        return True


class CountingExporter(InMemorySpanExporter):
    def __init__(self) -> None:
        super().__init__()
        self.shutdowns = 0

    def shutdown(self) -> None:
        self.shutdowns += 1
        super().shutdown()


def processors_of(provider: TracerProvider) -> tuple[SpanProcessor, ...]:
    return provider._active_span_processor._span_processors


def make_trace(tracer: trace.Tracer) -> None:
    root = tracer.start_span(
        "invoke_agent planner",
        context=Context(),
        start_time=T0,
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"},
    )
    llm = tracer.start_span(
        "chat gpt-4o",
        context=trace.set_span_in_context(root),
        start_time=T0 + 5 * MS,
        attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"},
    )
    llm.end(end_time=T0 + 40 * MS)
    tool = tracer.start_span(
        "execute_tool search",
        context=trace.set_span_in_context(root),
        start_time=T0 + 45 * MS,
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"},
    )
    tool.end(end_time=T0 + 90 * MS)
    root.end(end_time=T0 + 100 * MS)


def enriched(span: ReadableSpan) -> bool:
    return attr.SELF_TIME_MS in (span.attributes or {})


# -- install() ------------------------------------------------------------------------------------


def test_install_puts_the_profiler_in_front_of_the_exporting_processors(
    providers: list[TracerProvider], meter_provider: MeterProvider
) -> None:
    provider = TracerProvider(shutdown_on_exit=False)
    providers.append(provider)
    batch_exporter, simple_exporter = InMemorySpanExporter(), InMemorySpanExporter()
    batch = BatchSpanProcessor(batch_exporter)
    other = Recorder()
    simple = SimpleSpanProcessor(simple_exporter)
    for processor in (batch, other, simple):
        provider.add_span_processor(processor)

    profiler = install(provider, meter_provider=meter_provider)

    assert isinstance(profiler, AgentProfilerSpanProcessor)
    assert processors_of(provider) == (other, profiler)
    assert profiler.downstream == (batch, simple)
    assert find_profiler(provider) is profiler

    make_trace(provider.get_tracer("t"))
    assert provider.force_flush(10_000)
    for exporter in (batch_exporter, simple_exporter):
        spans = exporter.get_finished_spans()
        assert len(spans) == 3  # exactly once each
        assert len({s.context.span_id for s in spans}) == 3
        assert all(enriched(s) for s in spans)
    # The processor left in place still sees every span, as the SDK ended it.
    assert len(other.started) == 3
    assert len(other.ended) == 3
    assert not any(enriched(s) for s in other.ended)


def test_install_is_idempotent(
    providers: list[TracerProvider], meter_provider: MeterProvider, caplog: pytest.LogCaptureFixture
) -> None:
    provider = TracerProvider(shutdown_on_exit=False)
    providers.append(provider)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    first = install(provider, meter_provider=meter_provider)
    layout = processors_of(provider)
    downstream = first.downstream
    assert install(provider) is first
    with caplog.at_level(logging.WARNING):
        assert install(provider, max_traces=5) is first
    assert any("already installed" in r.getMessage() for r in caplog.records)
    assert first.config.max_traces == 1000
    assert processors_of(provider) == layout
    assert first.downstream == downstream
    make_trace(provider.get_tracer("t"))
    assert provider.force_flush(10_000)
    assert len(exporter.get_finished_spans()) == 3


@pytest.mark.parametrize(
    "make_provider",
    [trace.NoOpTracerProvider, trace.ProxyTracerProvider, object],
    ids=["noop", "proxy", "object"],
)
def test_install_needs_an_sdk_provider(make_provider: Callable[[], Any]) -> None:
    with pytest.raises(ValueError, match="TracerProvider"):
        install(make_provider())


def test_install_without_a_provider_uses_the_global_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wiring.trace, "get_tracer_provider", lambda: trace.ProxyTracerProvider())
    with pytest.raises(ValueError):
        install()


def test_install_on_the_global_provider(
    monkeypatch: pytest.MonkeyPatch, providers: list[TracerProvider], meter_provider: MeterProvider
) -> None:
    provider = TracerProvider(shutdown_on_exit=False)
    providers.append(provider)
    monkeypatch.setattr(wiring.trace, "get_tracer_provider", lambda: provider)
    profiler = install(meter_provider=meter_provider)
    assert find_profiler(provider) is profiler


def test_install_with_a_bad_option_leaves_the_provider_alone(providers: list[TracerProvider]) -> None:
    provider = TracerProvider(shutdown_on_exit=False)
    providers.append(provider)
    simple = SimpleSpanProcessor(InMemorySpanExporter())
    provider.add_span_processor(simple)
    with pytest.raises(ValueError):
        install(provider, sample_rate=2)
    with pytest.raises(ValueError):
        install(provider, no_such_option=1)
    assert processors_of(provider) == (simple,)
    assert find_profiler(provider) is None


def test_install_with_an_extra_exporter_and_options(
    providers: list[TracerProvider], meter_provider: MeterProvider
) -> None:
    provider = TracerProvider(shutdown_on_exit=False)
    providers.append(provider)
    extra = InMemorySpanExporter()
    profiler = install(provider, span_exporter=extra, meter_provider=meter_provider, max_traces=7, enrich_spans=True)
    assert profiler.config.max_traces == 7
    assert len(profiler.downstream) == 1 and isinstance(profiler.downstream[0], BatchSpanProcessor)
    make_trace(provider.get_tracer("t"))
    assert provider.force_flush(10_000)
    spans = extra.get_finished_spans()
    assert len(spans) == 3 and all(enriched(s) for s in spans)


def test_install_without_exporters_profiles_only(
    providers: list[TracerProvider], meter_provider: MeterProvider
) -> None:
    provider = TracerProvider(shutdown_on_exit=False)
    providers.append(provider)
    other = Recorder()
    provider.add_span_processor(other)
    profiler = install(provider, meter_provider=meter_provider)
    assert profiler.downstream == ()
    make_trace(provider.get_tracer("t"))
    assert provider.force_flush(10_000)
    assert len(profiler.recent_profiles) == 1
    assert len(other.ended) == 3


def test_install_on_a_concurrent_multi_span_processor(
    providers: list[TracerProvider], meter_provider: MeterProvider
) -> None:
    provider = TracerProvider(shutdown_on_exit=False, active_span_processor=ConcurrentMultiSpanProcessor(2))
    providers.append(provider)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    install(provider, meter_provider=meter_provider)
    make_trace(provider.get_tracer("t"))
    assert provider.force_flush(10_000)
    spans = exporter.get_finished_spans()
    assert len(spans) == 3 and all(enriched(s) for s in spans)


def test_install_on_an_unknown_layout_adds_the_profiler_alongside(
    providers: list[TracerProvider], meter_provider: MeterProvider, caplog: pytest.LogCaptureFixture
) -> None:
    class OddMulti(SynchronousMultiSpanProcessor):
        def __init__(self) -> None:
            super().__init__()
            self._span_processors = []  # type: ignore[assignment]

        def add_span_processor(self, span_processor: SpanProcessor) -> None:
            self._span_processors.append(span_processor)  # type: ignore[attr-defined]

    provider = TracerProvider(shutdown_on_exit=False, active_span_processor=OddMulti())
    providers.append(provider)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with caplog.at_level(logging.WARNING):
        profiler = install(provider, meter_provider=meter_provider)
    assert any("cannot put the profiler" in r.getMessage() for r in caplog.records)
    make_trace(provider.get_tracer("t"))
    assert provider.force_flush(10_000)
    assert len(exporter.get_finished_spans()) == 3  # exported as before, once
    assert len(profiler.recent_profiles) == 1


def test_provider_shutdown_shuts_the_moved_exporters_down_once(
    providers: list[TracerProvider], meter_provider: MeterProvider
) -> None:
    provider = TracerProvider(shutdown_on_exit=False)
    exporter = CountingExporter()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    install(provider, meter_provider=meter_provider)
    root = provider.get_tracer("t").start_span("pending")
    child = provider.get_tracer("t").start_span("child", context=trace.set_span_in_context(root))
    child.end()
    provider.shutdown()
    assert exporter.shutdowns == 1
    assert [s.name for s in exporter.get_finished_spans()] == ["child"]
    assert enriched(exporter.get_finished_spans()[0])


# -- post_instrument() in-process (the global provider is only looked up, never set) -------------


def test_post_instrument_wires_the_profiler_in(
    monkeypatch: pytest.MonkeyPatch, providers: list[TracerProvider]
) -> None:
    provider = TracerProvider(shutdown_on_exit=False)
    providers.append(provider)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(wiring.trace, "get_tracer_provider", lambda: provider)
    monkeypatch.setenv("OTEL_AGENT_PROFILER_METRICS", "false")
    post_instrument()
    profiler = find_profiler(provider)
    assert profiler is not None
    post_instrument()
    assert find_profiler(provider) is profiler
    assert sum(isinstance(p, AgentProfilerSpanProcessor) for p in processors_of(provider)) == 1
    make_trace(provider.get_tracer("t"))
    assert provider.force_flush(10_000)
    spans = exporter.get_finished_spans()
    assert len(spans) == 3 and all(enriched(s) for s in spans)


def test_post_instrument_respects_the_enabled_switch(
    monkeypatch: pytest.MonkeyPatch, providers: list[TracerProvider]
) -> None:
    provider = TracerProvider(shutdown_on_exit=False)
    providers.append(provider)
    monkeypatch.setattr(wiring.trace, "get_tracer_provider", lambda: provider)
    monkeypatch.setenv("OTEL_AGENT_PROFILER_ENABLED", "false")
    post_instrument()
    assert find_profiler(provider) is None


def test_post_instrument_without_an_sdk_provider_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wiring.trace, "get_tracer_provider", lambda: trace.NoOpTracerProvider())
    post_instrument()  # no exception


def test_post_instrument_never_raises(
    monkeypatch: pytest.MonkeyPatch, never_raise: None, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> Any:
        raise RuntimeError("no provider for you")

    monkeypatch.setattr(wiring.trace, "get_tracer_provider", broken)
    with caplog.at_level(logging.ERROR):
        post_instrument("positional", keyword="ignored")
    assert any("post_instrument hook" in r.getMessage() for r in caplog.records)


def test_configurator_is_an_sdk_configurator() -> None:
    from opentelemetry.sdk._configuration import _OTelSDKConfigurator

    assert issubclass(AgentProfilerConfigurator, _OTelSDKConfigurator)


# -- zero-code start, in subprocesses -------------------------------------------------------------

_MAKE_SPANS = """
from opentelemetry import trace
tracer = trace.get_tracer("e2e")
with tracer.start_as_current_span(
    "invoke_agent planner", attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"}
):
    with tracer.start_as_current_span(
        "chat gpt-4o", attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}
    ):
        pass
    with tracer.start_as_current_span(
        "execute_tool search", attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}
    ):
        pass
"""

_CONFIGURE = """
from otel_agent_profiler.plugin.wiring import AgentProfilerConfigurator
AgentProfilerConfigurator().configure()
"""

_MANUAL_SDK_THEN_HOOK = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
trace.set_tracer_provider(provider)
from otel_agent_profiler.plugin.wiring import post_instrument
post_instrument()
"""


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PYTEST"))}
    environ.update(env)
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result


def _json_documents(text: str) -> list[dict[str, Any]]:
    """The JSON objects printed one after another by the console exporters."""
    decoder = json.JSONDecoder()
    documents: list[dict[str, Any]] = []
    index = 0
    while True:
        start = text.find("{", index)
        if start < 0:
            return documents
        try:
            document, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            index = start + 1
            continue
        documents.append(document)
        index = end


def _spans(text: str) -> list[dict[str, Any]]:
    return [d for d in _json_documents(text) if "context" in d and "span_id" in d.get("context", {})]


def _assert_enriched_once(stdout: str) -> dict[str, dict[str, Any]]:
    spans = _spans(stdout)
    names = sorted(s["name"] for s in spans)
    assert names == ["chat gpt-4o", "execute_tool search", "invoke_agent planner"], names
    by_name = {s["name"]: s for s in spans}
    optional = {
        attr.TIME_TO_FIRST_TOKEN_MS,
        attr.COST_USD,
        attr.CONTEXT_WINDOW_USE,
        *attr.LLM_PHASE_ATTRIBUTES,
        *attr.BACKEND_ATTRIBUTES,
    }
    for span in spans:
        # The default: the root gets every attribute, the other spans the essential ones.
        is_root = span["name"] == "invoke_agent planner"
        expected = set(attr.SPAN_ATTRIBUTES) if is_root else attr.ESSENTIAL_SPAN_ATTRIBUTES
        for key in expected - optional:
            assert key in span["attributes"], (span["name"], key)
        if not is_root:
            assert attr.OPERATION not in span["attributes"], span["name"]
    root = by_name["invoke_agent planner"]["attributes"]
    assert root[attr.TRACE_SPAN_COUNT] == 3
    assert root[attr.TRACE_COMPLETE] is True
    assert by_name["chat gpt-4o"]["attributes"][attr.CATEGORY] == "llm"
    assert root[attr.OPERATION] == "planner"
    assert by_name["execute_tool search"]["attributes"][attr.CATEGORY] == "tool"
    return by_name


@pytest.mark.e2e
def test_configurator_exports_enriched_spans_to_the_console() -> None:
    result = _run(_CONFIGURE + _MAKE_SPANS, OTEL_TRACES_EXPORTER="console", OTEL_METRICS_EXPORTER="none")
    _assert_enriched_once(result.stdout)


# An SDK before 1.40, whose setup takes no processors: the setup is the current one without them.
_OLD_SDK_SETUP = """
from opentelemetry.sdk import _configuration
from otel_agent_profiler import _sdk_internals
setup = _configuration._initialize_components
def setup_without_processors(span_processors=None, export_span_processor=None, **kwargs):
    assert span_processors is None and export_span_processor is None, "processors passed to an old SDK's setup"
    setup(**kwargs)
_configuration._initialize_components = setup_without_processors
_sdk_internals.SDK_SETUP_TAKES_SPAN_PROCESSORS = False
"""


@pytest.mark.e2e
def test_configurator_on_an_sdk_whose_setup_takes_no_processors_wires_in_after_it() -> None:
    result = _run(
        _OLD_SDK_SETUP + _CONFIGURE + _MAKE_SPANS, OTEL_TRACES_EXPORTER="console", OTEL_METRICS_EXPORTER="none"
    )
    _assert_enriched_once(result.stdout)


@pytest.mark.e2e
def test_opentelemetry_instrument_runs_the_profilers_configurator() -> None:
    # The real zero-code start, with the installed SDK and instrumentation: the entry points are
    # found, and the spans reach the console exporter enriched, once.
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PYTEST"))}
    environ.update(OTEL_TRACES_EXPORTER="console", OTEL_METRICS_EXPORTER="none", OTEL_LOGS_EXPORTER="none")
    instrument = str(Path(sys.executable).with_name("opentelemetry-instrument"))
    result = subprocess.run(
        [instrument, sys.executable, "-c", textwrap.dedent(_MAKE_SPANS)],
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    _assert_enriched_once(result.stdout)


@pytest.mark.e2e
def test_configurator_takes_options_from_the_environment() -> None:
    result = _run(
        _CONFIGURE + _MAKE_SPANS,
        OTEL_TRACES_EXPORTER="console",
        OTEL_METRICS_EXPORTER="none",
        OTEL_AGENT_PROFILER_CATEGORY_OVERRIDES="execute_tool *=retrieval",
        OTEL_AGENT_PROFILER_CONSOLE_REPORT="true",
        OTEL_AGENT_PROFILER_MAX_TRACES="not-a-number",
    )
    by_name = {s["name"]: s for s in _spans(result.stdout)}
    assert by_name["execute_tool search"]["attributes"][attr.CATEGORY] == "retrieval"
    assert "Where the time went" in result.stderr
    assert "Span tree" in result.stderr
    assert "OTEL_AGENT_PROFILER_MAX_TRACES" in result.stderr  # the bad value is reported


@pytest.mark.e2e
def test_configurator_disabled_leaves_spans_alone() -> None:
    result = _run(
        _CONFIGURE + _MAKE_SPANS,
        OTEL_TRACES_EXPORTER="console",
        OTEL_METRICS_EXPORTER="none",
        OTEL_AGENT_PROFILER_ENABLED="false",
    )
    spans = _spans(result.stdout)
    assert len(spans) == 3
    for span in spans:
        assert not any(key.startswith("agent_profiler.") for key in span["attributes"])


@pytest.mark.e2e
def test_configurator_exports_the_metrics_of_traces_profiled_at_exit() -> None:
    # The trace is still open when the process exits, so it is profiled by the shutdown at
    # exit; its metrics must still reach the metric exporter.
    code = (
        _CONFIGURE
        + """
from opentelemetry import trace
tracer = trace.get_tracer("e2e")
root = tracer.start_span("invoke_agent planner", attributes={"gen_ai.operation.name": "invoke_agent"})
child = tracer.start_span("chat gpt-4o", context=trace.set_span_in_context(root),
                          attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"})
child.end()
"""
    )
    result = _run(code, OTEL_TRACES_EXPORTER="console", OTEL_METRICS_EXPORTER="console")
    spans = _spans(result.stdout)
    assert [s["name"] for s in spans] == ["chat gpt-4o"]
    assert attr.SELF_TIME_MS in spans[0]["attributes"]
    assert "agent_profiler.traces" in result.stdout, "metrics of the trace profiled at exit were lost"
    assert "A shutdown `MeterProvider` can not provide a `Meter`" not in result.stderr


@pytest.mark.e2e
def test_post_instrument_wires_into_a_provider_set_up_by_hand() -> None:
    result = _run(_MANUAL_SDK_THEN_HOOK + _MAKE_SPANS)
    _assert_enriched_once(result.stdout)


@pytest.mark.e2e
def test_post_instrument_after_install_does_not_profile_twice() -> None:
    code = (
        _MANUAL_SDK_THEN_HOOK
        + """
from otel_agent_profiler.plugin import wiring
first = wiring.find_profiler(provider)
assert wiring.install(provider) is first
post_instrument()
assert sum(type(p).__name__ == "AgentProfilerSpanProcessor"
           for p in provider._active_span_processor._span_processors) == 1
"""
        + _MAKE_SPANS
    )
    result = _run(code)
    _assert_enriched_once(result.stdout)


@pytest.mark.e2e
def test_post_instrument_disabled_in_a_subprocess() -> None:
    result = _run(_MANUAL_SDK_THEN_HOOK + _MAKE_SPANS, OTEL_AGENT_PROFILER_ENABLED="false")
    spans = _spans(result.stdout)
    assert len(spans) == 3
    assert not any(key.startswith("agent_profiler.") for span in spans for key in span["attributes"])

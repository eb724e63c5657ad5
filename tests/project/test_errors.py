"""The profiler's exceptions live in one module under one base, and its own bugs go through one guard."""

from __future__ import annotations

import ast
import logging
import threading
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agent_profiler
from otel_agent_profiler import errors
from otel_agent_profiler.live.trace_assembly import TraceAssembly
from otel_agent_profiler.plugin import processor as processor_module, wiring as wiring_module
from otel_agent_profiler.plugin.processor import AgentProfilerSpanProcessor

PACKAGE = Path(otel_agent_profiler.__file__).resolve().parent


def _exception_classes_outside_errors_py() -> list[str]:
    """Classes defined outside errors.py whose bases name an exception (``...Error``, ``Exception``)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "errors.py" and path.parent == PACKAGE:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = [ast.unparse(base) for base in node.bases]
            if any(base.endswith(("Error", "Exception", "Warning")) for base in bases):
                found.append(f"{path.relative_to(PACKAGE)}:{node.name}({', '.join(bases)})")
    return found


def test_every_exception_the_package_defines_is_in_errors_py() -> None:
    assert _exception_classes_outside_errors_py() == []


def test_every_exception_in_errors_py_is_an_agent_profiler_error() -> None:
    classes = [getattr(errors, name) for name in errors.__all__ if isinstance(getattr(errors, name), type)]
    exceptions = [cls for cls in classes if issubclass(cls, BaseException)]
    assert len(exceptions) >= 7
    for cls in exceptions:
        assert issubclass(cls, otel_agent_profiler.AgentProfilerError), cls


@pytest.fixture
def logged_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    # The suite re-raises internal errors (conftest); these tests look at what users get.
    monkeypatch.setattr(errors, "raise_internal_errors", False)
    monkeypatch.setattr(errors, "_reported", set())


def test_the_guard_as_a_context_manager_logs_once_and_swallows(
    logged_not_raised: None, caplog: pytest.LogCaptureFixture
) -> None:
    log = errors.InternalErrorLog(logging.getLogger("test.guard"), "step %s failed")
    ran_after = []
    for _ in range(3):
        with log.guard("guard-cm", "export"):
            raise RuntimeError("boom")
        ran_after.append(True)
    assert ran_after == [True, True, True]
    messages = [record.getMessage() for record in caplog.records if record.name == "test.guard"]
    assert messages == ["step export failed"]
    assert caplog.records[0].exc_info is not None


def test_the_guard_as_a_decorator(logged_not_raised: None, caplog: pytest.LogCaptureFixture) -> None:
    calls = []

    @errors.handle_internal_errors("decorated-hook")
    def hook(value: int) -> None:
        calls.append(value)
        raise ValueError("bad")

    hook(1)
    hook(2)
    assert calls == [1, 2]
    assert [r.getMessage() for r in caplog.records if "decorated-hook" in r.getMessage()] == [
        "otel-agent-profiler: internal error in decorated-hook; spans are still exported (logged once)"
    ]


def test_the_guard_lets_interrupts_through(logged_not_raised: None) -> None:
    with pytest.raises(KeyboardInterrupt), errors.handle_internal_errors("interrupt"):
        raise KeyboardInterrupt


def test_under_the_test_suite_the_guard_re_raises() -> None:
    assert errors.raise_internal_errors
    with pytest.raises(RuntimeError, match="surfaces"), errors.handle_internal_errors("suite"):
        raise RuntimeError("surfaces")


# -- the guard on the plugin's hooks, as the application sees them ---------------------------------


def _internal_error_logs(caplog: pytest.LogCaptureFixture, where: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if f"internal error in {where};" in r.getMessage()]


def _profiler_with_a_broken_buffer(monkeypatch: pytest.MonkeyPatch) -> tuple[Any, InMemorySpanExporter]:
    def broken(*args: object, **kwargs: object) -> Any:
        raise RuntimeError("the buffer broke")

    # What the application's thread calls on the buffer: a span start, and a span end's two steps.
    monkeypatch.setattr(TraceAssembly, "span_started", broken)
    monkeypatch.setattr(TraceAssembly, "refused_now", broken)
    monkeypatch.setattr(TraceAssembly, "span_ended_later", broken)
    exported = InMemorySpanExporter()
    profiler = AgentProfilerSpanProcessor(downstream=[SimpleSpanProcessor(exported)], metrics_enabled=False)
    return profiler, exported


def test_a_processor_hook_failing_inside_never_raises_into_the_app_and_logs_the_first_failure_once(
    logged_not_raised: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    profiler, exported = _profiler_with_a_broken_buffer(monkeypatch)
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(profiler)
    tracer = provider.get_tracer("app")
    with caplog.at_level(logging.ERROR):
        for index in range(3):  # the app's own code: nothing of the profiler's failure reaches it
            with tracer.start_as_current_span(f"request {index}"), tracer.start_as_current_span("llm"):
                pass
        provider.shutdown()
    assert len(exported.get_finished_spans()) == 6  # every span still goes out, unprofiled
    for hook in ("on_start", "on_end"):
        logged = _internal_error_logs(caplog, hook)
        assert len(logged) == 1, hook  # six failures of each hook, one line each
        assert logged[0].levelno == logging.ERROR
        assert logged[0].exc_info is not None and str(logged[0].exc_info[1]) == "the buffer broke"


def test_under_the_test_suite_the_same_hook_failure_reaches_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    profiler, _ = _profiler_with_a_broken_buffer(monkeypatch)
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(profiler)
    with pytest.raises(RuntimeError, match="the buffer broke"):
        provider.get_tracer("app").start_span("request")
    profiler.shutdown()


def test_hooks_guarded_by_the_decorator_log_once_and_return(
    logged_not_raised: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: object, **kwargs: object) -> Any:
        raise RuntimeError("could not write the report")

    monkeypatch.setattr(processor_module, "write_console_report", broken)
    monkeypatch.setattr(wiring_module, "enabled_in_environment", broken)
    with caplog.at_level(logging.ERROR):
        for _ in range(2):
            AgentProfilerSpanProcessor(console_report=True, metrics_enabled=False).shutdown()  # a method
            assert wiring_module.post_instrument() is None  # the opentelemetry_post_instrument hook
    assert len(_internal_error_logs(caplog, "console report")) == 1
    assert len(_internal_error_logs(caplog, "post_instrument hook")) == 1


def test_one_guard_serves_many_threads_at_once(logged_not_raised: None, caplog: pytest.LogCaptureFixture) -> None:
    log = errors.InternalErrorLog(logging.getLogger("test.threads"), "failed in %s")
    guard = log.guard("shared-guard", "a thread")
    finished = []

    @guard
    def work(index: int) -> None:
        if index % 2:
            raise ValueError(index)
        finished.append(index)

    threads = [threading.Thread(target=work, args=(index,)) for index in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(finished) == list(range(0, 20, 2))
    assert [r.getMessage() for r in caplog.records if r.name == "test.threads"] == ["failed in a thread"]


# -- every except Exception says why it is not the guard ---------------------------------------------


def _bare_catches() -> list[str]:
    """``except Exception`` clauses outside errors.py with no comment on their line or the next."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "errors.py" and path.parent == PACKAGE:
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):
            if line.strip().startswith("except Exception"):
                following = lines[number + 1].strip() if number + 1 < len(lines) else ""
                if "#" not in line and not following.startswith("#"):
                    found.append(f"{path.relative_to(PACKAGE)}:{number + 1}")
    return found


def test_every_except_exception_outside_the_guard_says_why() -> None:
    # The profiler's own bugs go through InternalErrorLog.guard; an ``except Exception`` is for
    # something else (an error turned into an answer, a count, a user's message) and says so.
    assert _bare_catches() == []

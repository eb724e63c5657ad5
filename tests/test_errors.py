"""The profiler's exceptions live in one module under one base, and its own bugs go through one guard."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest

import otel_agent_profiler
from otel_agent_profiler import errors

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

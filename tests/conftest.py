"""Shared test setup: internal errors raised, real backends for e2e tests."""

# Import mode: pytest's default ("prepend"). tests/ and every folder in it are packages (``__init__.py``),
# so a test module is imported as ``tests.<part>.test_x``: test files of the same name in two folders do
# not clash, a test may import another (``from tests.cli.test_cli import SPANS``) and gets the module pytest
# collected, and this file is ``tests.conftest``. The rootdir, the first directory up without an
# ``__init__.py``, is put first on the module search path; pyproject's ``pythonpath = ["."]`` puts it there
# too, whatever the invocation. Shared helpers are imported as ``tests.support.<module>``, paths come from
# ``tests.support.paths``, benchmark generators as ``benchmarks.<module>``: no test edits the search path.
# tests/conformance/ is a package too (``tests.conformance.harness``); its apps/ run as scripts in other
# virtual environments and are never imported here. (``--import-mode=importlib`` would also work, but test
# modules importing each other would then get a second copy of the module.)

from __future__ import annotations

from pathlib import Path

# --------------------------------------------------------------------------------------------------------------
# The profiler's own bugs fail tests: in production it logs the errors it catches to keep the app running
# (otel_agent_profiler/errors.py); here they are re-raised. Tests of the production behaviour ask for
# ``never_raise``.
import pytest

from otel_agent_profiler import errors as _errors


@pytest.fixture(autouse=True)
def _internal_errors_fail_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_errors, "raise_internal_errors", True)
    monkeypatch.setattr(_errors, "_reported", set())  # each test sees its own "first error" of each place


@pytest.fixture
def never_raise(monkeypatch: pytest.MonkeyPatch) -> None:
    """Production mode: internal errors are logged (the first of each place in full), never raised."""
    monkeypatch.setattr(_errors, "raise_internal_errors", False)


# --------------------------------------------------------------------------------------------------------------
# Real OTLP backends for the end-to-end tests (tests/support/backends.py): rotel, Arize Phoenix, Prometheus.
# Installed by scripts/test; a missing one fails the test with that hint (never a skip).
# Logs: test-artifacts/backends/latest/ (phoenix/, and e2e/<test id>/ for per-test backends).

import uuid  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from typing import Any  # noqa: E402

from tests.support.backends import BackendNotInstalled, Phoenix, Prometheus, Rotel, artifact_dir  # noqa: E402


def _test_artifacts(request: pytest.FixtureRequest) -> Callable[[], Path]:
    """Lazily create test-artifacts/e2e/<test id>/ (only for tests that actually start a backend)."""
    made: list[Path] = []

    def get() -> Path:
        if not made:
            made.append(artifact_dir("e2e", request.node.nodeid))
        return made[0]

    return get


@pytest.fixture
def rotel_factory(request: pytest.FixtureRequest) -> Iterator[Callable[..., Rotel]]:
    """Start real rotel collectors: ``rotel_factory()`` (blackhole) or ``rotel_factory(exporter_endpoint=...,
    protocol="grpc"|"http")``; each is started and ready when returned, and stopped after the test."""
    log_dir = _test_artifacts(request)
    started: list[Rotel] = []

    def start(**kwargs: Any) -> Rotel:
        kwargs.setdefault("name", f"rotel-{len(started) + 1}")
        try:
            rotel = Rotel(log_dir(), **kwargs)
        except BackendNotInstalled as err:
            pytest.fail(str(err), pytrace=False)
        started.append(rotel)
        return rotel.start()

    yield start
    for rotel in reversed(started):
        rotel.stop()


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    """One real Arize Phoenix for the whole session (~10 s to start). Isolate tests with ``phoenix_project``."""
    try:
        server = Phoenix(tmp_path_factory.mktemp("phoenix"), artifact_dir("phoenix"))
    except BackendNotInstalled as err:
        pytest.fail(str(err), pytrace=False)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def phoenix_project(request: pytest.FixtureRequest) -> str:
    """A Phoenix project name unique to this test: set it as resource attribute ``openinference.project.name``."""
    readable = "".join(c if c.isalnum() or c in "-_" else "-" for c in request.node.name)[:60]
    return f"{readable}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def prometheus_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., Prometheus]]:
    """Start a real Prometheus scraping the given ``host:port`` targets every second: ``prometheus_factory([t])``."""
    log_dir = _test_artifacts(request)
    started: list[Prometheus] = []

    def start(targets: list[str], **kwargs: Any) -> Prometheus:
        name = kwargs.pop("name", f"prometheus-{len(started) + 1}")
        try:
            prom = Prometheus(targets, tmp_path / name, log_dir(), name=name, **kwargs)
        except BackendNotInstalled as err:
            pytest.fail(str(err), pytrace=False)
        started.append(prom)
        return prom.start()

    yield start
    for prom in reversed(started):
        prom.stop()

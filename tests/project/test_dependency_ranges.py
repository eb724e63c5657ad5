"""The OpenTelemetry releases the package accepts: the ranges, both ends tested, and what installs beside it.

pyproject.toml accepts every OpenTelemetry release from the oldest the plugin's tests pass on to the next major,
because the plugin lives in other people's applications, which already have one. constraints-otel-lowest.txt and
constraints-otel-highest.txt pin the two ends exactly; scripts/test builds a virtual environment for each
(scripts/_otel_matrix.sh) and the tests here run the plugin's tests in both. The last tests check with pip itself
that agent frameworks which hold OpenTelemetry to older releases install beside this package at their current
versions, instead of pip quietly picking old releases of them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.version import Version

from tests.support.backends import artifact_dir
from tests.support.paths import ROOT

SETS = ("lowest", "highest")

#: The plugin's tests run in each set's environment: everything that touches the SDK in-process, serve's OTLP
#: decoding (the set's opentelemetry-proto), and the subprocess tests of the zero-code start (which need no
#: backend); not the tests that need the real collector, the OpenAI client or the other environments.
MATRIX_RUNS = (
    [
        *("tests/plugin", "tests/live", "tests/adapters"),
        *("tests/service/test_serve_proto.py", "tests/service/test_serve_receivers.py"),
        *("-m", "not e2e"),
    ],
    ["tests/plugin/test_wiring.py", "tests/plugin/test_decorators.py", "-m", "e2e"],
)


def _pins(path: Path) -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            requirement = Requirement(line)
            (specifier,) = requirement.specifier
            assert specifier.operator == "==", line
            pins[requirement.name] = Version(specifier.version)
    return pins


def _dependencies() -> dict[str, Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = (Requirement(line) for line in project["dependencies"])
    return {r.name: r for r in requirements if r.name.startswith("opentelemetry-")}


def _lower_bound(requirement: Requirement) -> Version:
    (lower,) = (Version(s.version) for s in requirement.specifier if s.operator == ">=")
    return lower


# -- the ranges and the pinned sets agree -------------------------------------------------------------------------


def test_the_lowest_set_pins_each_opentelemetry_dependency_at_its_lower_bound() -> None:
    lowest = _pins(ROOT / "constraints-otel-lowest.txt")
    for name, requirement in _dependencies().items():
        assert lowest.get(name) == _lower_bound(requirement), f"{name}: pyproject says {requirement.specifier}"


@pytest.mark.parametrize("constraints", ["constraints-otel-highest.txt", "constraints.txt"])
def test_the_pinned_sets_are_inside_the_ranges(constraints: str) -> None:
    pins = _pins(ROOT / constraints)
    for name, requirement in _dependencies().items():
        assert name in pins, f"{constraints} does not pin {name}"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"{constraints} pins {name}=={pins[name]}, outside pyproject's {requirement.specifier}"
        )


def test_only_the_api_is_capped_at_its_next_major() -> None:
    # The SDK pins its API release and the instrumentations ask for API 1.x, so the API's cap holds them all;
    # a cap of their own makes pip settle them early and backtrack at length (see pyproject.toml).
    for name, requirement in _dependencies().items():
        uppers = [Version(s.version) for s in requirement.specifier if s.operator in ("<", "<=", "==", "~=")]
        expected = [Version(f"{_lower_bound(requirement).major + 1}")] if name == "opentelemetry-api" else []
        assert uppers == expected, f"{name}: {requirement.specifier}"


# -- the plugin's tests at both ends ------------------------------------------------------------------------------


def _venv_python(name: str) -> Path:
    python = ROOT / f".venv-otel-{name}" / "bin" / "python"
    if not python.exists():
        pytest.fail(
            f"{python.parent.parent} is missing: scripts/test builds it (scripts/_otel_matrix.sh)", pytrace=False
        )
    return python


def _clean_environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PYTEST", "PYTHONPATH"))}


@pytest.mark.e2e
@pytest.mark.parametrize("name", SETS)
def test_the_environment_holds_exactly_the_pinned_set(name: str) -> None:
    pins = _pins(ROOT / f"constraints-otel-{name}.txt")
    show = (
        "import json, sys\n"
        "from importlib.metadata import version\n"
        "print(json.dumps({n: version(n) for n in sys.argv[1:]}))"
    )
    result = subprocess.run(
        [str(_venv_python(name)), "-c", show, *pins],
        env=_clean_environment(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    installed = {n: Version(v) for n, v in json.loads(result.stdout).items()}
    assert installed == pins


def _run_plugin_tests(python: Path, log_dir: Path, base_temp: Path) -> str | None:
    """Run MATRIX_RUNS with ``python``; None when all pass, else what failed and the end of its output."""
    for index, selection in enumerate(MATRIX_RUNS):
        # A base temp of its own: the inner run cleans up old numbered temp dirs, which could be this run's.
        command = [str(python), "-m", "pytest", *selection, "-q", "-p", "no:cacheprovider"]
        command += ["--basetemp", str(base_temp / f"run-{index}")]
        result = subprocess.run(
            command, cwd=ROOT, env=_clean_environment(), capture_output=True, text=True, timeout=900
        )
        log = log_dir / f"run-{index}.log"
        log.write_text(result.stdout + result.stderr)
        lines = (result.stdout + result.stderr).splitlines()
        if result.returncode != 0 or not lines or " passed" not in result.stdout.splitlines()[-1]:
            tail = "\n".join(lines[-40:])
            return f"{' '.join(selection)} failed (exit {result.returncode}; full log: {log}):\n{tail}"
    return None


@pytest.fixture(scope="module")
def plugin_test_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future[str | None]]]:
    """Both sets' runs, started together on first use: they mostly wait on one core each, so side by side
    they take about as long as one."""
    with ThreadPoolExecutor(max_workers=len(SETS)) as pool:
        runs = {
            name: pool.submit(
                _run_plugin_tests,
                _venv_python(name),
                artifact_dir("e2e", f"otel-matrix-{name}"),
                tmp_path_factory.mktemp(f"otel-{name}"),
            )
            for name in SETS
        }
        yield runs


@pytest.mark.e2e
@pytest.mark.parametrize("name", SETS)
def test_the_plugin_tests_pass_with_the_set(name: str, plugin_test_runs: dict[str, Future[str | None]]) -> None:
    failure = plugin_test_runs[name].result()
    assert failure is None, f"with the {name} set: {failure}"


# -- installing beside frameworks that hold OpenTelemetry back ----------------------------------------------------


def _resolve_beside(requirement: str, tmp_path: Path) -> dict[str, Version]:
    """What pip installs for this package together with ``requirement``, into an empty environment."""
    report = tmp_path / "report.json"
    result = subprocess.run(
        [
            *(sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet"),
            *("--disable-pip-version-check", "--report", str(report), str(ROOT), requirement),
        ],
        env=_clean_environment(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    installs = json.loads(report.read_text())["install"]
    return {i["metadata"]["name"].lower(): Version(i["metadata"]["version"]) for i in installs}


@pytest.mark.e2e
def test_installs_beside_the_current_google_adk(tmp_path: Path) -> None:
    # google-adk 2.13.0 holds the SDK to 1.39-1.44.
    resolved = _resolve_beside("google-adk==2.13.0", tmp_path)
    assert resolved["google-adk"] == Version("2.13.0")
    assert "otel-agent-profiler" in resolved
    assert Version("1.39") <= resolved["opentelemetry-sdk"] <= Version("1.44")


@pytest.mark.e2e
def test_installs_beside_the_current_strands_agents(tmp_path: Path) -> None:
    # strands-agents 1.62.0 needs opentelemetry-instrumentation-threading, whose newest release pins
    # opentelemetry-instrumentation==0.66b1.
    resolved = _resolve_beside("strands-agents[openai]==1.62.0", tmp_path)
    assert resolved["strands-agents"] == Version("1.62.0")
    assert "otel-agent-profiler" in resolved
    assert resolved["opentelemetry-instrumentation"] == Version("0.66b1")

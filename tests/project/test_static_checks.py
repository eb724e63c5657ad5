"""Lint and type checks run with the suite, so CI catches what review would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT


@pytest.mark.e2e
def test_ruff_finds_nothing() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "otel_agent_profiler", "tests", "benchmarks"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.e2e
def test_mypy_passes_strict_on_the_whole_package() -> None:
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.e2e
def test_mypy_catches_a_misspelled_or_mistyped_profiler_option(tmp_path: Path) -> None:
    snippet = tmp_path / "app.py"
    snippet.write_text(
        "from otel_agent_profiler import AgentProfilerSpanProcessor, install\n"
        "install(max_traces=10, sample_rate=0.5, backend_metrics=['http://vllm:8000/metrics'])\n"
        "install(max_trace=10)\n"
        "AgentProfilerSpanProcessor(sampling=0.5)\n"
        "AgentProfilerSpanProcessor(metrics_enabled='no')\n",
        encoding="utf-8",
    )
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", str(snippet)], cwd=ROOT, capture_output=True, text=True
    )
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert [line.split(":")[1] for line in errors] == ["3", "4", "5"], result.stdout + result.stderr
    assert 'Unexpected keyword argument "max_trace"' in errors[0]
    assert 'Unexpected keyword argument "sampling"' in errors[1]
    assert '"metrics_enabled"' in errors[2]

"""The public API is what ``__all__`` says (the layout and the core's purity: test_layout.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import otel_agent_profiler
import otel_agent_profiler.core

PACKAGE = Path(otel_agent_profiler.__file__).resolve().parent
SUBMODULES = {path.stem for path in PACKAGE.glob("*.py")} | {path.name for path in PACKAGE.iterdir() if path.is_dir()}
STDLIB_FOR_CORE = {"__future__", "collections", "dataclasses", "enum", "math", "re", "typing"}


def test_exported_members_are_exactly_all() -> None:
    # The plugin's names are imported on first use: use them all first.
    for name in otel_agent_profiler.__all__:
        getattr(otel_agent_profiler, name)
    public = {name for name in vars(otel_agent_profiler) if not name.startswith("_") and name != "annotations"}
    # Submodules show up as attributes once imported; they are not the public API.
    modules = {name for name in public if name in SUBMODULES}
    assert public - modules == set(otel_agent_profiler.__all__) - {"__version__"}


def test_every_exported_name_resolves() -> None:
    for name in otel_agent_profiler.__all__:
        assert getattr(otel_agent_profiler, name) is not None
    for name in otel_agent_profiler.core.__all__:
        assert getattr(otel_agent_profiler.core, name) is not None


def test_version_matches_package_metadata() -> None:
    from importlib.metadata import version

    assert otel_agent_profiler.__version__ == version("otel-agent-profiler")


def test_bad_input_errors_share_one_exported_base_and_stay_value_errors() -> None:
    from otel_agent_profiler.adapters.ids import normalize_id
    from otel_agent_profiler.adapters.otlp_json import kind_of
    from otel_agent_profiler.errors import BadIdError, SpanDataError

    for error in (SpanDataError, BadIdError):
        assert issubclass(error, otel_agent_profiler.AgentProfilerError)
        assert issubclass(error, ValueError)  # callers that catch ValueError keep working
    with pytest.raises(otel_agent_profiler.AgentProfilerError, match="unknown span kind"):
        kind_of(99)
    with pytest.raises(otel_agent_profiler.AgentProfilerError, match="is not a 16-digit hex id"):
        normalize_id("not an id", 8, "spanId")


def test_importing_the_package_does_not_load_the_sdk() -> None:
    # The command line never needs the SDK plugin; loading it costs every run a few hundred ms.
    code = "import sys, otel_agent_profiler.cli; print('opentelemetry.sdk.trace' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"

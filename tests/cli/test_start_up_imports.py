"""Each command imports only what it uses, so that start-up does not grow with the package's features.

Every invocation pays for what it imports: `--help` of any command and `analyze` of a small file
loaded about 390 modules (gRPC, protobuf, asyncio, the whole analysis for a help text) and took
about 250 ms over a bare `python -c pass`. These tests run the command line in a fresh interpreter
and name the modules it must not have loaded: heavy libraries that only some commands need, and
for `--help` the analysis itself. A new import at the top of a shared module fails them by name.
The parser builds only the options of the command being run; its help stays the full parser's.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from otel_agent_profiler.cli import _build_parser
from tests.support.paths import ROOT

SMALL_TRACE = ROOT / "examples" / "traces" / "research-agent.otlp.json"
COMMANDS = ("analyze", "export", "diff", "report", "serve")

#: Libraries no offline command reading a small OTLP JSON file needs: the data frames (only
#: `diff`, the summary JSON and `--prefix-cache`), `serve`'s servers and protobuf, the SDK (only the
#: in-process plugin), the store clients, Parquet, and worker processes (only for large inputs).
HEAVY_LIBRARIES = (
    "pandas",
    "numpy",
    "pyarrow",
    "grpc",
    "aiohttp",
    "asyncio",
    "google.protobuf",
    "opentelemetry",
    "requests",
    "urllib3",
    "prometheus_client",
    "multiprocessing",
    "concurrent.futures.process",
    "otel_agent_profiler.analytics",
    "otel_agent_profiler.service.app",
    "otel_agent_profiler.service.forwarder",
    "otel_agent_profiler.service.signals",
    "otel_agent_profiler.plugin.processor",
    "otel_agent_profiler.live.profiling",
    "otel_agent_profiler.stores.http",
)

#: What `--help` needs none of either: reading trace files, the analysis, the findings and the
#: reports (a help text names a few of their constants, which live in small modules of their own),
#: and the modules they start with (``dataclasses`` alone, with ``inspect``, took about 15 ms).
ANALYSIS = (
    "dataclasses",
    "inspect",
    "pathlib",
    "msgspec",
    "otel_agent_profiler.adapters.files",
    "otel_agent_profiler.core.analyze",
    "otel_agent_profiler.core.findings.all_findings",
    "otel_agent_profiler.core.profile",
    "otel_agent_profiler.offline.loading",
    "otel_agent_profiler.report.text",
    "otel_agent_profiler.report.cross_trace",
)

# Runs the command line as `otel-agent-profiler` does, then writes the names of the loaded modules.
_LOADED_MODULES = """
import sys
from otel_agent_profiler.cli import main
out = sys.argv.pop(1)
try:
    main(sys.argv[1:])
except SystemExit:
    pass
with open(out, "w", encoding="utf-8") as file:
    file.write("\\n".join(sorted(sys.modules)))
"""


def loaded_modules(tmp_path_factory: pytest.TempPathFactory, *arguments: str) -> set[str]:
    """The modules a fresh interpreter has loaded after running the command line with ``arguments``."""
    out = tmp_path_factory.mktemp("modules") / "loaded.txt"
    subprocess.run(
        [sys.executable, "-c", _LOADED_MODULES, str(out), *arguments],
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=60,
    )
    return set(out.read_text(encoding="utf-8").splitlines())


def forbidden_in(loaded: set[str], forbidden: tuple[str, ...]) -> list[str]:
    """The modules of ``forbidden`` (each name with its submodules) that were loaded."""
    return sorted(name for name in loaded if any(name == top or name.startswith(f"{top}.") for top in forbidden))


@pytest.mark.parametrize("command", [(), *((name,) for name in COMMANDS)], ids=["otel-agent-profiler", *COMMANDS])
def test_help_loads_no_heavy_library_and_not_the_analysis(
    command: tuple[str, ...], tmp_path_factory: pytest.TempPathFactory
) -> None:
    loaded = loaded_modules(tmp_path_factory, *command, "--help")
    assert "otel_agent_profiler.cli" in loaded  # the probe ran the command line
    assert forbidden_in(loaded, HEAVY_LIBRARIES + ANALYSIS) == []


@pytest.mark.parametrize("output", [(), ("--format", "json")], ids=["text", "json"])
def test_analyze_of_a_small_file_loads_no_heavy_library(
    output: tuple[str, ...], tmp_path_factory: pytest.TempPathFactory
) -> None:
    loaded = loaded_modules(tmp_path_factory, "analyze", *output, str(SMALL_TRACE))
    assert "otel_agent_profiler.core.analyze" in loaded  # it did analyse the file
    assert forbidden_in(loaded, HEAVY_LIBRARIES) == []


def test_the_check_names_a_forbidden_module_and_its_submodules_only() -> None:
    loaded = {"grpc", "grpc._cython", "grpcio_tools", "numpy.linalg", "json"}
    assert forbidden_in(loaded, ("grpc", "numpy")) == ["grpc", "grpc._cython", "numpy.linalg"]


def _subparser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    actions = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    return actions[0].choices[command]  # type: ignore[no-any-return]


@pytest.mark.parametrize("command", COMMANDS)
def test_the_parser_builds_the_named_command_only_and_its_help_is_the_full_parsers(command: str) -> None:
    full = _build_parser()
    lean = _build_parser([command, "--help"])
    assert lean.format_help() == full.format_help()
    assert _subparser(lean, command).format_help() == _subparser(full, command).format_help()
    others = [name for name in COMMANDS if name != command]
    # The other commands have only argparse's own --help.
    assert all(len(_subparser(lean, name)._actions) == 1 for name in others)
    assert len(_subparser(full, command)._actions) > 1


def test_without_a_command_no_command_gets_its_options() -> None:
    lean = _build_parser(["--help"])
    assert lean.format_help() == _build_parser().format_help()
    assert all(len(_subparser(lean, name)._actions) == 1 for name in COMMANDS)


def test_serves_copies_of_the_upstream_connections_names_are_equal_to_them() -> None:
    # Copied so that `serve --help` does not load the upstream connection's module.
    from otel_agent_profiler.cli import serve
    from otel_agent_profiler.service import upstream_connection

    copied = ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_COMPRESSION", "COMPRESSIONS")
    copied += (
        "OTEL_EXPORTER_OTLP_CERTIFICATE",
        "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
        "OTEL_EXPORTER_OTLP_CLIENT_KEY",
    )
    for name in copied:
        assert getattr(serve, name) == getattr(upstream_connection, name), name

"""scripts/demo, scripts/test and scripts/jaeger say in one line what is missing, as README's table of
prerequisites promises.

Each case runs the real script (or the real helper it sources) where the prerequisite is missing: a
copy of scripts/ in a folder with no .venv, a ``python3`` that is too old or has no venv module, a
``go`` that is too old, a non-root user without sudo or apt-get. The stand-ins are small shell
scripts on PATH that answer what the scripts ask of the real programs.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from tests.support.backends import free_ports
from tests.support.paths import ROOT


def _stand_in(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    path.chmod(0o755)
    return path


def _checkout_without_venv(tmp_path: Path) -> Path:
    """A copy of scripts/ beside no .venv: the scripts must make one, and first check the Python."""
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT / "scripts", checkout / "scripts")
    return checkout


def _run(command: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=60)


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), lines[0]
    return lines[0]


# A python3 that answers the version questions as Python 3.9 would, and fails anything else.
OLD_PYTHON = """case "$2" in
  *'< (3, 10)'*) exit 1 ;;
  *version_info*) echo 3.9 ;;
  *) exit 1 ;;
esac"""
# A Python 3.11 without venv's ensurepip, as Debian ships it without python3-venv.
PYTHON_WITHOUT_VENV = """case "$2" in
  *'< (3, 10)'*) exit 0 ;;
  *ensurepip*) echo "ModuleNotFoundError: No module named 'ensurepip'" >&2; exit 1 ;;
  *) exit 0 ;;
esac"""


@pytest.mark.parametrize("script", ["demo", "test"])
@pytest.mark.parametrize(
    ("python", "expected"),
    [
        pytest.param(OLD_PYTHON, "needs Python 3.10 or newer; {python} is 3.9", id="python-3.9"),
        pytest.param(
            PYTHON_WITHOUT_VENV, "needs Python's venv module with ensurepip, which {python} lacks", id="no-venv"
        ),
    ],
)
def test_the_scripts_stop_with_one_line_when_python_cannot_make_the_venv(
    script: str, python: str, expected: str, tmp_path: Path
) -> None:
    checkout = _checkout_without_venv(tmp_path)
    fake = _stand_in(tmp_path, "python3", python)
    env = {**os.environ, "PYTHON": str(fake)}
    line = _one_error_line(_run([str(checkout / "scripts" / script)], env, checkout))
    assert line.startswith(f"error: scripts/{script} ")
    assert expected.format(python=fake) in line
    assert not (checkout / ".venv").exists()


def test_the_scripts_say_when_there_is_no_python_at_all(tmp_path: Path) -> None:
    checkout = _checkout_without_venv(tmp_path)
    env = {**os.environ, "PYTHON": "python3.0-nowhere"}
    line = _one_error_line(_run([str(checkout / "scripts" / "demo")], env, checkout))
    assert "python3.0-nowhere is not on PATH" in line


def _source_backends(call: str, path: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    # bash itself from where it is, and only the stand-ins besides: the real id, sudo, apt-get and go
    # are out of reach.
    script = f"ROOT={ROOT}; VENV={ROOT}/.venv; source {ROOT}/scripts/_backends.sh; {call}"
    env = {"PATH": str(path), "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    return _run([shutil.which("bash") or "/bin/bash", "-c", script], env, tmp_path)


def _bin_with(tmp_path: Path, **programs: str) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for name in ("dirname", "basename", "cat", "sha256sum", "cut", "mkdir", "rm", "tail"):
        found = shutil.which(name)
        if found:
            (folder / name).symlink_to(found)
    for name, body in programs.items():
        _stand_in(folder, name, body)
    return folder


def test_installing_a_debian_package_needs_root_or_sudo(tmp_path: Path) -> None:
    folder = _bin_with(tmp_path, id="echo 1000", **{"apt-get": "exit 0"})
    line = _one_error_line(_source_backends("_need_apt chromium why", folder, tmp_path))
    assert line == "error: scripts/test needs root (or sudo) to install chromium with apt-get (why)"


def test_installing_a_debian_package_needs_apt_get(tmp_path: Path) -> None:
    folder = _bin_with(tmp_path, id="echo 0")
    line = _one_error_line(_source_backends("_need_apt chromium why", folder, tmp_path))
    assert line.startswith("error: scripts/test installs chromium with Debian's apt-get, which this system lacks")


@pytest.mark.parametrize(
    ("go", "expected"),
    [
        pytest.param(None, "error: building Jaeger needs Go 1.26 on PATH (go not found)", id="no-go"),
        pytest.param(
            "echo go1.22.4", "error: building Jaeger needs Go 1.26 or newer; go on PATH is go1.22.4", id="go-1.22"
        ),
    ],
)
def test_building_the_go_backends_says_what_go_is_missing(go: str | None, expected: str, tmp_path: Path) -> None:
    folder = _bin_with(tmp_path, **({"go": go} if go else {}))
    line = _one_error_line(_source_backends("_require_go Jaeger", folder, tmp_path))
    assert line == expected


def test_a_go_new_enough_passes(tmp_path: Path) -> None:
    folder = _bin_with(tmp_path, go="echo go1.26.8")
    result = _source_backends("_require_go Jaeger", folder, tmp_path)
    assert result.returncode == 0 and result.stderr == ""


# scripts/jaeger: its checks come before the Go builds, so a reader learns at once what is wrong.
JAEGER_SCRIPT = ROOT / "scripts" / "jaeger"
JAEGER_PORT_VARIABLES = (
    "OTELCOL_GRPC_PORT",
    "OTELCOL_HTTP_PORT",
    "JAEGER_QUERY_PORT",
    "JAEGER_QUERY_GRPC_PORT",
    "JAEGER_OTLP_PORT",
    "OTELCOL_HEALTH_PORT",
    "OTELCOL_METRICS_PORT",
)


def _free_port_env(tmp_path: Path) -> dict[str, str]:
    """Free ports for every port scripts/jaeger uses, and its run folder in tmp_path."""
    ports = free_ports(len(JAEGER_PORT_VARIABLES))
    env = {k: v for k, v in os.environ.items() if k not in JAEGER_PORT_VARIABLES}
    return (
        env
        | {name: str(port) for name, port in zip(JAEGER_PORT_VARIABLES, ports, strict=True)}
        | {"TMPDIR": str(tmp_path)}
    )


def test_jaeger_help_names_an_option_and_a_variable_for_every_port_and_both_work(tmp_path: Path) -> None:
    result = _run([str(JAEGER_SCRIPT), "--help"], dict(os.environ), tmp_path)
    assert result.returncode == 0, result.stderr
    rows = re.findall(r"^  (--[a-z-]+-port) N +([A-Z_]+) +.*\(default (\d+)\)$", result.stdout, re.M)
    assert sorted(variable for _, variable, _ in rows) == sorted(JAEGER_PORT_VARIABLES)
    defaults = {variable: default for _, variable, default in rows}
    assert (defaults["OTELCOL_GRPC_PORT"], defaults["OTELCOL_HTTP_PORT"], defaults["JAEGER_QUERY_PORT"]) == (
        "4317",
        "4318",
        "16686",
    )
    # Each option and each variable reaches the port it names: a value that is no port is refused, naming it.
    for option, variable, _ in rows:
        by_option = _one_error_line(_run([str(JAEGER_SCRIPT), option, "x"], _free_port_env(tmp_path), tmp_path))
        by_variable = _one_error_line(
            _run([str(JAEGER_SCRIPT)], _free_port_env(tmp_path) | {variable: "70000"}, tmp_path)
        )
        assert f"({variable}): x is not a port number" in by_option
        assert f"({variable}): 70000 is not a port number" in by_variable


def test_jaeger_says_in_one_line_which_port_is_taken(tmp_path: Path) -> None:
    env = _free_port_env(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _run([str(JAEGER_SCRIPT), f"--jaeger-port={port}"], env, tmp_path)
    assert result.returncode == 1
    assert _one_error_line(result) == (
        f"error: scripts/jaeger: port {port} (127.0.0.1, for Jaeger's query API (HTTP)) is in use; free it or"
        " choose another with JAEGER_QUERY_PORT=N or the option in scripts/jaeger --help"
    )


def test_jaeger_refuses_an_unknown_option_and_one_port_given_twice(tmp_path: Path) -> None:
    unknown = _run([str(JAEGER_SCRIPT), "--port", "4317"], _free_port_env(tmp_path), tmp_path)
    assert unknown.returncode == 2
    assert _one_error_line(unknown) == "error: scripts/jaeger: unknown option --port (see scripts/jaeger --help)"
    env = _free_port_env(tmp_path)
    twice = _one_error_line(_run([str(JAEGER_SCRIPT), "--otlp-http-port", env["OTELCOL_GRPC_PORT"]], env, tmp_path))
    assert "is given both to the collector's OTLP/gRPC receiver and to the collector's OTLP/HTTP receiver" in twice


def test_jaeger_without_go_and_nothing_built_says_so_in_one_line(tmp_path: Path) -> None:
    # An empty cache of built backends and no go on PATH: the builds cannot start.
    folder = _bin_with(tmp_path)
    env = _free_port_env(tmp_path) | {
        "PATH": str(folder),
        "HOME": str(tmp_path),
        "OTEL_AGENT_PROFILER_BACKENDS_CACHE": str(tmp_path / "cache"),
    }
    bash = shutil.which("bash") or "/bin/bash"
    line = _one_error_line(_run([bash, str(JAEGER_SCRIPT)], env, tmp_path))
    assert line == "error: building Jaeger v1.76.0 needs Go 1.26 on PATH (go not found)"

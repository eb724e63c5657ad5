"""scripts/_venv_cache.sh: the test environments other than .venv live in a cache outside the checkout.

A second checkout reuses an environment the first made and re-points its editable install; a changed pins
file makes a new environment and removes the old one unless a run is using it; an environment made inside
the checkout before the cache existed gives way to a link. The installs are real (pip, from its cache), of
a stand-in package in place of this one, through scripts/_frameworks.sh's own function: the real
environments' packages would take minutes.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.paths import ROOT

# A package with what the scripts and the tests of the real environments look at: a console script of the
# name a framework environment must have, and an entry point (zero-code finds the plugin through one).
STANDIN_PYPROJECT = """\
[build-system]
requires = ["hatchling>=1.25"]
build-backend = "hatchling.build"

[project]
name = "standin"
version = "0.1.0"

[project.scripts]
opentelemetry-instrument = "standin:main"

[project.entry-points.opentelemetry_configurator]
standin = "standin:Configurator"

[tool.ruff]
line-length = 120
"""
# Where the stand-in is imported from, and the entry points of its group.
SHOW = (
    "import importlib.metadata as m, standin; "
    "print(standin.__file__); "
    "print(sorted(e.name for e in m.entry_points(group='opentelemetry_configurator')))"
)


def _checkout(parent: Path, name: str) -> Path:
    checkout = parent / name
    shutil.copytree(ROOT / "scripts", checkout / "scripts")
    (checkout / "pyproject.toml").write_text(STANDIN_PYPROJECT, encoding="utf-8")
    (checkout / "constraints.txt").write_text("# nothing pinned\n", encoding="utf-8")
    (checkout / "pins.txt").write_text("# nothing pinned\n", encoding="utf-8")
    (checkout / "standin").mkdir()
    (checkout / "standin" / "__init__.py").write_text("def main(): ...\n\n\nclass Configurator: ...\n")
    return checkout


def _bash(checkout: Path, cache: Path, commands: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"OTEL_AGENT_PROFILER_VENV_CACHE": str(cache)}
    return subprocess.run(
        ["bash", "-c", f"source scripts/_venv.sh; {commands}"],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _ensure_frameworks_venv(checkout: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    result = _bash(
        checkout, cache, 'source scripts/_frameworks.sh; _ensure_framework_venv frameworks "$ROOT/pins.txt" project'
    )
    assert result.returncode == 0, result.stderr
    return result


def _entries(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir() if p.is_dir())


def _imported_from(checkout: Path) -> tuple[str, str]:
    python = checkout / ".venv-frameworks" / "bin" / "python"
    shown = subprocess.run([str(python), "-c", SHOW], cwd="/", capture_output=True, text=True, timeout=60, check=True)
    module, entry_points = shown.stdout.splitlines()
    return module, entry_points


@pytest.mark.e2e
def test_a_second_checkout_reuses_the_environment_and_a_changed_pins_file_makes_a_new_one(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first, second = _checkout(tmp_path, "first"), _checkout(tmp_path, "second")

    made = _ensure_frameworks_venv(first, cache)
    assert "installing pins.txt" in made.stderr
    [entry] = _entries(cache)
    assert (first / ".venv-frameworks").resolve() == cache / entry
    assert _imported_from(first) == (str(first / "standin" / "__init__.py"), "['standin']")

    # The second checkout: the same environment, pointed at it (without pip: the record of the install
    # stays as it was), its entry points registered.
    (record,) = (cache / entry).glob("lib/python*/site-packages/standin-*.dist-info/RECORD")
    installed_at = record.stat().st_mtime_ns
    reused = _ensure_frameworks_venv(second, cache)
    assert "installing" not in reused.stderr
    assert f"pointing {entry} at this checkout" in reused.stderr
    assert _entries(cache) == [entry]
    assert (second / ".venv-frameworks").resolve() == cache / entry
    assert _imported_from(second) == (str(second / "standin" / "__init__.py"), "['standin']")
    assert record.stat().st_mtime_ns == installed_at
    # and a run that changes nothing says nothing
    assert _ensure_frameworks_venv(second, cache).stderr == ""

    # An install that does not name the checkout the stamp says (changed by hand): pip re-points it.
    (cache / entry / ".checkout").write_text("/elsewhere\n", encoding="utf-8")
    assert f"pointing {entry} at this checkout" in _ensure_frameworks_venv(first, cache).stderr
    assert _imported_from(first) == (str(first / "standin" / "__init__.py"), "['standin']")

    # A changed pins file: a new environment; the old one goes.
    with (second / "pins.txt").open("a", encoding="utf-8") as pins:
        pins.write("# changed\n")
    remade = _ensure_frameworks_venv(second, cache)
    assert "installing pins.txt" in remade.stderr
    [new_entry] = _entries(cache)
    assert new_entry != entry and new_entry.startswith("frameworks-")
    assert (second / ".venv-frameworks").resolve() == cache / new_entry

    # Settings of the tools in pyproject.toml are no part of what an install follows.
    with (second / "pyproject.toml").open("a", encoding="utf-8") as pyproject:
        pyproject.write("target-version = 'py310'\n")
    assert _ensure_frameworks_venv(second, cache).stderr == ""
    assert _entries(cache) == [new_entry]


def test_older_entries_of_the_name_go_unless_a_run_uses_them(tmp_path: Path) -> None:
    cache, checkout = tmp_path / "cache", _checkout(tmp_path, "checkout")
    old, in_use = cache / "frameworks-aaaaaaaaaaaa", cache / "frameworks-bbbbbbbbbbbb"
    other_name = cache / "frameworks-openai2-cccccccccccc"
    for entry in (old, in_use, other_name):
        entry.mkdir(parents=True)
    # another run's shared lock on one of them, as scripts/test holds it for as long as the tests run
    with (cache / f"{in_use.name}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_SH)
        result = _bash(checkout, cache, "use_cached_venv frameworks key; cached_venv_installed frameworks")
    assert result.returncode == 0, result.stderr
    made = (checkout / ".venv-frameworks").resolve()
    assert sorted(_entries(cache)) == sorted([made.name, in_use.name, other_name.name])


def test_an_environment_made_in_the_checkout_gives_way_to_a_link(tmp_path: Path) -> None:
    cache, checkout = tmp_path / "cache", _checkout(tmp_path, "checkout")
    (checkout / ".venv-bare" / "bin").mkdir(parents=True)
    result = _bash(checkout, cache, "use_cached_venv bare key")
    assert result.returncode == 0, result.stderr
    link = checkout / ".venv-bare"
    assert link.is_symlink() and link.resolve().parent == cache
    assert result.stderr == f"==> replacing .venv-bare in the checkout by a link to {link.resolve()}\n"


def test_a_cache_that_cannot_be_made_is_one_line(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path, "checkout")
    (tmp_path / "file").write_text("")
    result = _bash(checkout, tmp_path / "file" / "cache", "use_cached_venv bare key")
    assert result.returncode != 0
    assert result.stderr.splitlines() == [
        f"error: cannot make the environment cache {tmp_path / 'file' / 'cache'}"
        " (set OTEL_AGENT_PROFILER_VENV_CACHE to a writable folder)"
    ]

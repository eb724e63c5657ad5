# Shared by the scripts (sourced by _venv.sh): the test environments other than .venv live in a cache
# outside the checkout, so that a fresh clone (CI clones afresh every run) finds them made.
#
# Each environment is $VENV_CACHE/<name>-<hash>, where <hash> covers what its install follows (the key
# its caller passes: pins files, constraints, the packaging part of pyproject.toml) and the Python it is
# made with; $ROOT/.venv-<name> is a link to it, so the paths the tests and the docs name keep working.
# When an environment is made anew, the other entries of the same name are removed (unless a run is
# using them), so the cache holds one generation of each.
#
# Environments that hold this package editable point at one checkout; `.checkout` in the entry says
# which. Another checkout re-points it (see _repoint_editable); its entry points stay registered
# (zero-code `opentelemetry-instrument` finds the plugin through them).
#
# Two runs sharing an entry: each holds a shared lock on it for as long as it runs (the lock's file
# descriptor stays open through scripts/test's `exec pytest`); installing or re-pointing takes it
# exclusively, so it waits until no run of another checkout is using the entry.
set -euo pipefail

VENV_CACHE="${OTEL_AGENT_PROFILER_VENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/otel-agent-profiler/venvs}"

# The packaging part of pyproject.toml: what an install of this package follows (its dependencies,
# extras, entry points, build settings), not the tools' settings, which change more often.
pyproject_packaging() {
    awk '/^\[/ { keep = /^\[(build-system|project|tool\.hatch)/ } keep' "$ROOT/pyproject.toml"
}

_python_identity() { # the interpreter's version and real path: an environment is made from one
    if [ -z "${_VENV_CACHE_PYTHON_IDENTITY:-}" ]; then
        check_python
        _VENV_CACHE_PYTHON_IDENTITY="$("$PYTHON" -c 'import os, sys; print(sys.version, os.path.realpath(sys.executable))')"
    fi
    echo "$_VENV_CACHE_PYTHON_IDENTITY"
}

_lock() { # fd mode(-s|-x) what: take the lock, saying so when another run holds it
    local fd="$1" mode="$2" what="$3"
    command -v flock >/dev/null 2>&1 || return 0
    if ! flock -n "$mode" "$fd"; then
        echo "==> waiting for another run of the tests that uses $what" >&2
        flock "$mode" "$fd"
    fi
}

# use_cached_venv NAME KEY: link $ROOT/.venv-NAME to the cache entry for KEY (made empty when new) and
# hold the entry's lock shared. Sets CACHED_VENV (the entry) and CACHED_VENV_LOCK (the lock's fd).
use_cached_venv() {
    local name="$1" key="$2" link="$ROOT/.venv-$1" hash entry
    hash="$(printf '%s\n%s\n' "$key" "$(_python_identity)" | sha256sum | cut -c1-12)"
    entry="$VENV_CACHE/$name-$hash"
    mkdir -p "$entry" 2>/dev/null || {
        echo "error: cannot make the environment cache $VENV_CACHE (set OTEL_AGENT_PROFILER_VENV_CACHE to a writable folder)" >&2
        return 1
    }
    exec {CACHED_VENV_LOCK}>>"$entry.lock"
    _lock "$CACHED_VENV_LOCK" -s "$entry"
    if [ -d "$link" ] && [ ! -L "$link" ]; then
        # made inside the checkout before the cache existed
        echo "==> replacing .venv-$name in the checkout by a link to $entry" >&2
        rm -rf "$link"
    fi
    if [ "$(readlink "$link" 2>/dev/null)" != "$entry" ]; then
        ln -sfn "$entry" "$link"
    fi
    CACHED_VENV="$entry"
}

# Before installing into CACHED_VENV: no other run may be using it meanwhile.
cached_venv_exclusive() {
    _lock "$CACHED_VENV_LOCK" -x "$CACHED_VENV"
}

# After installing into CACHED_VENV: record the checkout its editable install points at (if any),
# remove older entries of the same name, and go back to sharing the entry.
cached_venv_installed() {
    local name="$1" editable="${2:-}" entry other fd
    entry="$CACHED_VENV"
    if [ "$editable" = editable ]; then
        echo "$ROOT" >"$entry/.checkout"
    fi
    for other in "$VENV_CACHE/$name"-*; do
        [[ "$other" =~ /$name-[0-9a-f]{12}$ ]] && [ "$other" != "$entry" ] && [ -d "$other" ] || continue
        exec {fd}>>"$other.lock"
        if ! command -v flock >/dev/null 2>&1 || flock -n -x "$fd"; then
            rm -rf "$other" "$other.lock"
        fi
        exec {fd}>&-
    done
    _lock "$CACHED_VENV_LOCK" -s "$entry"
}

# For an environment installed with this package editable: make it point at this checkout.
cached_venv_point_here() {
    local entry="$CACHED_VENV" previous
    [ "$(cat "$entry/.checkout" 2>/dev/null)" = "$ROOT" ] && return 0
    cached_venv_exclusive
    previous="$(cat "$entry/.checkout" 2>/dev/null || true)"
    if [ "$previous" != "$ROOT" ]; then
        echo "==> pointing $(basename "$entry") at this checkout" >&2
        if [ -z "$previous" ] || ! _repoint_editable "$entry" "$previous"; then
            "$entry/bin/python" -m pip install --quiet --no-deps -e "$ROOT" >&2
        fi
        echo "$ROOT" >"$entry/.checkout"
    fi
    _lock "$CACHED_VENV_LOCK" -s "$entry"
}

# The editable install names the checkout in two places only: the .pth file that puts it on sys.path
# (hatchling's editable wheel) and the URL pip recorded (direct_url.json). Everything else it installed
# (metadata, entry points, console scripts) follows the packaging part of pyproject.toml, which the
# entry's key covers, so rewriting the two re-points it in milliseconds where `pip install -e` takes
# seconds. Fails (and pip does it) unless each is found exactly once, naming the previous checkout, and
# the environment's Python then has this checkout on sys.path.
_repoint_editable() {
    local entry="$1" previous="$2"
    "$entry/bin/python" - "$previous" "$ROOT" <<'PY' || return 1
import json
import sys
import sysconfig
from pathlib import Path

previous, checkout = sys.argv[1], sys.argv[2]
site = Path(sysconfig.get_paths()["purelib"])
pths = [p for p in site.glob("*.pth") if p.read_text(encoding="utf-8").strip() == previous]
urls = [
    p
    for p in site.glob("*.dist-info/direct_url.json")
    if json.loads(p.read_text(encoding="utf-8")).get("url") == Path(previous).as_uri()
]
if len(pths) != 1 or len(urls) != 1:
    sys.exit(1)
pths[0].write_text(checkout, encoding="utf-8")
recorded = json.loads(urls[0].read_text(encoding="utf-8"))
recorded["url"] = Path(checkout).as_uri()
urls[0].write_text(json.dumps(recorded), encoding="utf-8")
PY
    (cd / && env -u PYTHONPATH "$entry/bin/python" -c 'import sys; sys.exit(sys.argv[1] not in sys.path)' "$ROOT")
}

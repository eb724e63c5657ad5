# Shared by the scripts: create .venv and install the project with pinned dependencies.
# `ensure_venv` installs it with the `dev` and `docs` extras (everything the tests, the benchmarks
# and the documentation build use);
# `ensure_venv demo` only with the `demo` extra, which is all scripts/demo needs: a first demo
# then installs a fraction of the packages. A later `ensure_venv` adds the `dev` and `docs` extras
# to the same .venv (`dev` holds everything `demo` does). Reinstalls only when pyproject.toml or
# constraints.txt changed since the last install, or an extra not installed yet is asked for.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PYTHON="${PYTHON:-python3}"

# The one thing every script needs first: a Python 3.10 or newer that can make virtual environments
# (Debian and Ubuntu ship venv's ensurepip in a package of its own). One line when it is missing,
# instead of a traceback halfway through.
check_python() {
    local script="scripts/$(basename "$0")"
    if ! command -v "$PYTHON" >/dev/null 2>&1; then
        echo "error: $script needs Python 3.10 or newer, and $PYTHON is not on PATH (set PYTHON=/path/to/python3)" >&2
        return 1
    fi
    if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' >/dev/null 2>&1; then
        local version
        version="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo "unknown")"
        echo "error: $script needs Python 3.10 or newer; $PYTHON is $version (set PYTHON=/path/to/python3.10 or newer)" >&2
        return 1
    fi
    if ! "$PYTHON" -c 'import venv, ensurepip' >/dev/null 2>&1; then
        echo "error: $script needs Python's venv module with ensurepip, which $PYTHON lacks (Debian and Ubuntu: apt-get install python3-venv)" >&2
        return 1
    fi
}

ensure_venv() {
    local extra="${1:-dev,docs}"
    if [ ! -x "$VENV/bin/python" ]; then
        check_python
        echo "==> creating virtual environment in .venv" >&2
        "$PYTHON" -m venv "$VENV"
    fi
    # The stamp holds the hash of the files the install followed and the extra it installed.
    local stamp="$VENV/.installed" want installed=""
    want="$(cat "$ROOT/pyproject.toml" "$ROOT/constraints.txt" | sha256sum | cut -d' ' -f1)"
    [ -f "$stamp" ] && installed="$(cat "$stamp")"
    # A stamp of the hash alone was written before the extra was recorded, always for `dev`.
    [ "$installed" = "$want" ] && installed="$want dev"
    # What is installed covers what is asked: the same extras, or `demo` (which `dev` holds).
    if [ "$installed" = "$want $extra" ] || { [ "$extra" = demo ] && [[ "$installed" == "$want dev"* ]]; }; then
        return
    fi
    echo "==> installing otel-agent-profiler and its dependencies (extras: $extra) into .venv" >&2
    "$VENV/bin/python" -m pip install --quiet --upgrade pip >&2
    "$VENV/bin/python" -m pip install --quiet -c "$ROOT/constraints.txt" -e "$ROOT[$extra]" >&2
    echo "$want $extra" > "$stamp"
}

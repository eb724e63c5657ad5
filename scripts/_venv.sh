# Shared by the scripts: create .venv and install the project with pinned dependencies.
# Reinstalls only when pyproject.toml or constraints.txt changed since the last install.
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
    if [ ! -x "$VENV/bin/python" ]; then
        check_python
        echo "==> creating virtual environment in .venv" >&2
        "$PYTHON" -m venv "$VENV"
    fi
    local stamp="$VENV/.installed" want
    want="$(cat "$ROOT/pyproject.toml" "$ROOT/constraints.txt" | sha256sum | cut -d' ' -f1)"
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
        echo "==> installing otel-agent-profiler and its dependencies into .venv" >&2
        "$VENV/bin/python" -m pip install --quiet --upgrade pip >&2
        "$VENV/bin/python" -m pip install --quiet -c "$ROOT/constraints.txt" -e "$ROOT[dev,docs]" >&2
        echo "$want" > "$stamp"
    fi
}

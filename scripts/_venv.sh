# Shared by the scripts: create .venv and install the project with pinned dependencies.
# Reinstalls only when pyproject.toml or constraints.txt changed since the last install.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PYTHON="${PYTHON:-python3}"

ensure_venv() {
    if [ ! -x "$VENV/bin/python" ]; then
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

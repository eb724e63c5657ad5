# Shared by the scripts: create .venv and install the project with pinned dependencies.
# `ensure_venv` installs it with the `dev` extra (everything the tests and benchmarks use);
# `ensure_venv demo` only with the `demo` extra, which is all scripts/demo needs: a first demo
# then installs a fraction of the packages. A later `ensure_venv` adds the `dev` extra to the
# same .venv (`dev` holds everything `demo` does). Reinstalls only when pyproject.toml or
# constraints.txt changed since the last install, or an extra not installed yet is asked for.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PYTHON="${PYTHON:-python3}"

ensure_venv() {
    local extra="${1:-dev}"
    if [ ! -x "$VENV/bin/python" ]; then
        echo "==> creating virtual environment in .venv" >&2
        "$PYTHON" -m venv "$VENV"
    fi
    # The stamp holds the hash of the files the install followed and the extra it installed.
    local stamp="$VENV/.installed" want installed=""
    want="$(cat "$ROOT/pyproject.toml" "$ROOT/constraints.txt" | sha256sum | cut -d' ' -f1)"
    [ -f "$stamp" ] && installed="$(cat "$stamp")"
    # A stamp of the hash alone was written before the extra was recorded, always for `dev`.
    if [ "$installed" = "$want" ] || [ "$installed" = "$want dev" ] || [ "$installed" = "$want $extra" ]; then
        return
    fi
    echo "==> installing otel-agent-profiler and its dependencies ($extra extra) into .venv" >&2
    "$VENV/bin/python" -m pip install --quiet --upgrade pip >&2
    "$VENV/bin/python" -m pip install --quiet -c "$ROOT/constraints.txt" -e "$ROOT[$extra]" >&2
    echo "$want $extra" > "$stamp"
}

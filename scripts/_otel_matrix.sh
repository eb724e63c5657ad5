# Shared by the scripts: the virtual environments of the OpenTelemetry version matrix
# (tests/project/test_otel_matrix.py). Source after _venv.sh (needs ROOT and PYTHON) and call
# `ensure_otel_matrix`.
#
# pyproject.toml accepts every OpenTelemetry release from its lower bounds to the next major, so the
# plugin's tests also run against both ends of that range, each set pinned exactly:
#
#   - .venv-otel-lowest:  constraints-otel-lowest.txt (the oldest supported SDK and instrumentation)
#   - .venv-otel-highest: constraints-otel-highest.txt (the newest releases)
#
# Each holds otel-agent-profiler (editable, from this checkout, without extras), that set, the other
# pins of constraints.txt, and only the test tools the plugin's tests use. An environment is
# reinstalled only when its constraints file, constraints.txt or pyproject.toml changed.
set -euo pipefail

OTEL_MATRIX_SETS=(lowest highest)
# pytest and hypothesis as in pyproject's dev extras; pydantic because pyproject's warning filters
# name one of its warnings (pytest refuses to start when a filter's module cannot be imported).
OTEL_MATRIX_TEST_TOOLS=("pytest>=8" "hypothesis>=6.100" "pydantic>=2")

_ensure_otel_venv() {
    local name="$1"
    local venv="$ROOT/.venv-otel-$name" pins="$ROOT/constraints-otel-$name.txt"
    local stamp="$venv/.installed" want constraints
    want="$(printf '%s\n' "${OTEL_MATRIX_TEST_TOOLS[@]}" |
        cat - "$pins" "$ROOT/constraints.txt" "$ROOT/pyproject.toml" | sha256sum | cut -d' ' -f1)"
    if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        return 0
    fi
    local started=$SECONDS
    if [ ! -x "$venv/bin/python" ]; then
        echo "==> creating virtual environment in $(basename "$venv") (OpenTelemetry matrix)" >&2
        "$PYTHON" -m venv "$venv"
    fi
    # This set's OpenTelemetry pins in place of constraints.txt's; its other pins stay.
    constraints="$venv/constraints.txt"
    { grep -v '^opentelemetry-' "$ROOT/constraints.txt"; grep -v '^#' "$pins"; } > "$constraints"
    echo "==> installing otel-agent-profiler with $(basename "$pins") into $(basename "$venv")" >&2
    "$venv/bin/python" -m pip install --quiet --upgrade pip >&2
    "$venv/bin/python" -m pip install --quiet -c "$constraints" -e "$ROOT" "${OTEL_MATRIX_TEST_TOOLS[@]}" >&2
    "$venv/bin/python" -m pip check >&2
    echo "==> $(basename "$venv") installed in $((SECONDS - started)) s" >&2
    echo "$want" > "$stamp"
}

ensure_otel_matrix() {
    local name
    for name in "${OTEL_MATRIX_SETS[@]}"; do
        _ensure_otel_venv "$name"
    done
}

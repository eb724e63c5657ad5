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
# pins of constraints.txt, and only the test tools the plugin's tests use. Each is a link to the
# environment cache (scripts/_venv_cache.sh), made anew only when its constraints file, constraints.txt
# or the packaging part of pyproject.toml changed, and re-pointed at this checkout.
set -euo pipefail

OTEL_MATRIX_SETS=(lowest highest)
# pytest and hypothesis as in pyproject's dev extras; pydantic because pyproject's warning filters
# name one of its warnings (pytest refuses to start when a filter's module cannot be imported).
OTEL_MATRIX_TEST_TOOLS=("pytest>=8" "hypothesis>=6.100" "pydantic>=2")

_ensure_otel_venv() {
    local name="$1"
    local pins="$ROOT/constraints-otel-$name.txt"
    local want constraints
    want="$(printf '%s\n' "${OTEL_MATRIX_TEST_TOOLS[@]}" |
        cat - "$pins" "$ROOT/constraints.txt" <(pyproject_packaging) | sha256sum | cut -d' ' -f1)"
    use_cached_venv "otel-$name" "$want"
    local venv="$CACHED_VENV"
    local stamp="$venv/.installed"
    if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        cached_venv_point_here
        return 0
    fi
    cached_venv_exclusive
    local started=$SECONDS
    if [ ! -x "$venv/bin/python" ]; then
        echo "==> creating virtual environment .venv-otel-$name (OpenTelemetry matrix) in $venv" >&2
        "$PYTHON" -m venv "$venv"
    fi
    # This set's OpenTelemetry pins in place of constraints.txt's; its other pins stay.
    constraints="$venv/constraints.txt"
    { grep -v '^opentelemetry-' "$ROOT/constraints.txt"; grep -v '^#' "$pins"; } > "$constraints"
    echo "==> installing otel-agent-profiler with $(basename "$pins") into .venv-otel-$name" >&2
    "$venv/bin/python" -m pip install --quiet --upgrade pip >&2
    "$venv/bin/python" -m pip install --quiet -c "$constraints" -e "$ROOT" "${OTEL_MATRIX_TEST_TOOLS[@]}" >&2
    "$venv/bin/python" -m pip check >&2
    echo "==> .venv-otel-$name installed in $((SECONDS - started)) s" >&2
    echo "$want" > "$stamp"
    cached_venv_installed "otel-$name" editable
}

ensure_otel_matrix() {
    local name
    for name in "${OTEL_MATRIX_SETS[@]}"; do
        _ensure_otel_venv "$name"
    done
}

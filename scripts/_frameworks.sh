# Shared by the scripts: the agent frameworks' virtual environments for the conformance suite
# (tests/conformance/). Source after _venv.sh (needs ROOT and PYTHON) and call `ensure_frameworks`.
#
# The frameworks are grouped into as few environments as resolve together, each with
# otel-agent-profiler (editable, from this checkout) and the project's OpenTelemetry pins (constraints.txt):
#
#   - .venv-frameworks: pydantic-ai, the OpenAI Agents SDK, LangChain/LangGraph, smolagents and the
#     OpenInference instrumentations of them and of the OpenAI client (tests/conformance/pins-frameworks.txt);
#     openai as pinned in constraints.txt.
#   - .venv-frameworks-openai2: LlamaIndex and opentelemetry-instrumentation-openai-v2
#     (tests/conformance/pins-openai2.txt). llama-index-llms-openai needs openai<3, so constraints.txt's openai
#     pin is left out here and the pins file names an openai 2 release.
#   - .venv-frameworks-autogen-haystack-dspy: AutoGen (agentchat, with its own OpenTelemetry tracing), Haystack
#     (with its OpenTelemetry tracer), DSPy on LiteLLM, and the OpenInference instrumentations of DSPy, LiteLLM
#     and the OpenAI client (tests/conformance/pins-autogen-haystack-dspy.txt). Apart from .venv-frameworks
#     so that the two groups' pins can move independently and zero-code loads fewer instrumentors per app.
#   - .venv-frameworks-crewai: CrewAI and the OpenInference instrumentations of it and of the OpenAI client
#     (tests/conformance/pins-crewai.txt). crewai needs openai<3, like LlamaIndex, so constraints.txt's openai
#     pin is left out and the pins file names an openai 2 release.
#
# The Traceloop instrumentation is tested in .venv itself (it is one of our dependencies).
# An environment is reinstalled only when its pins file, constraints.txt or pyproject.toml changed.
set -euo pipefail

FRAMEWORK_PINS_DIR="$ROOT/tests/conformance"

_ensure_framework_venv() {
    local venv="$1" pins="$2" drop_openai_pin="$3"
    local stamp="$venv/.installed" want constraints
    want="$(cat "$pins" "$ROOT/constraints.txt" "$ROOT/pyproject.toml" | sha256sum | cut -d' ' -f1)"
    if [ -x "$venv/bin/opentelemetry-instrument" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        return 0
    fi
    local started=$SECONDS
    if [ ! -x "$venv/bin/python" ]; then
        echo "==> creating virtual environment in $(basename "$venv") (conformance suite)" >&2
        "$PYTHON" -m venv "$venv"
    fi
    constraints="$ROOT/constraints.txt"
    if [ "$drop_openai_pin" = "yes" ]; then
        constraints="$venv/constraints-without-openai.txt"
        grep -v '^openai==' "$ROOT/constraints.txt" > "$constraints"
    fi
    echo "==> installing $(basename "$pins") and otel-agent-profiler into $(basename "$venv")" >&2
    "$venv/bin/python" -m pip install --quiet --upgrade pip >&2
    "$venv/bin/python" -m pip install --quiet -c "$constraints" -r "$pins" -e "$ROOT" >&2
    "$venv/bin/python" -m pip check >&2
    echo "==> $(basename "$venv") installed in $((SECONDS - started)) s" >&2
    echo "$want" > "$stamp"
}

ensure_frameworks() {
    _ensure_framework_venv "$ROOT/.venv-frameworks" "$FRAMEWORK_PINS_DIR/pins-frameworks.txt" no
    _ensure_framework_venv "$ROOT/.venv-frameworks-openai2" "$FRAMEWORK_PINS_DIR/pins-openai2.txt" yes
    _ensure_framework_venv "$ROOT/.venv-frameworks-autogen-haystack-dspy" \
        "$FRAMEWORK_PINS_DIR/pins-autogen-haystack-dspy.txt" no
    _ensure_framework_venv "$ROOT/.venv-frameworks-crewai" "$FRAMEWORK_PINS_DIR/pins-crewai.txt" yes
}

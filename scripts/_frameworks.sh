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
#   - .venv-frameworks-genai: opentelemetry-instrumentation-genai-openai (tests/conformance/pins-genai.txt),
#     which needs a newer opentelemetry-util-genai than opentelemetry-instrumentation-openai-v2 accepts.
#
# Google ADK and Strands Agents require OpenTelemetry releases other than the project's pins, so their
# environments take the OpenTelemetry their framework brings (named in their pins files) and this package
# without its dependencies: the plugin runs on the OpenTelemetry a user of that framework has.
#
#   - .venv-frameworks-adk: google-adk 2.x and LiteLLM (tests/conformance/pins-adk.txt).
#   - .venv-frameworks-strands: strands-agents 1.x (tests/conformance/pins-strands.txt).
#
# Every environment has the httpx instrumentation: each source runs with and without its spans.
#
# The Traceloop instrumentation is tested in .venv itself (it is one of our dependencies).
# Each environment is a link to the environment cache (scripts/_venv_cache.sh), made anew only when its pins
# file, constraints.txt or the packaging part of pyproject.toml changed, and re-pointed at this checkout.
set -euo pipefail

FRAMEWORK_PINS_DIR="$ROOT/tests/conformance"

# $3 says which OpenTelemetry and openai the environment gets: "project" (constraints.txt), "project-but-openai"
# (constraints.txt less its openai pin) or "framework's" (the pins file's alone, this package without dependencies).
_ensure_framework_venv() {
    local name="$1" pins="$2" versions="$3"
    local want constraints
    want="$(cat "$pins" "$ROOT/constraints.txt" <(pyproject_packaging) | sha256sum | cut -d' ' -f1)"
    use_cached_venv "$name" "$want $versions"
    local venv="$CACHED_VENV"
    local stamp="$venv/.installed"
    if [ -x "$venv/bin/opentelemetry-instrument" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        cached_venv_point_here
        return 0
    fi
    cached_venv_exclusive
    local started=$SECONDS
    if [ ! -x "$venv/bin/python" ]; then
        echo "==> creating virtual environment .venv-$name (conformance suite) in $venv" >&2
        "$PYTHON" -m venv "$venv"
    fi
    echo "==> installing $(basename "$pins") and otel-agent-profiler into .venv-$name" >&2
    "$venv/bin/python" -m pip install --quiet --upgrade pip >&2
    if [ "$versions" = "framework's" ]; then
        # this package's dependencies other than OpenTelemetry, as pyproject.toml names them
        "$venv/bin/python" - "$ROOT/pyproject.toml" > "$venv/requirements-not-opentelemetry.txt" <<'PY'
import sys
import tomllib

with open(sys.argv[1], "rb") as pyproject:
    dependencies = tomllib.load(pyproject)["project"]["dependencies"]
print("\n".join(d for d in dependencies if not d.startswith("opentelemetry-")))
PY
        "$venv/bin/python" -m pip install --quiet -r "$pins" -r "$venv/requirements-not-opentelemetry.txt" >&2
        "$venv/bin/python" -m pip install --quiet --no-deps -e "$ROOT" >&2
        # this package's own pins are not met here, on purpose; everything else must be
        if "$venv/bin/python" -m pip check | grep -v -e '^otel-agent-profiler ' -e '^No broken requirements' >&2; then
            return 1
        fi
    else
        constraints="$ROOT/constraints.txt"
        if [ "$versions" = "project-but-openai" ]; then
            constraints="$venv/constraints-without-openai.txt"
            grep -v '^openai==' "$ROOT/constraints.txt" > "$constraints"
        fi
        "$venv/bin/python" -m pip install --quiet -c "$constraints" -r "$pins" -e "$ROOT" >&2
        "$venv/bin/python" -m pip check >&2
    fi
    echo "==> .venv-$name installed in $((SECONDS - started)) s" >&2
    echo "$want" > "$stamp"
    cached_venv_installed "$name" editable
}

ensure_frameworks() {
    _ensure_framework_venv frameworks "$FRAMEWORK_PINS_DIR/pins-frameworks.txt" project
    _ensure_framework_venv "frameworks-openai2" "$FRAMEWORK_PINS_DIR/pins-openai2.txt" project-but-openai
    _ensure_framework_venv "frameworks-genai" "$FRAMEWORK_PINS_DIR/pins-genai.txt" project
    _ensure_framework_venv "frameworks-adk" "$FRAMEWORK_PINS_DIR/pins-adk.txt" "framework's"
    _ensure_framework_venv "frameworks-strands" "$FRAMEWORK_PINS_DIR/pins-strands.txt" "framework's"
    _ensure_framework_venv "frameworks-autogen-haystack-dspy" \
        "$FRAMEWORK_PINS_DIR/pins-autogen-haystack-dspy.txt" project
    _ensure_framework_venv "frameworks-crewai" "$FRAMEWORK_PINS_DIR/pins-crewai.txt" project-but-openai
}

# Shared by the scripts: install the real backends the end-to-end tests run against.
# Source after _venv.sh (needs ROOT and VENV) and call `ensure_backends` after `ensure_venv`.
#
#   - Prometheus: Debian package `prometheus` (2.42 on Debian 12), binary on PATH; the system
#     service is never started (the tests start their own instance on a free port).
#   - Arize Phoenix: its own virtual environment .venv-phoenix (~850 MB, kept out of .venv),
#     reinstalled only when PHOENIX_VERSION changes.
#   - rotel (the OTLP collector) and the Prometheus exporter come with the project's dev extras
#     in .venv (pyproject.toml + constraints.txt); this only checks that they are there.
#   - Jaeger v2 and an OpenTelemetry Collector, built from their Go modules (needs Go 1.26 and
#     the Go module proxy) into a cache outside the checkout, keyed by version and by the hash
#     of what we commit for them (scripts/backends/), and reused on later runs.
#
# Idempotent: when everything is present it only runs a few `command -v`/`cat` checks.
set -euo pipefail

PHOENIX_VERSION="${PHOENIX_VERSION:-20.26.1}"
PHOENIX_VENV="$ROOT/.venv-phoenix"

# Before installing a Debian package: one line saying what is missing (apt-get itself, or root),
# instead of apt-get's own failure after a partial run.
_need_apt() {
    local package="$1" why="$2"
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "error: scripts/test installs $package with Debian's apt-get, which this system lacks: install $package yourself ($why)" >&2
        return 1
    fi
    if [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null 2>&1; then
        echo "error: scripts/test needs root (or sudo) to install $package with apt-get ($why)" >&2
        return 1
    fi
}

_as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        echo "error: need root (or sudo) to run: $*" >&2
        return 1
    fi
}

ensure_prometheus() {
    if command -v prometheus >/dev/null 2>&1; then
        return 0
    fi
    _need_apt prometheus "the end-to-end tests run a real Prometheus" || return 1
    echo "==> installing Prometheus (Debian package)" >&2
    # Keep the package's maintainer scripts from starting the system service: a policy-rc.d
    # that denies every start, only for the duration of the install (unless one already exists).
    local policy=/usr/sbin/policy-rc.d added_policy=0
    if [ ! -e "$policy" ]; then
        _as_root sh -c "printf '#!/bin/sh\nexit 101\n' > $policy && chmod 755 $policy"
        added_policy=1
    fi
    local rc=0
    {
        _as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
            _as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
                -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold prometheus
    } >&2 || rc=$?
    if [ "$added_policy" -eq 1 ]; then
        _as_root rm -f "$policy"
    fi
    if [ "$rc" -ne 0 ]; then
        echo "error: apt-get install prometheus failed" >&2
        return "$rc"
    fi
    # If a service manager started it anyway, stop and disable it: the tests run their own.
    if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
        _as_root systemctl disable --now prometheus >/dev/null 2>&1 || true
    elif command -v service >/dev/null 2>&1; then
        _as_root service prometheus stop >/dev/null 2>&1 || true
    fi
    command -v prometheus >/dev/null 2>&1 || {
        echo "error: prometheus not on PATH after install" >&2
        return 1
    }
}

ensure_phoenix() {
    local stamp="$PHOENIX_VENV/.installed" want="arize-phoenix==$PHOENIX_VERSION"
    if [ -x "$PHOENIX_VENV/bin/phoenix" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        return 0
    fi
    if [ ! -x "$PHOENIX_VENV/bin/python" ]; then
        echo "==> creating virtual environment in .venv-phoenix" >&2
        "$PYTHON" -m venv "$PHOENIX_VENV"
    fi
    echo "==> installing $want into .venv-phoenix (large, once)" >&2
    "$PHOENIX_VENV/bin/python" -m pip install --quiet --upgrade pip >&2
    "$PHOENIX_VENV/bin/python" -m pip install --quiet "$want" >&2
    echo "$want" > "$stamp"
}

check_dev_backends() {
    # rotel and opentelemetry-exporter-prometheus are dev extras of the project (installed by
    # ensure_venv); fail early with a clear message if they are missing.
    if ! "$VENV/bin/python" -c 'import rotel, opentelemetry.exporter.prometheus, prometheus_client' 2>/dev/null; then
        echo "error: rotel / opentelemetry-exporter-prometheus / prometheus_client missing from .venv:" \
            "add them to the dev extras in pyproject.toml and pin them in constraints.txt" \
            "(rotel==0.0.1a15, opentelemetry-exporter-prometheus==0.66b2, prometheus-client==0.26.0)" >&2
        return 1
    fi
}

ensure_backends() {
    ensure_prometheus
    ensure_phoenix
    ensure_jaeger
    ensure_otelcol
    check_dev_backends
    ensure_bare_venv
    ensure_chromium
    ensure_openssl
}

# Jaeger and the OpenTelemetry Collector, built from Go modules (docs/development.md gives the
# first-run cost). The binaries live in $BACKENDS_CACHE/<name>-<version>-<hash>/, where <hash> is
# that of our module files, so editing them builds anew; Go's own module and build caches
# (GOMODCACHE, GOCACHE: outside the checkout too) make a rebuild after such an edit quick.
# tests/support/go_backends.py computes the same directories.
BACKENDS_CACHE="${OTEL_AGENT_PROFILER_BACKENDS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/otel-agent-profiler/backends}"
JAEGER_VERSION=v1.76.0 # the Go module's tag for Jaeger v2.13.0 (the module path has no /v2)
OTELCOL_BUILDER_VERSION=v0.161.0

_backend_dir() { # name version file...: the cache directory for this build of name
    local name="$1" version="$2" hash
    shift 2
    hash="$(cat "$@" | sha256sum | cut -c1-12)"
    echo "$BACKENDS_CACHE/$name-$version-$hash"
}

_require_go() {
    command -v go >/dev/null 2>&1 || {
        echo "error: building $1 needs Go 1.26 on PATH (go not found)" >&2
        return 1
    }
    # go1.26.8 -> 1 26: an older Go fails the build only after minutes of downloads.
    local version major minor
    version="$(go env GOVERSION 2>/dev/null || true)"
    IFS=. read -r major minor _ <<<"${version#go}"
    if [ -z "$minor" ] || [ "$major" -lt 1 ] || { [ "$major" -eq 1 ] && [ "${minor%%[!0-9]*}" -lt 26 ]; }; then
        echo "error: building $1 needs Go 1.26 or newer; go on PATH is ${version:-of unknown version}" >&2
        return 1
    fi
}

# Jaeger's go.mod has a `replace`, so `go install ...@version` refuses it: it is built as a tool
# of our scratch module scripts/backends/jaeger (go.mod + go.sum, nothing else).
ensure_jaeger() {
    local module="$ROOT/scripts/backends/jaeger" dir
    dir="$(_backend_dir jaeger "$JAEGER_VERSION" "$module/go.mod" "$module/go.sum")"
    if [ -x "$dir/jaeger" ]; then
        return 0
    fi
    _require_go "Jaeger $JAEGER_VERSION" || return 1
    echo "==> building Jaeger $JAEGER_VERSION from Go modules into $dir (the first time takes long)" >&2
    mkdir -p "$dir"
    local log="$dir/build.log"
    if ! (cd "$module" && nice -n 19 go build -mod=readonly -o "$dir/jaeger.tmp" \
        github.com/jaegertracing/jaeger/cmd/jaeger) >"$log" 2>&1; then
        echo "error: building Jaeger $JAEGER_VERSION failed: $(tail -n 1 "$log") (full log: $log)" >&2
        return 1
    fi
    mv "$dir/jaeger.tmp" "$dir/jaeger"
}

# The collector: the Collector Builder (installed into the cache too) with our manifest.
ensure_otelcol() {
    local manifest="$ROOT/scripts/backends/otelcol/manifest.yaml" dir
    dir="$(_backend_dir otelcol "$OTELCOL_BUILDER_VERSION" "$manifest")"
    if [ -x "$dir/otelcol-agent-profiler" ]; then
        return 0
    fi
    _require_go "the OpenTelemetry Collector" || return 1
    echo "==> building the OpenTelemetry Collector ($OTELCOL_BUILDER_VERSION) into $dir (the first time takes long)" >&2
    mkdir -p "$dir"
    local log="$dir/build.log" builder="$BACKENDS_CACHE/builder-$OTELCOL_BUILDER_VERSION/builder"
    if [ ! -x "$builder" ]; then
        if ! GOBIN="$(dirname "$builder")" nice -n 19 go install \
            "go.opentelemetry.io/collector/cmd/builder@$OTELCOL_BUILDER_VERSION" >"$log" 2>&1; then
            echo "error: installing the Collector Builder $OTELCOL_BUILDER_VERSION failed: $(tail -n 1 "$log") (full log: $log)" >&2
            return 1
        fi
    fi
    sed "s|OUTPUT_PATH|$dir/src|" "$manifest" >"$dir/manifest.yaml"
    if ! (cd "$dir" && nice -n 19 "$builder" --config="$dir/manifest.yaml") >>"$log" 2>&1; then
        echo "error: building the OpenTelemetry Collector failed: $(tail -n 1 "$log") (full log: $log)" >&2
        return 1
    fi
    mv "$dir/src/otelcol-agent-profiler" "$dir/otelcol-agent-profiler"
}

# The "bare" environment for the end-to-end comparison (tests/plugin/test_e2e_live.py): the same pinned
# OpenTelemetry packages as .venv (constraints.txt), the plain SDK configurator of
# opentelemetry-distro, the OpenAI client and its instrumentation, and NOT otel-agent-profiler.
# The tests run the same app under both and check that ours only adds agent_profiler.* attributes.
#
# opentelemetry-distro has no 0.66b2 release: 0.66b1 is the newest of the 0.66 line, and it pins
# opentelemetry-instrumentation==0.66b1, which conflicts with the pinned 0.66b2. Its code is only
# an `opentelemetry_configurator` subclassing the SDK's and a distro that defaults the exporters
# to OTLP, so it is installed with --no-deps on top of the pinned set (pip check lists the pin).
BARE_VENV="$ROOT/.venv-bare"
BARE_DISTRO="opentelemetry-distro==0.66b1"
BARE_PACKAGES=(
    opentelemetry-api
    opentelemetry-sdk
    opentelemetry-exporter-otlp
    opentelemetry-instrumentation
    opentelemetry-instrumentation-openai
    openai
)

ensure_bare_venv() {
    local stamp="$BARE_VENV/.installed" want
    want="$(printf '%s\n' "${BARE_PACKAGES[@]}" "$BARE_DISTRO" | cat - "$ROOT/constraints.txt" | sha256sum | cut -d' ' -f1)"
    if [ -x "$BARE_VENV/bin/opentelemetry-instrument" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        return 0
    fi
    if [ ! -x "$BARE_VENV/bin/python" ]; then
        echo "==> creating virtual environment in .venv-bare (no otel-agent-profiler)" >&2
        "$PYTHON" -m venv "$BARE_VENV"
    fi
    echo "==> installing the plain OpenTelemetry SDK setup into .venv-bare" >&2
    "$BARE_VENV/bin/python" -m pip install --quiet --upgrade pip >&2
    "$BARE_VENV/bin/python" -m pip install --quiet -c "$ROOT/constraints.txt" "${BARE_PACKAGES[@]}" >&2
    "$BARE_VENV/bin/python" -m pip install --quiet --no-deps "$BARE_DISTRO" >&2
    # from / so that the checkout itself is not on sys.path
    if (cd / && "$BARE_VENV/bin/python" -c 'import otel_agent_profiler' 2>/dev/null); then
        echo "error: otel-agent-profiler is importable in .venv-bare; it must not be" >&2
        return 1
    fi
    if [ ! -x "$BARE_VENV/bin/opentelemetry-instrument" ]; then
        echo "error: .venv-bare/bin/opentelemetry-instrument missing after install" >&2
        return 1
    fi
    echo "$want" > "$stamp"
}

# Headless Chromium for the HTML report's browser test (tests/report/test_html_report_browser.py):
# Debian's package, /usr/bin/chromium; installed once.
ensure_chromium() {
    if [ -x /usr/bin/chromium ]; then
        return 0
    fi
    _need_apt chromium "the HTML report's browser test runs headless Chromium" || return 1
    echo "==> installing Chromium (Debian package) for the HTML report's browser test" >&2
    {
        _as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
            _as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
    } >&2 || {
        echo "error: apt-get install chromium failed" >&2
        return 1
    }
    [ -x /usr/bin/chromium ] || {
        echo "error: /usr/bin/chromium missing after install" >&2
        return 1
    }
}

# The openssl command makes the self-signed certificate of the trace-store TLS test
# (tests/stores/test_stores.py); Debian's package, usually present already.
ensure_openssl() {
    if command -v openssl >/dev/null 2>&1; then
        return 0
    fi
    _need_apt openssl "the trace-store TLS test makes a certificate with it" || return 1
    echo "==> installing openssl (Debian package) for the trace-store TLS test" >&2
    {
        _as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
            _as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl
    } >&2 || {
        echo "error: apt-get install openssl failed" >&2
        return 1
    }
}

"""Jaeger v2 and an OpenTelemetry Collector, built from their Go modules, for the end-to-end tests.

``scripts/test`` builds both (``scripts/_backends.sh``: ``ensure_jaeger``, ``ensure_otelcol``) into a cache
outside the checkout, ``<cache>/<name>-<version>-<hash of scripts/backends/<name>/...>/``; this module computes
the same directories. A missing binary raises :class:`BackendNotInstalled` (a test failure, never a skip).

Both are started bound to 127.0.0.1 on free ports, like the other launchers in :mod:`tests.support.backends`.
Jaeger gets a config written here (memory storage, OTLP/gRPC in, query APIs out, its self-tracing and its own
metrics endpoint off). The collector runs a configuration of ``collector-config/`` *as shipped* with only its
``host:port`` endpoints replaced (:func:`substitute_endpoints` checks each one is there exactly once), plus
one merged-in setting: the collector's own metrics listen on a fixed port (8888) by default, which concurrent
test runs would fight over, so they are turned off.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.support.backends import (
    HOST,
    BackendError,
    BackendNotInstalled,
    BackendProcess,
    _clean_env,
    free_ports,
    http_get,
    port_open,
    wait_until,
)
from tests.support.paths import ROOT

JAEGER_VERSION = "v1.76.0"  # the Go module's tag for Jaeger v2.13.0; keep in step with scripts/_backends.sh
OTELCOL_BUILDER_VERSION = "v0.161.0"
BACKEND_MODULES = ROOT / "scripts" / "backends"
_INSTALL_HINT = "run scripts/test (it builds Jaeger and the collector through scripts/_backends.sh)"


def backends_cache() -> Path:
    """Where ``scripts/_backends.sh`` puts the built binaries."""
    explicit = os.environ.get("OTEL_AGENT_PROFILER_BACKENDS_CACHE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "otel-agent-profiler" / "backends"


def _build_dir(name: str, version: str, files: list[Path]) -> Path:
    digest = hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()[:12]
    return backends_cache() / f"{name}-{version}-{digest}"


def _binary(path: Path, what: str) -> Path:
    if not os.access(path, os.X_OK):
        raise BackendNotInstalled(f"{what} not built (expected at {path}); {_INSTALL_HINT}")
    return path


def jaeger_binary() -> Path:
    module = BACKEND_MODULES / "jaeger"
    directory = _build_dir("jaeger", JAEGER_VERSION, [module / "go.mod", module / "go.sum"])
    return _binary(directory / "jaeger", f"Jaeger {JAEGER_VERSION}")


def otelcol_binary() -> Path:
    directory = _build_dir("otelcol", OTELCOL_BUILDER_VERSION, [BACKEND_MODULES / "otelcol" / "manifest.yaml"])
    return _binary(directory / "otelcol-agent-profiler", "the OpenTelemetry Collector")


def require_go_backends() -> None:
    """Fail the test (never skip it) with the install hint when Jaeger or the collector is not built."""
    try:
        jaeger_binary()
        otelcol_binary()
    except BackendNotInstalled as err:
        pytest.fail(str(err), pytrace=False)


def substitute_endpoints(config: str, endpoints: Mapping[str, str]) -> str:
    """``config`` with each ``old -> new`` endpoint replaced; each old one must occur exactly once."""
    for old, new in endpoints.items():
        count = config.count(old)
        if count != 1:
            raise ValueError(f"endpoint {old!r} occurs {count} times in the configuration, expected once")
        config = config.replace(old, new)
    return config


def _ready(url: str) -> Callable[[], bool]:
    def probe() -> bool:
        try:
            return http_get(url, timeout=2)[0] == 200
        except OSError:
            return False

    return probe


class Jaeger:
    """A real Jaeger v2 all-in-one: OTLP/gRPC at :attr:`otlp_grpc_endpoint`, query APIs at :attr:`query_url`."""

    def __init__(self, log_dir: Path, name: str = "jaeger") -> None:
        self.binary = jaeger_binary()
        self.otlp_port, self.query_http_port, self.query_grpc_port = free_ports(3)
        self.config_path = log_dir / f"{name}.yaml"
        self.config_path.write_text(
            f"""\
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: info
extensions:
  jaeger_query:
    storage:
      traces: memstore
    enable_tracing: false
    http:
      endpoint: {HOST}:{self.query_http_port}
    grpc:
      endpoint: {HOST}:{self.query_grpc_port}
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: {HOST}:{self.otlp_port}
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
"""
        )
        self.process = BackendProcess(
            name, [self.binary, f"--config={self.config_path}"], log_dir / f"{name}.log", _clean_env()
        )

    @property
    def otlp_grpc_endpoint(self) -> str:
        return f"{HOST}:{self.otlp_port}"

    @property
    def query_url(self) -> str:
        return f"http://{HOST}:{self.query_http_port}"

    def start(self, timeout: float = 60.0) -> Jaeger:
        self.process.start()
        try:
            wait_until(
                lambda: _ready(f"{self.query_url}/api/services")() and port_open(self.otlp_port),
                timeout,
                "Jaeger's query API and OTLP receiver",
                interval=0.2,
                alive=self.process.check_alive,
                details=self.process.log_tail,
            )
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 15.0) -> int | None:
        return self.process.stop(timeout)

    def get_json(self, path: str, params: Mapping[str, str] | None = None) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        status, body = http_get(f"{self.query_url}{path}{query}", timeout=10)
        if status != 200:
            raise BackendError(f"Jaeger {path}{query} -> {status}: {body[:500]!r}")
        return json.loads(body)

    def trace(self, trace_id: str) -> dict[str, Any] | None:
        """The trace in Jaeger JSON (``/api/traces/<id>``), or None while Jaeger does not have it."""
        status, body = http_get(f"{self.query_url}/api/traces/{trace_id}", timeout=10)
        if status == 404:
            return None
        if status != 200:
            raise BackendError(f"Jaeger /api/traces/{trace_id} -> {status}: {body[:500]!r}")
        data = json.loads(body).get("data") or []
        return data[0] if data else None

    def wait_for_trace(self, trace_id: str, span_count: int, timeout: float = 30.0) -> dict[str, Any]:
        """Poll until Jaeger holds ``span_count`` spans of the trace (and no more arrive for a moment)."""

        def probe() -> dict[str, Any] | None:
            trace = self.trace(trace_id)
            return trace if trace is not None and len(trace["spans"]) >= span_count else None

        return wait_until(
            probe,
            timeout,
            f"{span_count} spans of trace {trace_id} in Jaeger",
            interval=0.25,
            alive=self.process.check_alive,
            details=self.process.log_tail,
        )


class Otelcol:
    """A real OpenTelemetry Collector running ``config`` (a YAML text: a shipped file with its endpoints replaced)."""

    def __init__(
        self,
        config: str,
        log_dir: Path,
        *,
        health_port: int,
        merged: Sequence[str] = (),
        name: str = "otelcol",
    ) -> None:
        """``merged``: settings merged over ``config`` (``yaml:key::key: value``, the collector's --config syntax)."""
        self.binary = otelcol_binary()
        self.health_port = health_port
        self.config_path = log_dir / f"{name}.yaml"
        self.config_path.write_text(config)
        argv = [
            self.binary,
            f"--config={self.config_path}",
            # the collector's own metrics would listen on the fixed port 8888: off (see the module docstring)
            "--config=yaml:service::telemetry::metrics::level: none",
            *(f"--config={setting}" for setting in merged),
        ]
        self.process = BackendProcess(name, argv, log_dir / f"{name}.log", _clean_env())

    def start(self, timeout: float = 60.0) -> Otelcol:
        self.process.start()
        try:
            wait_until(
                _ready(f"http://{HOST}:{self.health_port}/"),
                timeout,
                "the collector's health_check",
                interval=0.2,
                alive=self.process.check_alive,
                details=self.process.log_tail,
            )
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 15.0) -> int | None:
        return self.process.stop(timeout)

    def reload(self, config: str, timeout: float = 30.0) -> None:
        """Write ``config`` over the running configuration and have the collector reload it (SIGHUP), as an
        operator does after editing it: the pipelines are shut down (receivers first, so nothing new is
        taken, then the exporters, which drain their queues) and started again from the new file."""
        ready_line = "Everything is ready"
        before = self.process.log_text().count(ready_line)
        self.config_path.write_text(config)
        pid = self.process.pid
        assert pid is not None, "the collector was not started"
        os.kill(pid, signal.SIGHUP)
        wait_until(
            lambda: self.process.log_text().count(ready_line) > before,
            timeout,
            "the collector to reload its configuration",
            interval=0.1,
            alive=self.process.check_alive,
            details=self.process.log_tail,
        )


def jaeger_collector_config(jaeger: Jaeger, *, health_port: int, grpc_port: int, http_port: int, prom_port: int) -> str:
    """``collector-config/otelcol-jaeger.yaml`` as shipped, with only its endpoints replaced (127.0.0.1, free ports)."""
    shipped = (ROOT / "collector-config" / "otelcol-jaeger.yaml").read_text()
    return substitute_endpoints(
        shipped,
        {
            "0.0.0.0:13133": f"{HOST}:{health_port}",
            "0.0.0.0:4317": f"{HOST}:{grpc_port}",
            "0.0.0.0:4318": f"{HOST}:{http_port}",
            "jaeger:4317": jaeger.otlp_grpc_endpoint,
            "0.0.0.0:8889": f"{HOST}:{prom_port}",
        },
    )


#: The resolver of the shipped tier-1 file: a DNS name answering with one address per replica, all on one
#: port. On one host the replicas need a port each, which DNS cannot say, so the tests use the static list
#: the file's own comment gives as the alternative (same exporter, same hash ring over the list).
TIER1_DNS_RESOLVER = """\
      dns:
        hostname: agent-profiler
        port: 4317
        interval: 5s
"""


def tier1_collector_config(
    replicas: Sequence[str], *, upstream: str, health_port: int, grpc_port: int, http_port: int
) -> str:
    """``collector-config/otelcol-tier1-loadbalancing.yaml`` as shipped, routing to ``replicas`` (host:port of
    each ``serve``'s OTLP/gRPC receiver) through a static resolver, endpoints on 127.0.0.1 free ports, and
    the applications' metrics to ``upstream`` (host:port)."""
    shipped = (ROOT / "collector-config" / "otelcol-tier1-loadbalancing.yaml").read_text()
    static = f"      static: {{hostnames: [{', '.join(replicas)}]}}\n"
    return substitute_endpoints(
        shipped,
        {
            TIER1_DNS_RESOLVER: static,
            "0.0.0.0:13133": f"{HOST}:{health_port}",
            "0.0.0.0:4317": f"{HOST}:{grpc_port}",
            "0.0.0.0:4318": f"{HOST}:{http_port}",
            "otelcol:4317": upstream,
        },
    )


__all__ = [
    "TIER1_DNS_RESOLVER",
    "Jaeger",
    "Otelcol",
    "jaeger_binary",
    "jaeger_collector_config",
    "otelcol_binary",
    "require_go_backends",
    "substitute_endpoints",
    "tier1_collector_config",
]

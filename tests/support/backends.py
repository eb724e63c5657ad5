"""Real OTLP backends for the end-to-end tests: rotel (collector), Arize Phoenix (trace store), Prometheus.

Nothing here is a mock: each launcher starts the real program as a subprocess bound to 127.0.0.1 on free
ports, waits until it answers, and stops it (SIGTERM to its process group, SIGKILL after a grace period).
Every launcher writes its output under ``test-artifacts/backends/latest/`` (this session's
``run-<time>-<pid>`` directory; one subdirectory per test) so a failing run can be diagnosed afterwards.
The programs are installed by ``scripts/test`` (``scripts/_backends.sh``: Prometheus from Debian, Phoenix in
``.venv-phoenix``; rotel and the Prometheus exporter are dev extras of ``.venv``); a missing one raises
:class:`BackendNotInstalled` with that hint instead of skipping.

Facts verified here (rotel 0.0.1a15 = rotel-agent 0.0.1-alpha10, arize-phoenix 20.26.1, Prometheus 2.42):

* rotel accepts OTLP/gRPC and OTLP/HTTP (protobuf) and exports OTLP over gRPC or HTTP (gzip by default).
  With ``--otlp-exporter-protocol http`` the general ``--otlp-exporter-endpoint`` is a base URL to which
  rotel appends ``/v1/traces`` / ``/v1/metrics``; per-signal endpoints must carry the full path.
  ``--debug-log`` writes what it *received* to stdout in the collector "debug exporter" text format,
  parsed by :func:`parse_debug_spans` / :func:`parse_debug_metrics`.
* Phoenix ingests traces over both OTLP/gRPC (``PHOENIX_GRPC_PORT``) and OTLP/HTTP (``/v1/traces``), so
  rotel can forward to either. See :meth:`Phoenix.spans` for what it keeps and drops.
* Prometheus 2.42 has no OTLP receiver; the tests expose metrics with ``PrometheusMetricReader`` +
  ``prometheus_client`` and let Prometheus scrape them. See :class:`Prometheus` for the name translation.
  It is ready ~10 ms after start but scrapes a new target only ~5 s later (service discovery hands targets
  to the scrape manager at most every 5 s; not configurable in 2.42), so count ~6 s per Prometheus.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from tests.support.paths import ROOT

ARTIFACTS = ROOT / "test-artifacts"
PHOENIX_VENV = ROOT / ".venv-phoenix"
HOST = "127.0.0.1"
_RESERVED_PORTS = frozenset({4317, 4318})  # may belong to someone else's collector on a shared machine
_INSTALL_HINT = "run scripts/test (it installs the end-to-end backends through scripts/_backends.sh)"

T = TypeVar("T")


class BackendNotInstalled(RuntimeError):
    """A backend program is missing: the fixtures turn this into a test failure, never a skip."""


class BackendError(RuntimeError):
    """A backend did not start, died, or did not produce what was waited for."""


# --------------------------------------------------------------------------------------------------------------
# small helpers


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (never 4317/4318)."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """``count`` distinct free ports (all sockets are held open until every port is chosen)."""
    held: list[socket.socket] = []
    ports: list[int] = []
    try:
        while len(ports) < count:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            held.append(s)
            s.bind((HOST, 0))
            port = s.getsockname()[1]
            if port not in _RESERVED_PORTS:
                ports.append(port)
    finally:
        for s in held:
            s.close()
    return ports


def port_open(port: int, host: str = HOST) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.2):
        return True
    return False


def wait_until(
    probe: Callable[[], T | None],
    timeout: float,
    what: str,
    *,
    interval: float = 0.1,
    alive: Callable[[], None] | None = None,
    details: Callable[[], str] | None = None,
) -> T:
    """Call ``probe`` until it returns something other than None/False; raise BackendError after ``timeout``.

    ``alive`` is called each round and should raise if the backend process died (no point waiting then);
    ``details`` adds context (usually a log tail) to the timeout message.
    """
    deadline = time.monotonic() + timeout
    while True:
        if alive is not None:
            alive()
        result = probe()
        if result is not None and result is not False:
            return result
        if time.monotonic() >= deadline:
            extra = f"\n{details()}" if details is not None else ""
            raise BackendError(f"timed out after {timeout:.1f}s waiting for {what}{extra}")
        time.sleep(interval)


def http_get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    """GET ``url``; returns (status, body) for any HTTP status, raises OSError when nothing answers."""
    status, _, body = http_exchange(url, timeout=timeout)
    return status, body


def http_exchange(
    request: urllib.request.Request | str, *, timeout: float = 10.0, context: ssl.SSLContext | None = None
) -> tuple[int, dict[str, str], bytes]:
    """Send ``request`` (or GET a URL); returns (status, headers, body) for any HTTP status, raises
    OSError when nothing answers."""
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as err:
        with err:
            return err.code, dict(err.headers), err.read()


_RUN_DIR: Path | None = None
_KEEP_RUNS = 5


def run_dir() -> Path:
    """This test session's directory, ``test-artifacts/backends/run-<time>-<pid>/`` (``latest`` links to it).

    One per process so concurrent pytest runs in the same checkout never clobber each other's logs; only the
    newest few runs are kept.
    """
    global _RUN_DIR
    if _RUN_DIR is None:
        base = ARTIFACTS / "backends"
        base.mkdir(parents=True, exist_ok=True)
        run = base / f"run-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        run.mkdir(exist_ok=True)
        _RUN_DIR = run
        old_runs = sorted((p for p in base.glob("run-*") if p.is_dir()), key=lambda p: p.stat().st_mtime)
        for old in old_runs[:-_KEEP_RUNS]:
            if old != run:
                shutil.rmtree(old, ignore_errors=True)
        latest, tmp_link = base / "latest", base / f".latest-{os.getpid()}"
        with contextlib.suppress(OSError):
            tmp_link.unlink(missing_ok=True)
            tmp_link.symlink_to(run.name)
            os.replace(tmp_link, latest)
    return _RUN_DIR


def artifact_dir(*parts: str) -> Path:
    """A new directory for one backend's or one test's files under this session's :func:`run_dir`."""
    safe = [re.sub(r"[^A-Za-z0-9_.-]+", "_", p).strip("_")[:120] or "_" for p in parts]
    path = run_dir().joinpath(*safe)
    candidate, n = path, 1
    while candidate.exists():  # the same test run twice in one session (reruns): keep both
        n += 1
        candidate = path.with_name(f"{path.name}-{n}")
    candidate.mkdir(parents=True)
    return candidate


def _clean_env(drop_prefixes: Sequence[str] = ("OTEL_", "PHOENIX_", "ROTEL_")) -> dict[str, str]:
    """The current environment without variables that would reconfigure the backends behind our back."""
    return {k: v for k, v in os.environ.items() if not k.startswith(tuple(drop_prefixes))}


# --------------------------------------------------------------------------------------------------------------
# process management shared by the launchers

_LIVE: set[BackendProcess] = set()


@atexit.register
def _stop_leftovers() -> None:  # safety net for a pytest that exits without running fixture teardown
    for proc in list(_LIVE):
        proc.stop(timeout=3)


class BackendProcess:
    """One subprocess with stdout+stderr going to ``log_path``; own process group so stop() gets children too."""

    def __init__(self, name: str, argv: Sequence[str | os.PathLike[str]], log_path: Path, env: dict[str, str]):
        self.name = name
        self.argv = [str(a) for a in argv]
        self.log_path = log_path
        self.env = env
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"$ {' '.join(self.argv)}\n".encode())
            log.flush()
            # the child keeps its own copy of the descriptor; ours is closed on leaving the block
            self._proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.log_path.parent,
                start_new_session=True,
            )
        _LIVE.add(self)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def check_alive(self) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            raise BackendError(
                f"{self.name} exited with code {self._proc.returncode}; log {self.log_path}:\n{self.log_tail()}"
            )

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM the process group, SIGKILL it after ``timeout``; returns the exit code. Idempotent."""
        proc = self._proc
        if proc is None:
            return None
        _LIVE.discard(self)
        if proc.poll() is None:
            self._signal(proc, signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._signal(proc, signal.SIGKILL)
                proc.wait(timeout=10)
        else:
            # the leader is gone; make sure nothing it started is left behind
            self._signal(proc, signal.SIGKILL)
        return proc.returncode

    @staticmethod
    def _signal(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
        try:
            os.killpg(proc.pid, sig)  # the group this launcher created (start_new_session), nothing else
        except (ProcessLookupError, PermissionError):
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)


# --------------------------------------------------------------------------------------------------------------
# rotel


def rotel_binary() -> Path:
    try:
        import rotel
    except ImportError as err:
        raise BackendNotInstalled(
            f"the `rotel` package (OTLP collector) is not installed in {sys.prefix}; {_INSTALL_HINT}"
        ) from err
    binary = Path(rotel.__file__).parent / "rotel-agent"
    if not os.access(binary, os.X_OK):
        raise BackendNotInstalled(f"rotel-agent not found or not executable at {binary}; {_INSTALL_HINT}")
    return binary


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")  # rotel's own log lines, interleaved with debug output


def _debug_lines(text: str) -> list[str]:
    return [ln for ln in _ANSI.sub("", text).replace("\x00", "").splitlines() if not _LOG_LINE.match(ln)]


def parse_debug_value(text: str) -> Any:
    """Turn rotel's ``Str(x)``, ``Int(3)``, ``Double(1.5)``, ``Bool(true)``, ``Slice(Int(1), Int(2))`` into Python.

    Best effort: a string containing ``", "`` inside a Slice is split wrongly, and anything unrecognised
    (Map, Bytes, ...) is returned as the raw text.
    """
    m = re.fullmatch(r"(\w+)\((.*)\)", text.strip(), re.S)
    if not m:
        return text
    kind, inner = m.groups()
    if kind == "Str":
        return inner
    if kind == "Int":
        return int(inner)
    if kind == "Double":
        return float(inner)
    if kind == "Bool":
        return inner == "true"
    if kind == "Slice":
        items, depth, start = [], 0, 0
        for i, ch in enumerate(inner):
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
            elif ch == "," and depth == 0:
                items.append(inner[start:i])
                start = i + 1
        if inner.strip():
            items.append(inner[start:])
        return [parse_debug_value(item) for item in items]
    return text


@dataclass
class DebugSpan:
    """A span as rotel's ``--debug-log traces --debug-log-verbosity detailed`` printed it."""

    name: str = ""
    trace_id: str = ""
    span_id: str = ""
    parent_id: str = ""  # "" for a root span
    kind: str = ""  # e.g. SPAN_KIND_CLIENT
    start_ns: int = 0
    end_ns: int = 0
    status_code: str = ""
    status_message: str = ""
    attributes: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    links: list[dict[str, Any]] = field(default_factory=list)
    resource: dict[str, Any] = field(default_factory=dict)
    scope: str = ""


@dataclass
class DebugDataPoint:
    attributes: dict[str, Any] = field(default_factory=dict)
    values: dict[str, float] = field(default_factory=dict)  # Count, Sum, Min, Max, Value, ...
    bounds: list[float] = field(default_factory=list)  # histogram ExplicitBounds
    bucket_counts: list[int] = field(default_factory=list)


@dataclass
class DebugMetric:
    """A metric as rotel's ``--debug-log metrics --debug-log-verbosity detailed`` printed it."""

    name: str = ""
    description: str = ""
    unit: str = ""
    data_type: str = ""  # Histogram, Sum, Gauge, ExponentialHistogram, Summary
    is_monotonic: bool | None = None
    temporality: str = ""
    data_points: list[DebugDataPoint] = field(default_factory=list)
    resource: dict[str, Any] = field(default_factory=dict)
    scope: str = ""


_ARROW = re.compile(r"^(\s*)-> ([^:]+?):{1,2}(?: (.*))?$")
_FIELD = re.compile(r"^\s*([A-Za-z][A-Za-z ]*?)\s*: ?(.*)$")
_DESCRIPTOR_KEYS = {
    "Name": "name",
    "Description": "description",
    "Unit": "unit",
    "DataType": "data_type",
    "AggregationTemporality": "temporality",
}
_SPAN_FIELDS = {
    "Trace ID": "trace_id",
    "Parent ID": "parent_id",
    "ID": "span_id",
    "Name": "name",
    "Kind": "kind",
    "Status code": "status_code",
    "Status message": "status_message",
}


def parse_debug_spans(text: str) -> list[DebugSpan]:
    """All spans in rotel's debug output, in the order printed (a span exported twice appears twice)."""
    spans: list[DebugSpan] = []
    resource: dict[str, Any] = {}
    scope = ""
    span: DebugSpan | None = None
    section = ""  # resource | attributes | events | links
    item: dict[str, Any] | None = None  # current event / link
    for line in _debug_lines(text):
        stripped = line.strip()
        if line.startswith("ResourceSpans #"):
            resource, scope, span, section = {}, "", None, ""
        elif line.startswith(("ResourceMetrics #", "ResourceLogs #")):
            # Another signal's batch: nothing in it belongs to a span or its resource.
            resource, scope, span, section = {}, "", None, "other"
        elif section == "other":
            continue
        elif stripped == "Resource attributes:":
            section = "resource"
        elif line.startswith("InstrumentationScope "):
            scope = line[len("InstrumentationScope ") :].strip()
        elif line.startswith("ScopeSpans"):
            span, section = None, ""
        elif line.startswith("Span #"):
            span = DebugSpan(resource=resource, scope=scope)
            spans.append(span)
            section = ""
        elif span is not None and stripped in ("Attributes:", "Events:", "Links:"):
            section = stripped[:-1].lower()
        elif span is not None and line.startswith(("SpanEvent #", "SpanLink #")):
            item = {"attributes": {}}
            (span.events if line.startswith("SpanEvent") else span.links).append(item)
        elif m := _ARROW.match(line):
            indent, key, value = m.group(1), m.group(2), m.group(3) or ""
            if section == "resource":
                resource[key] = parse_debug_value(value)
            elif span is None:
                continue
            elif section == "attributes":
                span.attributes[key] = parse_debug_value(value)
            elif section in ("events", "links") and item is not None:
                if len(indent) > 5:  # nested attribute of the event / link
                    item["attributes"][key] = parse_debug_value(value)
                elif key != "Attributes":
                    item[key] = value
        elif span is not None and (m := _FIELD.match(line)):
            key, value = m.group(1), m.group(2).strip()
            if key in _SPAN_FIELDS:
                setattr(span, _SPAN_FIELDS[key], value)
            elif key == "Start time":
                span.start_ns = int(value)
            elif key == "End time":
                span.end_ns = int(value)
    return spans


def parse_debug_metrics(text: str) -> list[DebugMetric]:
    """All metrics in rotel's debug output, in the order printed (each export of a metric appears again)."""
    metrics: list[DebugMetric] = []
    resource: dict[str, Any] = {}
    scope = ""
    metric: DebugMetric | None = None
    point: DebugDataPoint | None = None
    section = ""  # resource | descriptor | point
    for line in _debug_lines(text):
        stripped = line.strip()
        if line.startswith("ResourceMetrics #"):
            resource, scope, metric, point, section = {}, "", None, None, ""
        elif line.startswith(("ResourceSpans #", "ResourceLogs #")):
            resource, scope, metric, point, section = {}, "", None, None, "other"
        elif section == "other":
            continue
        elif stripped.startswith(("Exemplars:", "Exemplar #")):
            # Exemplar fields (trace id, span id, value) are not data point attributes.
            section = "exemplar"
        elif stripped == "Resource attributes:":
            section = "resource"
        elif line.startswith("InstrumentationScope "):
            scope = line[len("InstrumentationScope ") :].strip()
        elif line.startswith("ScopeMetrics"):
            metric, point, section = None, None, ""
        elif line.startswith("Metric #"):
            metric = DebugMetric(resource=resource, scope=scope)
            metrics.append(metric)
            point, section = None, ""
        elif metric is not None and stripped == "Descriptor:":
            section = "descriptor"
        elif metric is not None and re.match(r"^\w*DataPoints #\d+", line):
            point = DebugDataPoint()
            metric.data_points.append(point)
            section = "point"
        elif m := _ARROW.match(line):
            key, value = m.group(2), m.group(3) or ""
            if section == "resource":
                resource[key] = parse_debug_value(value)
            elif section == "descriptor" and metric is not None:
                if key in _DESCRIPTOR_KEYS:
                    setattr(metric, _DESCRIPTOR_KEYS[key], value)
                elif key == "IsMonotonic":
                    metric.is_monotonic = value == "true"
            elif section == "point" and point is not None:
                point.attributes[key] = parse_debug_value(value)
        elif point is not None:
            if bm := re.match(r"^ExplicitBounds #\d+: (.+)$", stripped):
                point.bounds.append(float(bm.group(1)))
            elif bm := re.match(r"^Buckets #\d+, Count: (\d+)$", stripped):
                point.bucket_counts.append(int(bm.group(1)))
            elif (fm := re.match(r"^(Count|Sum|Min|Max|Value|StartTimestamp|Timestamp): (.+)$", stripped)) is not None:
                with contextlib.suppress(ValueError):
                    point.values[fm.group(1)] = float(fm.group(2))
    return metrics


class Rotel:
    """A real rotel-agent with OTLP gRPC + HTTP receivers on free ports.

    ``exporter_endpoint=None`` uses ``--exporter blackhole`` (drop everything; the debug log still shows what
    arrived). Otherwise rotel forwards OTLP to ``exporter_endpoint`` with ``protocol`` ("grpc": e.g.
    ``http://127.0.0.1:<grpc port>``; "http": a base URL, rotel appends /v1/traces and /v1/metrics, or give
    ``traces_endpoint``/``metrics_endpoint`` with the full path).
    """

    def __init__(
        self,
        log_dir: Path,
        *,
        exporter_endpoint: str | None = None,
        protocol: str = "grpc",
        traces_endpoint: str | None = None,
        metrics_endpoint: str | None = None,
        batch_timeout: str = "50ms",
        name: str = "rotel",
        extra_args: Iterable[str] = (),
    ) -> None:
        if protocol not in ("grpc", "http"):
            raise ValueError(f"protocol must be grpc or http, not {protocol!r}")
        self.binary = rotel_binary()
        self.name = name
        self.grpc_port, self.http_port = free_ports(2)
        self.log_path = log_dir / f"{name}.log"
        argv: list[str] = [
            str(self.binary),
            "start",
            "--otlp-grpc-endpoint",
            f"{HOST}:{self.grpc_port}",
            "--otlp-http-endpoint",
            f"{HOST}:{self.http_port}",
            "--pid-file",
            str(log_dir / f"{name}.pid"),
            "--log-file",
            str(log_dir / f"{name}.agent.log"),
            "--debug-log",
            "traces",
            "--debug-log",
            "metrics",
            "--debug-log-verbosity",
            "detailed",
            "--batch-timeout",
            batch_timeout,
        ]
        if exporter_endpoint is None:
            argv += ["--exporter", "blackhole"]
        else:
            argv += [
                "--exporter",
                "otlp",
                "--otlp-exporter-endpoint",
                exporter_endpoint,
                "--otlp-exporter-protocol",
                protocol,
            ]
            if traces_endpoint:
                argv += ["--otlp-exporter-traces-endpoint", traces_endpoint]
            if metrics_endpoint:
                argv += ["--otlp-exporter-metrics-endpoint", metrics_endpoint]
        argv += list(extra_args)
        env = _clean_env()
        env["NO_COLOR"] = "1"
        self.process = BackendProcess(name, argv, self.log_path, env)
        self._last_size = -1

    # endpoints for SDK exporters
    @property
    def grpc_endpoint(self) -> str:
        """For ``OTLPSpanExporter(endpoint=..., insecure=True)`` of the gRPC exporters."""
        return f"{HOST}:{self.grpc_port}"

    @property
    def grpc_url(self) -> str:
        return f"http://{HOST}:{self.grpc_port}"

    @property
    def http_url(self) -> str:
        """Base URL (``OTEL_EXPORTER_OTLP_ENDPOINT`` style); the SDK HTTP exporters need the full signal path."""
        return f"http://{HOST}:{self.http_port}"

    @property
    def http_traces_url(self) -> str:
        return f"{self.http_url}/v1/traces"

    @property
    def http_metrics_url(self) -> str:
        return f"{self.http_url}/v1/metrics"

    def start(self, timeout: float = 15.0) -> Rotel:
        self.process.start()
        try:
            wait_until(
                lambda: port_open(self.grpc_port) and port_open(self.http_port),
                timeout,
                f"{self.name} to listen on {self.grpc_port}/{self.http_port}",
                interval=0.05,
                alive=self.process.check_alive,
                details=self.process.log_tail,
            )
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 10.0) -> int | None:
        return self.process.stop(timeout)

    def __enter__(self) -> Rotel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # debug output
    def output(self) -> str:
        """Everything rotel printed so far (debug output and its own log lines), colour codes removed."""
        return _ANSI.sub("", self.process.log_text())

    def log_lines(self) -> list[str]:
        """rotel's own log lines (``<timestamp> <LEVEL> message``), without the debug output."""
        return [ln for ln in self.output().splitlines() if _LOG_LINE.match(ln)]

    def problems(self) -> list[str]:
        """rotel's own WARN/ERROR log lines (failed exports, refused connections, ...)."""
        return [ln for ln in self.log_lines() if re.match(r"^\S+\s+(WARN|ERROR)\b", ln)]

    def spans(self) -> list[DebugSpan]:
        return parse_debug_spans(self.process.log_text())

    def metrics(self) -> list[DebugMetric]:
        return parse_debug_metrics(self.process.log_text())

    def _settled(self) -> bool:
        """True once the log stopped growing since the previous call: don't parse a batch half-written."""
        size = self.log_path.stat().st_size if self.log_path.exists() else 0
        settled, self._last_size = size == self._last_size, size
        return settled

    def wait_for_text(self, needle: str, timeout: float = 10.0) -> str:
        def probe() -> str | None:
            text = self.output()
            return text if needle in text else None

        return wait_until(
            probe,
            timeout,
            f"{needle!r} in {self.log_path}",
            alive=self.process.check_alive,
            details=self.process.log_tail,
        )

    def wait_for_spans(
        self, predicate: Callable[[list[DebugSpan]], bool], timeout: float = 10.0, what: str = "spans"
    ) -> list[DebugSpan]:
        """Poll the debug output until ``predicate(all spans so far)`` holds; returns the spans."""

        def probe() -> list[DebugSpan] | None:
            if not self._settled():
                return None
            spans = self.spans()
            return spans if predicate(spans) else None

        return wait_until(
            probe, timeout, f"{what} in {self.log_path}", alive=self.process.check_alive, details=self.process.log_tail
        )

    def wait_for_span(self, name: str, timeout: float = 10.0, trace_id: str | None = None) -> DebugSpan:
        def match(s: DebugSpan) -> bool:
            return s.name == name and (trace_id is None or s.trace_id == trace_id)

        spans = self.wait_for_spans(lambda ss: any(map(match, ss)), timeout, f"span {name!r}")
        return [s for s in spans if match(s)][-1]

    def wait_for_metrics(
        self, predicate: Callable[[list[DebugMetric]], bool], timeout: float = 10.0, what: str = "metrics"
    ) -> list[DebugMetric]:
        def probe() -> list[DebugMetric] | None:
            if not self._settled():
                return None
            metrics = self.metrics()
            return metrics if predicate(metrics) else None

        return wait_until(
            probe, timeout, f"{what} in {self.log_path}", alive=self.process.check_alive, details=self.process.log_tail
        )

    def wait_for_metric(self, name: str, timeout: float = 10.0) -> DebugMetric:
        """The most recent export of metric ``name`` (cumulative metrics are re-exported on every collection)."""
        metrics = self.wait_for_metrics(lambda ms: any(m.name == name for m in ms), timeout, f"metric {name!r}")
        return [m for m in metrics if m.name == name][-1]


# --------------------------------------------------------------------------------------------------------------
# Arize Phoenix


def phoenix_binary() -> Path:
    binary = PHOENIX_VENV / "bin" / "phoenix"
    if not os.access(binary, os.X_OK):
        raise BackendNotInstalled(f"Arize Phoenix not found at {binary}; {_INSTALL_HINT}")
    return binary


def phoenix_time_us(ts: str) -> int:
    """Phoenix's ISO timestamp (microsecond precision, +00:00) -> integer microseconds since the epoch."""
    dt = datetime.fromisoformat(ts)
    return (int(dt.timestamp()) * 1_000_000) + dt.microsecond


class Phoenix:
    """A real Arize Phoenix server (sqlite in ``workdir``), OTLP/HTTP on ``/v1/traces`` and OTLP/gRPC on its own port.

    Startup takes ~10 s here (first start runs the database migrations); share one per test session and
    separate tests by the resource attribute ``openinference.project.name`` (one Phoenix project each).
    """

    def __init__(self, workdir: Path, log_dir: Path) -> None:
        self.binary = phoenix_binary()
        self.port, self.grpc_port = free_ports(2)
        self.workdir = workdir
        self.log_path = log_dir / "phoenix.log"
        env = _clean_env()
        env.update(
            PHOENIX_WORKING_DIR=str(workdir),
            PHOENIX_HOST=HOST,
            PHOENIX_PORT=str(self.port),
            PHOENIX_GRPC_PORT=str(self.grpc_port),
            PHOENIX_TELEMETRY_ENABLED="false",
            PHOENIX_ENABLE_AUTH="false",
            PHOENIX_ENABLE_PROMETHEUS="false",
            PHOENIX_LOG_MIGRATIONS="false",
            # no attempts to reach the internet at startup (docs MCP server, WASM sandbox download): there
            # is no network here, and where egress hangs instead of failing they would delay startup
            PHOENIX_ALLOW_EXTERNAL_RESOURCES="false",
            PHOENIX_DISABLE_AGENT_ASSISTANT="true",
            PHOENIX_ENABLE_MCP_SERVER="false",
            PHOENIX_ALLOWED_SANDBOX_PROVIDERS="NONE",
        )
        self.process = BackendProcess("phoenix", [self.binary, "serve"], self.log_path, env)

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def traces_url(self) -> str:
        """OTLP/HTTP (protobuf) traces endpoint, for an SDK ``OTLPSpanExporter`` or rotel's HTTP exporter."""
        return f"{self.base_url}/v1/traces"

    @property
    def grpc_endpoint(self) -> str:
        """``host:port`` of the OTLP/gRPC receiver (for the SDK gRPC exporter with insecure=True)."""
        return f"{HOST}:{self.grpc_port}"

    @property
    def grpc_url(self) -> str:
        """``http://host:port`` of the OTLP/gRPC receiver (for rotel's gRPC exporter)."""
        return f"http://{HOST}:{self.grpc_port}"

    def start(self, timeout: float = 180.0) -> Phoenix:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.process.start()

        def healthy() -> bool:
            try:
                return http_get(f"{self.base_url}/healthz", timeout=2)[0] == 200 and port_open(self.grpc_port)
            except OSError:
                return False

        try:
            wait_until(
                healthy,
                timeout,
                "Phoenix /healthz",
                interval=0.25,
                alive=self.process.check_alive,
                details=self.process.log_tail,
            )
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 15.0) -> int | None:
        return self.process.stop(timeout)

    def __enter__(self) -> Phoenix:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _get_json(self, path: str, params: list[tuple[str, str]]) -> tuple[int, Any]:
        url = f"{self.base_url}{path}?{urllib.parse.urlencode(params)}"
        status, body = http_get(url, timeout=10)
        if status != 200:
            return status, body.decode(errors="replace")
        return status, json.loads(body)

    def _all_pages(self, path: str, params: list[tuple[str, str]]) -> list[dict[str, Any]] | None:
        """Every span of a paginated spans endpoint (follows ``next_cursor``); None while the project is unknown."""
        out: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            page_params = [*params, ("limit", "1000")] + ([("cursor", cursor)] if cursor else [])
            status, payload = self._get_json(path, page_params)
            if status == 404:  # "Project with name X not found" until its first span is stored
                return None
            if status != 200:
                raise BackendError(f"GET {path} -> {status}: {payload}")
            out.extend(payload["data"])
            cursor = payload.get("next_cursor")
            if not cursor:
                return out

    def project_spans(self, project: str) -> list[dict[str, Any]]:
        """Every span stored in ``project`` right now (no waiting); [] when the project does not exist."""
        return self._all_pages(f"/v1/projects/{project}/spans", []) or []

    def spans(
        self, project: str, trace_id: str | int, expected_count: int | None = None, timeout: float = 30.0
    ) -> list[dict[str, Any]]:
        """Poll ``GET /v1/projects/<project>/spans?trace_id=<hex>`` until ``expected_count`` spans are stored.

        Returns Phoenix's span JSON (insertion order). ``expected_count=None`` waits for at least one span.
        Returns as soon as at least ``expected_count`` are there; the caller asserts on the exact count.

        What Phoenix (20.26.1) keeps, verified against spans sent through rotel over both gRPC and HTTP:

        * ``name``, ``context.trace_id``/``span_id`` (hex), ``parent_id`` (hex or None), ``status_code``
          (UNSET/OK/ERROR) and ``status_message``, ``events`` (name, timestamp, attributes).
        * ``start_time``/``end_time`` as ISO-8601 strings with **microsecond** precision: the nanoseconds go
          through a float, so a value may be 1 us off the truncated one (compare with a 1 us tolerance).
        * attribute value types: str, bool, int (64-bit exact, e.g. 2**53+1), float (2.0 stays 2.0), and
          homogeneous arrays of each, also empty arrays; dotted keys stay flat (``"gen_ai.usage.input_tokens"``).
          Non-finite floats (inf/nan) are dropped.

        What it drops or changes:

        * OTel span kind (SERVER/CLIENT/...): ``span_kind`` here is the *OpenInference* kind, taken from the
          attribute ``openinference.span.kind`` (which is then removed from ``attributes``) or derived from
          GenAI conventions (``gen_ai.operation.name`` chat -> LLM, execute_tool -> TOOL), else UNKNOWN.
        * resource attributes (only ``openinference.project.name`` is used, to pick the project), scope, links.
        * It *adds* OpenInference attributes derived from GenAI ones, e.g. ``llm.token_count.prompt`` from
          ``gen_ai.usage.input_tokens`` and ``tool.name`` from ``gen_ai.tool.name``.

        :meth:`otlp_spans` returns the same spans in OTLP JSON shape (``kind`` always SPAN_KIND_INTERNAL).
        """
        return self._poll_spans(f"/v1/projects/{project}/spans", project, trace_id, expected_count, timeout)

    def otlp_spans(
        self, project: str, trace_id: str | int, expected_count: int | None = None, timeout: float = 30.0
    ) -> list[dict[str, Any]]:
        """Like :meth:`spans` from ``/v1/projects/<project>/spans/otlpv1`` (OTLP JSON: typed attribute values,
        ``start_time_unix_nano`` at microsecond precision, ``openinference.span.kind`` kept as an attribute)."""
        return self._poll_spans(f"/v1/projects/{project}/spans/otlpv1", project, trace_id, expected_count, timeout)

    def _poll_spans(
        self, path: str, project: str, trace_id: str | int, expected_count: int | None, timeout: float
    ) -> list[dict[str, Any]]:
        if "/" in project or "?" in project or "#" in project:
            raise ValueError(f"Phoenix project names cannot contain / ? #: {project!r}")
        tid = format(trace_id, "032x") if isinstance(trace_id, int) else trace_id
        want = 1 if expected_count is None else expected_count
        seen: list[dict[str, Any]] = []

        def probe() -> list[dict[str, Any]] | None:
            nonlocal seen
            spans = self._all_pages(path, [("trace_id", tid)])
            seen = spans or []
            return spans if spans is not None and len(spans) >= want else None

        return wait_until(
            probe,
            timeout,
            f"{want} span(s) of trace {tid} in Phoenix project {project!r}",
            interval=0.2,
            alive=self.process.check_alive,
            details=lambda: f"got {len(seen)}: {[s.get('name') for s in seen]}\n{self.process.log_tail(15)}",
        )


# --------------------------------------------------------------------------------------------------------------
# Prometheus


def prometheus_binary() -> Path:
    found = shutil.which("prometheus")
    if not found:
        raise BackendNotInstalled(f"`prometheus` is not on PATH; {_INSTALL_HINT}")
    return Path(found)


class Prometheus:
    """A real Prometheus (Debian 2.42) scraping ``targets`` (``host:port`` of /metrics endpoints) every second.

    Name translation by ``opentelemetry-exporter-prometheus`` 0.66b2 (what you query here):

    * dots become underscores; the unit becomes a suffix: ``s`` -> ``_seconds``, ``ms`` -> ``_milliseconds``,
      ``By`` -> ``_bytes``; curly-brace units (``{token}``, ``{call}``) add nothing;
      counters get ``_total``; histograms give ``<name>_bucket`` (label ``le``), ``<name>_sum``, ``<name>_count``.
      e.g. ``gen_ai.client.operation.duration`` (unit s) -> ``gen_ai_client_operation_duration_seconds_bucket``.
    * attribute keys become labels with dots -> underscores (``gen_ai.operation.name`` -> ``gen_ai_operation_name``),
      plus ``otel_scope_name``, ``otel_scope_version``, ``otel_scope_schema_url``; resource attributes go to a
      separate ``target_info`` series (``service_name``, ...), not onto each series.
    * ``le`` is printed as Python prints the boundary: ``1`` for an int boundary, ``1.0`` for a float one, and
      Prometheus 2.42 does not normalise it, so pass float boundaries and query ``le="1.0"``.
    Prometheus adds ``job`` and ``instance`` labels.
    """

    def __init__(
        self,
        targets: Sequence[str],
        workdir: Path,
        log_dir: Path,
        *,
        scrape_interval: str = "1s",
        job: str = "test",
        name: str = "prometheus",
    ) -> None:
        self.binary = prometheus_binary()
        self.port = free_port()
        self.job = job
        self.workdir = workdir
        self.log_path = log_dir / f"{name}.log"
        self.config_path = log_dir / f"{name}.yml"
        target_list = ", ".join(json.dumps(t) for t in targets)
        self.config_path.write_text(
            "global:\n"
            f"  scrape_interval: {scrape_interval}\n"
            f"  scrape_timeout: {scrape_interval}\n"
            f"  evaluation_interval: {scrape_interval}\n"
            "scrape_configs:\n"
            f"  - job_name: {json.dumps(job)}\n"
            "    static_configs:\n"
            f"      - targets: [{target_list}]\n"
        )
        argv = [
            self.binary,
            f"--config.file={self.config_path}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address={HOST}:{self.port}",
            "--storage.tsdb.retention.time=1h",
            "--log.level=info",
        ]
        self.process = BackendProcess(name, argv, self.log_path, _clean_env())

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self, timeout: float = 60.0) -> Prometheus:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.process.start()

        def ready() -> bool:
            try:
                return http_get(f"{self.base_url}/-/ready", timeout=2)[0] == 200
            except OSError:
                return False

        try:
            wait_until(
                ready, timeout, "Prometheus /-/ready", alive=self.process.check_alive, details=self.process.log_tail
            )
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 15.0) -> int | None:
        return self.process.stop(timeout)

    def __enter__(self) -> Prometheus:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _api(self, path: str, params: dict[str, str]) -> Any:
        status, body = http_get(f"{self.base_url}{path}?{urllib.parse.urlencode(params)}", timeout=10)
        payload = json.loads(body) if body else {}
        if status != 200 or payload.get("status") != "success":
            raise BackendError(f"Prometheus {path} {params} -> {status}: {body[:500]!r}")
        return payload["data"]

    def query(self, promql: str) -> list[dict[str, Any]]:
        """Instant query: ``data.result`` (each ``{"metric": {labels}, "value": [ts, "str value"]}``)."""
        return self._api("/api/v1/query", {"query": promql})["result"]

    def targets(self) -> list[dict[str, Any]]:
        return self._api("/api/v1/targets", {})["activeTargets"]

    def wait_for(
        self,
        promql: str,
        timeout: float = 30.0,
        predicate: Callable[[list[dict[str, Any]]], bool] | None = None,
    ) -> list[dict[str, Any]]:
        """Poll ``query(promql)`` until it returns a non-empty result (and ``predicate(result)`` holds)."""
        last: list[dict[str, Any]] = []

        def probe() -> list[dict[str, Any]] | None:
            nonlocal last
            last = self.query(promql)
            return last if last and (predicate is None or predicate(last)) else None

        def details() -> str:
            try:
                health = [(t["scrapeUrl"], t["health"], t["lastError"]) for t in self.targets()]
            except (OSError, BackendError) as err:
                health = [("?", "?", str(err))]
            return f"last result: {last}\ntargets: {health}\n{self.process.log_tail(10)}"

        return wait_until(
            probe, timeout, f"PromQL {promql!r}", interval=0.25, alive=self.process.check_alive, details=details
        )

"""README's "See it in Jaeger" without Docker, as a reader runs it: ``scripts/jaeger`` (Jaeger v2 and the
collector running ``collector-config/otelcol-jaeger.yaml``, built from Go), the demo exporting to the
collector, and the ``curl`` tag search README shows. The commands are README's own, with only the ports
changed (free ones, so that concurrent runs do not collide) and ``scripts/demo`` run as its module in the
tests' environment (``scripts/demo`` would make a ``.venv`` of its own).
"""

from __future__ import annotations

import json
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from otel_agent_profiler.live import attributes
from tests.support.backends import artifact_dir, free_ports, port_open, wait_until
from tests.support.go_backends import require_go_backends
from tests.support.paths import ROOT

pytestmark = pytest.mark.e2e

README = (ROOT / "README.md").read_text(encoding="utf-8")
DEMO_SERVICE = "research-agent-demo"
DEMO_SPANS = 15  # the demo's agent (tests/project/test_demo.py)


def readme_block(first_command: str) -> list[str]:
    """The commands of README's shell block that opens with ``first_command``, continuation lines joined."""
    for block in re.findall(r"^```sh\n(.*?)^```", README, re.S | re.M):
        joined = re.sub(r"\\\n\s*", " ", block)
        commands = [line.split(" #")[0].strip() for line in joined.splitlines() if line.strip()]
        if commands[0] == first_command:
            return commands
    raise AssertionError(f"README has no shell block opening with {first_command!r}")


@dataclass
class Ports:
    grpc: int
    http: int
    query: int
    others: dict[str, int]

    def env(self) -> dict[str, str]:
        """The ports as scripts/jaeger's environment variables."""
        named = {"OTELCOL_GRPC_PORT": self.grpc, "OTELCOL_HTTP_PORT": self.http, "JAEGER_QUERY_PORT": self.query}
        return {name: str(port) for name, port in {**named, **self.others}.items()}

    def readme_to_free(self, command: str) -> str:
        """A README command with its ports (the defaults) replaced by these."""
        return command.replace("localhost:4317", f"localhost:{self.grpc}").replace(
            "localhost:16686", f"localhost:{self.query}"
        )


def new_ports() -> Ports:
    grpc, http, query, query_grpc, jaeger_otlp, health, metrics = free_ports(7)
    others = {
        "JAEGER_QUERY_GRPC_PORT": query_grpc,
        "JAEGER_OTLP_PORT": jaeger_otlp,
        "OTELCOL_HEALTH_PORT": health,
        "OTELCOL_METRICS_PORT": metrics,
    }
    return Ports(grpc, http, query, others)


def script_env(ports: Ports, tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENAI_"))}
    return env | ports.env() | {"TMPDIR": str(tmp)}


class RunningScript:
    """scripts/jaeger started as README's command, in a session of its own (as a terminal would run it)."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.error_output = ""

    def ready_line(self, timeout: float = 120.0) -> str:
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            readable, _, _ = select.select([self.process.stdout], [], [], 0.5)
            if readable:
                line = self.process.stdout.readline()
                if line:
                    return line.strip()
            if self.process.poll() is not None:
                break
        self.stop(signal.SIGTERM)
        raise AssertionError(f"scripts/jaeger printed no ready line: {self.stderr()}")

    def stop(self, sig: int, *, group: bool = False, timeout: float = 30.0) -> int:
        """Send ``sig`` to the script (``group``: to it and its children, as a terminal's Ctrl-C does) and
        wait for it; if it does not end, kill the whole group so that no Jaeger is left behind."""
        if self.process.poll() is None:
            if group:
                os.killpg(self.process.pid, sig)
            else:
                self.process.send_signal(sig)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
            raise
        finally:
            self._close()

    def _close(self) -> None:
        if self.process.poll() is None:
            return
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None and not pipe.closed:
                if pipe is self.process.stderr:
                    self.error_output += pipe.read()
                pipe.close()

    def stderr(self) -> str:
        """What the script wrote to stderr, once it has ended."""
        self._close()
        return self.error_output


@dataclass
class ReadmeRun:
    ports: Ports
    ready: str
    found: dict[str, Any]  # what README's curl printed
    exit_code: int  # scripts/jaeger's, after Ctrl-C
    run_dirs: Path  # its TMPDIR


@pytest.fixture(scope="module")
def readme_run() -> Iterator[ReadmeRun]:
    require_go_backends()  # never build for 37 minutes inside a test: fail with the hint instead
    tmp = artifact_dir("e2e", __name__)
    ports = new_ports()
    (start,) = readme_block("scripts/jaeger")
    script = RunningScript(shlex.split(start), script_env(ports, tmp))
    try:
        ready = script.ready_line()
        demo, *search = readme_block("OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4317 scripts/demo")
        demo = ports.readme_to_free(demo).replace("scripts/demo", f"{shlex.quote(sys.executable)} -m demo")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENAI_"))}
        result = subprocess.run(["bash", "-c", demo], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
        (curl,) = search
        curl = ports.readme_to_free(curl)

        def searched() -> dict[str, Any] | None:
            # The collector and Jaeger batch for a few hundred milliseconds: ask until the trace is whole.
            out = subprocess.run(["bash", "-c", curl], capture_output=True, text=True, timeout=30)
            assert out.returncode == 0, out.stderr
            answer: dict[str, Any] = json.loads(out.stdout)
            data = answer.get("data") or []
            return answer if data and len(data[0]["spans"]) >= DEMO_SPANS else None

        found = wait_until(searched, 30, "README's tag search to find the demo's trace", interval=0.25)
        ports_open_before = [p for p in (ports.grpc, ports.http, ports.query) if port_open(p)]
        assert ports_open_before == [ports.grpc, ports.http, ports.query]
        exit_code = script.stop(signal.SIGINT, group=True)  # Ctrl-C: the terminal signals the whole group
        yield ReadmeRun(ports, ready, found, exit_code, tmp)
    finally:
        if script.process.poll() is None:
            script.stop(signal.SIGTERM)


def test_the_ready_line_says_where_to_send_otlp_and_where_jaegers_api_is(readme_run: ReadmeRun) -> None:
    ports = readme_run.ports
    assert readme_run.ready.startswith("ready: ")
    assert f"http://127.0.0.1:{ports.grpc} (gRPC)" in readme_run.ready
    assert f"http://127.0.0.1:{ports.http} (HTTP)" in readme_run.ready
    assert f"http://127.0.0.1:{ports.query}/api" in readme_run.ready


def test_the_readme_tag_search_finds_the_demo_trace_with_its_profile(readme_run: ReadmeRun) -> None:
    (trace,) = readme_run.found["data"]
    spans = trace["spans"]
    assert len(spans) == DEMO_SPANS
    assert {p["serviceName"] for p in trace["processes"].values()} == {DEMO_SERVICE}
    tags = [{tag["key"]: tag["value"] for tag in span.get("tags") or []} for span in spans]
    for found in tags:
        assert found[attributes.SELF_TIME_MS] >= 0
        assert found[attributes.CRITICAL_PATH_MS] >= 0
        assert found[attributes.CATEGORY] in {"llm", "embedding", "tool", "agent", "internal"}
    assert any(found[attributes.ON_CRITICAL_PATH] is True for found in tags)
    (root,) = [found for found in tags if attributes.TRACE_SPAN_COUNT in found]
    assert root[attributes.TRACE_SPAN_COUNT] == DEMO_SPANS
    assert root[attributes.TRACE_CRITICAL_PATH_MS] > 0


def test_ctrl_c_stops_jaeger_and_the_collector(readme_run: ReadmeRun) -> None:
    assert readme_run.exit_code == 0
    assert not list(readme_run.run_dirs.glob("otel-agent-profiler-jaeger.*"))  # its logs removed too
    ports = readme_run.ports
    assert [p for p in (ports.grpc, ports.http, ports.query, *ports.others.values()) if port_open(p)] == []


def test_sigterm_stops_both_and_the_ports_can_be_set_by_option(tmp_path: Path) -> None:
    require_go_backends()
    ports = new_ports()
    # The three ports README names by option, the others by environment variable.
    env = script_env(ports, tmp_path)
    for name in ("OTELCOL_GRPC_PORT", "OTELCOL_HTTP_PORT", "JAEGER_QUERY_PORT"):
        env[name] = "1"  # the options must win over these
    options = ["--otlp-grpc-port", str(ports.grpc), f"--otlp-http-port={ports.http}", "--jaeger-port", str(ports.query)]
    script = RunningScript([str(ROOT / "scripts" / "jaeger"), *options], env)
    try:
        ready = script.ready_line()
        assert f"http://127.0.0.1:{ports.grpc} (gRPC)" in ready and f"127.0.0.1:{ports.query}/api" in ready
        assert port_open(ports.grpc) and port_open(ports.http) and port_open(ports.query)
        assert script.stop(signal.SIGTERM) == 0  # to the script alone, as a service manager sends it
        assert not any(port_open(p) for p in (ports.grpc, ports.http, ports.query, *ports.others.values()))
    finally:
        if script.process.poll() is None:
            script.stop(signal.SIGKILL, group=True)


def test_a_port_taken_by_a_running_jaeger_is_one_line(tmp_path: Path) -> None:
    # A second scripts/jaeger on the ports of a running one: the first must keep running.
    require_go_backends()
    ports = new_ports()
    first = RunningScript([str(ROOT / "scripts" / "jaeger")], script_env(ports, tmp_path))
    try:
        first.ready_line()
        second = subprocess.run(
            [str(ROOT / "scripts" / "jaeger")],
            env=script_env(ports, tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 1
        assert second.stderr.strip() == (
            f"error: scripts/jaeger: port {ports.grpc} (127.0.0.1, for the collector's OTLP/gRPC receiver) is in use;"
            " free it or choose another with OTELCOL_GRPC_PORT=N or the option in scripts/jaeger --help"
        )
        assert first.process.poll() is None and port_open(ports.query)
    finally:
        first.stop(signal.SIGTERM)


def test_when_the_collector_dies_jaeger_is_stopped_and_one_line_says_so(tmp_path: Path) -> None:
    require_go_backends()
    ports = new_ports()
    script = RunningScript([str(ROOT / "scripts" / "jaeger")], script_env(ports, tmp_path))
    try:
        script.ready_line()
        children = Path(f"/proc/{script.process.pid}/task/{script.process.pid}/children").read_text().split()
        (collector,) = [pid for pid in children if "otelcol" in Path(f"/proc/{pid}/cmdline").read_text()]
        os.kill(int(collector), signal.SIGKILL)
        assert script.process.wait(30) == 1
        (line,) = script.stderr().strip().splitlines()
        assert line.startswith(
            "error: scripts/jaeger: the collector stopped (killed by signal 9); the last line of its log: "
        )
        log = Path(line.rsplit("(log: ", 1)[1].rstrip(")"))
        assert log.name == "otelcol.log" and log.is_file()  # kept for the reader
        assert not port_open(ports.query)  # Jaeger stopped with it
    finally:
        if script.process.poll() is None:
            script.stop(signal.SIGKILL, group=True)

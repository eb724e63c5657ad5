"""The conformance harness: run one source's app in its framework environment, collect its spans, check them.

Each app (tests/conformance/apps/) runs as a subprocess of its framework's virtual environment (created by
``scripts/test`` through scripts/_frameworks.sh) against the bundled fake OpenAI server started here, and
exports its spans over real OTLP/HTTP to a receiver started here, which writes them to an OTLP JSON Lines
file, the "exported file". The checks read that file twice: live (the ``agent_profiler.*`` attributes our
processor put on the spans inside the app) and offline (the analysis core on the file), and compare both with
what the fake server logged: how many calls, which tokens, when the first token went out.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToJson
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otel_agent_profiler import SpanProfile, TokenUsage, TraceProfile, profile_records, read_trace_file
from otel_agent_profiler.core.genai import strip_snapshot

ROOT = Path(__file__).resolve().parents[2]
APPS = Path(__file__).resolve().parent / "apps"
ROOT_SPAN = "conformance run"
SLOW_TOOL = "slow_search"
MEDIUM_TOOL = "medium_search"
FAST_TOOL = "fast_search"
#: The tools the model asks for in one response, which sleep 0.5, 0.25 and 0.05 s (apps/common.py)
TOOLS = (SLOW_TOOL, MEDIUM_TOOL, FAST_TOOL)
PREFIX = "agent_profiler."

#: Virtual environments by key; "main" is the one running the tests (it has the Traceloop instrumentation).
VENVS = {
    "frameworks": ROOT / ".venv-frameworks",
    "openai2": ROOT / ".venv-frameworks-openai2",
    "genai": ROOT / ".venv-frameworks-genai",
    "adk": ROOT / ".venv-frameworks-adk",
    "strands": ROOT / ".venv-frameworks-strands",
    "autogen-haystack-dspy": ROOT / ".venv-frameworks-autogen-haystack-dspy",
    "crewai": ROOT / ".venv-frameworks-crewai",
    "main": Path(sys.prefix),
}

# A streamed call's time to first token, as the client saw it, against the server's (which the client cannot
# beat, give or take clock reading): the client adds its own parsing, and the machine may be loaded.
TTFT_EARLY_SLACK_S = 0.01
TTFT_LATE_SLACK_S = 0.5


@dataclass(frozen=True)
class Records:
    """What an instrumentation records of an LLM call (what it leaves out is its own gap, not ours)."""

    #: cached input tokens; reasoning tokens, of plain and of streamed calls (the usage of a streamed call
    #: exists only when the client asked for it: see ``ServerCall.usage_sent``)
    cached: bool = True
    reasoning: bool = True
    stream_reasoning: bool = True
    #: time to first token of streamed calls (a chunk event or a time-to-first-chunk attribute)
    ttft: bool = True
    #: whether a streamed call's span lasts until the stream has been read
    span_covers_stream: bool = True


#: What each instrumentation that wrote LLM spans here records, by its instrumentation scope name.
PRODUCERS: dict[str, Records] = {
    "pydantic-ai": Records(),
    "openinference.instrumentation.openai": Records(),
    "openinference.instrumentation.openai_agents": Records(cached=False, reasoning=False, ttft=False),
    "openinference.instrumentation.langchain": Records(ttft=False),
    # it also marks OpenAI._prepare_chat_with_tools, which calls no model, as an LLM span (not counted)
    "openinference.instrumentation.llama_index": Records(span_covers_stream=False),
    "openinference.instrumentation.smolagents": Records(cached=False, reasoning=False, ttft=False),
    # opentelemetry-instrumentation-openai-v2 writes through opentelemetry-util-genai
    "opentelemetry.util.genai.handler": Records(cached=False, reasoning=False, ttft=False),
    # opentelemetry-instrumentation-genai-openai (TTFT as gen_ai.response.time_to_first_chunk)
    "opentelemetry.instrumentation.genai.openai": Records(),
    # Google ADK's own tracing (its streamed calls carry usage when LiteLLM asks for it)
    "gcp.vertex.agent": Records(ttft=False),
    # Strands Agents' own tracing: no reasoning tokens; TTFT as gen_ai.server.time_to_first_token (ms)
    "strands.telemetry.tracer": Records(reasoning=False),
    # an HTTP client span that is part of a call (core/call_parts.py) records nothing of the model's
    "opentelemetry.instrumentation.httpx": Records(cached=False, reasoning=False, ttft=False),
    "openinference.instrumentation.litellm": Records(ttft=False),
    # DSPy's LM.acall spans name the model and record no usage: the LiteLLM span inside each is the call
    "openinference.instrumentation.dspy": Records(cached=False, reasoning=False, ttft=False),
    # Traceloop's opentelemetry-instrumentation-openai
    "opentelemetry.instrumentation.openai.v1": Records(stream_reasoning=False),
}


def records_of(scope: str) -> Records:
    """What the instrumentation named ``scope`` records; a scope this suite does not know fails the test."""
    if scope not in PRODUCERS:
        pytest.fail(f"LLM spans from an instrumentation scope this suite does not know: {scope!r}", pytrace=False)
    return PRODUCERS[scope]


@dataclass(frozen=True)
class Source:
    """One telemetry source under test: its app, the environment it runs in, the LLM spans it writes."""

    name: str
    app: str
    venv: str
    #: instrumentation scope of the LLM spans counted when the app instruments itself (processor mode); under
    #: zero-code every installed instrumentor loads, so an instrumentation of the OpenAI client (ours pulls in
    #: Traceloop's) may write the innermost span of a call instead
    producer: str
    env: Mapping[str, str] = field(default_factory=dict)
    #: categories the source's spans must produce besides llm and tool
    categories: frozenset[str] = frozenset({"agent"})
    #: tools the framework itself calls besides the app's three (smolagents ends its run with final_answer)
    framework_tools: frozenset[str] = frozenset()
    #: how many of the app's three model calls stream (the last one, or all where the framework always streams)
    streamed_calls: int = 1
    #: what makes a test fail on this source: test name (or ``name[mode]``) -> (strict, reason); what the source
    #: itself gets wrong, or a defect of ours (its reason starts with "ours"); strict when the test fails every
    #: time, not strict when it depends on timing
    known_gaps: Mapping[str, tuple[bool, str]] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------------------------
# the OTLP/HTTP receiver that writes the exported file


class OtlpFileSink:
    """An OTLP/HTTP receiver on 127.0.0.1 that appends every trace export to an OTLP JSON Lines file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> OtlpFileSink:
        sink = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.path == "/v1/traces":
                    request = ExportTraceServiceRequest.FromString(body)
                    line = MessageToJson(request, indent=None)
                    with sink._lock, sink.path.open("a", encoding="utf-8") as out:
                        out.write(line + "\n")
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


# --------------------------------------------------------------------------------------------------------------
# running an app


def venv_python(source: Source) -> Path:
    venv = VENVS[source.venv]
    python = venv / "bin" / "python"
    if not python.exists():
        pytest.fail(f"{venv} is missing: scripts/test builds it (scripts/_frameworks.sh)", pytrace=False)
    return python


#: How an app runs: the profiler installed in the code or zero-code, each without and with the httpx
#: instrumentation's HTTP client spans (many apps have it; each LLM call then has one more span below it).
MODES = ("processor", "processor+httpx", "zero-code", "zero-code+httpx")
WITH_HTTPX = "+httpx"


def launch_of(mode: str) -> str:
    """``processor`` or ``zero-code``: how the profiler gets into the app in ``mode``."""
    return mode.removesuffix(WITH_HTTPX)


def run_app(source: Source, mode: str, llm_url: str, otlp_url: str, log_dir: Path, timeout: float = 120) -> str:
    """Run ``source``'s app to completion; return the trace id of its root span."""
    python = venv_python(source)
    command = [str(python), str(APPS / source.app)]
    launch, httpx = launch_of(mode), mode.endswith(WITH_HTTPX)
    if launch == "zero-code":
        # the interpreter by path: opentelemetry-instrument looks a bare `python` up on PATH
        command = [str(python.parent / "opentelemetry-instrument"), *command]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENAI_", "TRACELOOP_", "CONFORMANCE_"))}
    env.update(
        # this checkout's package, whichever environment runs the app
        PYTHONPATH=str(ROOT),
        OPENAI_BASE_URL=llm_url,
        OPENAI_API_KEY="conformance",
        CONFORMANCE_MODE=launch,
        CONFORMANCE_HTTPX="1" if httpx else "0",
        CONFORMANCE_OTLP_ENDPOINT=otlp_url,
        OTEL_SERVICE_NAME=f"conformance-{source.name}",
        OTEL_EXPORTER_OTLP_ENDPOINT=otlp_url,
        OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
        OTEL_METRICS_EXPORTER="none",
        OTEL_LOGS_EXPORTER="none",
        # frameworks' own tracing services and model hubs stay out (no network but the fake server's); the
        # Agents SDK's export to its service is replaced by the OpenInference instrumentor (exclusive by default)
        LANGCHAIN_TRACING_V2="false",
        HF_HUB_OFFLINE="1",
    )
    env.update(source.env)
    if launch == "zero-code" and not httpx:
        disabled = [name for name in env.get("OTEL_PYTHON_DISABLED_INSTRUMENTATIONS", "").split(",") if name]
        # the httpx instrumentation registers two instrumentors: httpx's and httpx2's (which openai 3 uses)
        env["OTEL_PYTHON_DISABLED_INSTRUMENTATIONS"] = ",".join([*disabled, "httpx", "httpx2"])
    proc = subprocess.run(
        command, env=env, cwd=log_dir, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout
    )
    (log_dir / "app.stdout").write_text(proc.stdout)
    (log_dir / "app.stderr").write_text(proc.stderr)
    assert proc.returncode == 0, f"{source.name} ({mode}): exit code {proc.returncode}\n{proc.stderr[-4000:]}"
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, f"{source.name} ({mode}) printed no result line; stdout: {proc.stdout[-2000:]!r}"
    return str(json.loads(lines[-1])["trace_id"])


# --------------------------------------------------------------------------------------------------------------
# what the fake server saw


@dataclass(frozen=True)
class ServerCall:
    started: float
    model: str
    stream: bool
    #: whether the response carried the usage (a stream only when the client asked with include_usage)
    usage_sent: bool
    usage: TokenUsage
    ttft_s: float | None
    #: from the request's arrival to the answer's last byte, as the server logged them
    duration_s: float


def server_calls(requests: list[dict[str, Any]]) -> list[ServerCall]:
    calls = []
    for entry in requests:
        if entry["path"] != "/v1/chat/completions" or entry["status"] != 200:
            continue
        usage = TokenUsage(
            entry["prompt_tokens"], entry["completion_tokens"], entry["cached_tokens"], entry["reasoning_tokens"]
        )
        first = entry.get("first_token")
        ttft = first - entry["started"] if first is not None else None
        duration = entry["finished"] - entry["started"]
        calls.append(
            ServerCall(
                entry["started"], entry["model"], bool(entry["stream"]), entry["usage_sent"], usage, ttft, duration
            )
        )
    return sorted(calls, key=lambda call: call.started)


def expected_tokens_by_model(
    pairs: list[tuple[SpanProfile, ServerCall]], scopes: Mapping[str, str]
) -> dict[str, TokenUsage]:
    """The tokens the counted LLM spans should report, by model family: what the server counted for each call,
    less what the instrumentation that wrote the span leaves out."""
    expected: dict[str, TokenUsage] = {}
    for span, call in pairs:
        records = records_of(scopes[span.span_id])
        if not call.usage_sent:
            continue
        reasoning = records.reasoning and (records.stream_reasoning or not call.stream)
        usage = TokenUsage(
            call.usage.input,
            call.usage.output,
            call.usage.cached_input if records.cached else 0,
            call.usage.reasoning if reasoning else 0,
        )
        expected.setdefault(strip_snapshot(call.model), TokenUsage()).add(usage)
    return expected


def counted_llm_calls(profile: TraceProfile, calls: list[ServerCall]) -> list[tuple[SpanProfile, ServerCall]]:
    """Each counted LLM span with the server call it made (the apps make their calls one after another)."""
    counted = sorted((s for s in profile.spans if s.category == "llm" and s.counted), key=lambda s: s.start_ns)
    assert len(counted) == len(calls), (
        f"{len(counted)} LLM calls counted, the server answered {len(calls)}: {[(s.name, s.start_ns) for s in counted]}"
    )
    return list(zip(counted, calls, strict=True))


def reported_by_family(tokens_by_model: Mapping[str, TokenUsage]) -> dict[str, TokenUsage]:
    """Tokens per model as reported, keys unchanged: the report itself names every model by its family.

    The one place that decides how reported model names are compared. Sources name one model differently
    (OpenInference writes the answering snapshot, ``o4-mini-2025-04-16``; the GenAI conventions the
    requested ``o4-mini``); the analysis groups snapshots under their family, so a snapshot as a key fails.
    """
    snapshots = [model for model in tokens_by_model if strip_snapshot(model) != model]
    assert not snapshots, f"models reported by snapshot, not by family: {snapshots}"
    return dict(tokens_by_model)


def snapshot_recorded(attributes: Mapping[str, Any], family: str) -> str | None:
    """The dated snapshot of ``family`` that a span's attributes name, if any (in whichever attribute)."""
    for value in attributes.values():
        if isinstance(value, str) and value != family and value.startswith(family) and strip_snapshot(value) == family:
            return value
    return None


# --------------------------------------------------------------------------------------------------------------
# reading the exported file


@dataclass
class Exported:
    profiles: list[TraceProfile]
    main: TraceProfile
    live: dict[str, dict[str, Any]]  # span id -> its attributes as exported (with ours)
    scopes: dict[str, str]  # span id -> the name of the instrumentation scope that wrote it


def read_export(path: Path, trace_id: str) -> Exported:
    trace_file = read_trace_file(path)
    assert not trace_file.problems, trace_file.problems
    profiles = profile_records(trace_file.records)
    by_id = {p.trace_id: p for p in profiles}
    assert trace_id in by_id, f"trace {trace_id} not exported; traces: {sorted(by_id)}"
    live = {r.span_id: dict(r.attributes) for r in trace_file.records if r.trace_id == trace_id}
    return Exported(profiles, by_id[trace_id], live, scopes_of(path))


def scopes_of(path: Path) -> dict[str, str]:
    """Span id (hex) -> instrumentation scope name, from an OTLP JSON Lines file of protobuf's JSON mapping."""
    scopes = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        for resource_spans in json.loads(line).get("resourceSpans", []):
            for scope_spans in resource_spans.get("scopeSpans", []):
                name = scope_spans.get("scope", {}).get("name", "")
                for span in scope_spans.get("spans", []):
                    scopes[base64.b64decode(span["spanId"]).hex()] = name
    return scopes


def tool_span(profile: TraceProfile, name: str) -> SpanProfile:
    found = [s for s in profile.spans if s.category == "tool" and s.operation == name]
    names = [(s.name, s.category, s.operation) for s in profile.spans]
    assert len(found) == 1, f"expected one tool span {name!r}, found {len(found)}; spans: {names}"
    return found[0]

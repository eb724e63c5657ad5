"""The ``serve`` subcommand's command line: help, defaults, bad values, ports in use."""

from __future__ import annotations

import socket

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otel_agent_profiler import cli
from otel_agent_profiler.cli.serve import profile_options
from otel_agent_profiler.core.categories import classify
from otel_agent_profiler.service import forwarder
from otel_agent_profiler.service.app import ServeConfig
from otel_agent_profiler.service.pipeline import Pipeline, PipelineConfig
from tests.support.backends import wait_until

GPT_4O_MINI = '{"gpt-4o-mini": {"input": 0.1, "output": 0.5}}'
MY_LLM = '{"my-llm": {"input": 7, "output": 21}}'

OPTIONS = (
    "--host",
    "--http-port",
    "--grpc-port",
    "--upstream",
    "--upstream-protocol",
    "--quiet-period",
    "--max-trace-age",
    "--max-traces",
    "--max-spans-per-trace",
    "--max-request-bytes",
    "--max-upstream-request-bytes",
    "--max-pending-spans",
    "--max-memory-mib",
    "--shutdown-grace",
    "--metrics-interval",
    "--category-overrides",
    "--prices",
    "--context-windows",
)


def test_serve_help_lists_every_option_and_the_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["serve", "--help"])
    assert exit_info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for option in OPTIONS:
        assert option in text
    for fact in (
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "/v1/traces",
        "/health",
        "/profiles",
        "/programs",
        "SIGTERM",
        "SIGHUP",
        "4194304",
        "3670016",
        "partial-success",
        "503",
    ):
        assert fact in text, fact


def test_top_help_mentions_serve(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "serve" in capsys.readouterr().out


def test_defaults_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_PROTOCOL", raising=False)
    args = cli._build_parser().parse_args(["serve"])
    assert (args.host, args.http_port, args.grpc_port) == ("127.0.0.1", 4318, 4317)
    assert args.upstream is None and args.upstream_protocol == "grpc"
    assert (args.quiet_period, args.max_traces, args.max_spans_per_trace) == (5.0, 1000, 10_000)
    assert args.max_request_bytes == 4 * 1024 * 1024
    # The CLI does not import the forwarder (gRPC) to build its help: the default is repeated there.
    assert (
        args.max_upstream_request_bytes
        == forwarder.DEFAULT_MAX_REQUEST_BYTES
        == ServeConfig().max_upstream_request_bytes
    )
    assert args.max_trace_age == 60.0 == PipelineConfig().max_trace_age_s
    assert (args.max_memory_mib, args.shutdown_grace) == (256, 30.0)

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    args = cli._build_parser().parse_args(["serve"])
    assert args.upstream == "http://collector:4318" and args.upstream_protocol == "http"
    args = cli._build_parser().parse_args(["serve", "--upstream", "http://other:4317", "--upstream-protocol", "grpc"])
    assert args.upstream == "http://other:4317" and args.upstream_protocol == "grpc"


@pytest.mark.parametrize(
    "args",
    [
        ["--http-port", "70000"],
        ["--grpc-port", "x"],
        ["--quiet-period", "-1"],
        ["--quiet-period", "nan"],
        ["--max-traces", "0"],
        ["--max-request-bytes", "0"],
        ["--max-memory-mib", "0"],
        ["--shutdown-grace", "-1"],
        ["--max-trace-age", "0"],
        ["--max-trace-age", "inf"],
        ["--max-upstream-request-bytes", "0"],
        ["--upstream-protocol", "thrift"],
        ["--category-overrides", "fetch_*=nonsense"],
        ["--category-overrides", "no-equals-sign"],
        ["--prices", "{not json"],
    ],
)
def test_bad_values_are_usage_errors(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["serve", *args])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("otel-agent-profiler serve: error: ")


def test_bad_upstream_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(
        ["serve", "--http-port", "0", "--grpc-port", "0", "--upstream", "ftp://x", "--upstream-protocol", "http"]
    )
    assert code == cli.EXIT_BAD_INPUT
    assert "cannot serve" in capsys.readouterr().err


@pytest.mark.parametrize("which", ["--http-port", "--grpc-port"])
def test_port_in_use_is_an_error(which: str, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        args = {"--http-port": "0", "--grpc-port": "0", which: str(port)}
        code = cli.main(["serve", *[x for pair in args.items() for x in pair]])
    assert code == cli.EXIT_BAD_INPUT
    assert "cannot serve" in capsys.readouterr().err


# -- the profile's options: the option, else the in-process profiler's variable, else none --------------------


def _category_and_prices(argv: list[str], environ: dict[str, str]) -> tuple[str, list[float | None]]:
    """The category of a fetch_weather span, and the input prices of gpt-4o, gpt-4o-mini and my-llm."""
    options = profile_options(cli._build_parser().parse_args(["serve", *argv]), environ)
    category = options.classifier("fetch_weather", {})
    assert options.prices is not None
    prices = [options.prices.price_of(model) for model in ("gpt-4o", "gpt-4o-mini", "my-llm")]
    return category, [None if price is None else price.input for price in prices]


#: The built-in input prices of gpt-4o and gpt-4o-mini, and none for my-llm.
BUILT_IN = [2.5, 0.15, None]


@pytest.mark.parametrize(
    ("argv", "environ", "category", "priced"),
    [
        ([], {}, None, BUILT_IN),  # None: what the conventions say
        (["--category-overrides", "fetch_*=retrieval"], {}, "retrieval", BUILT_IN),
        ([], {"OTEL_AGENT_PROFILER_CATEGORY_OVERRIDES": "fetch_*=memory"}, "memory", BUILT_IN),
        (
            ["--category-overrides", "fetch_*=retrieval"],
            {"OTEL_AGENT_PROFILER_CATEGORY_OVERRIDES": "fetch_*=memory"},
            "retrieval",
            BUILT_IN,
        ),
        # A table given is laid over the built-in one, as the offline commands do.
        (["--prices", MY_LLM], {}, None, [2.5, 0.15, 7.0]),
        ([], {"OTEL_AGENT_PROFILER_PRICES": GPT_4O_MINI}, None, [2.5, 0.1, None]),
        (["--prices", MY_LLM], {"OTEL_AGENT_PROFILER_PRICES": GPT_4O_MINI}, None, [2.5, 0.15, 7.0]),
        ([], {"OTEL_AGENT_PROFILER_PRICES": " "}, None, BUILT_IN),
        # An empty table prices nothing.
        (["--prices", "{}"], {}, None, [None, None, None]),
        ([], {"OTEL_AGENT_PROFILER_PRICES": "{}"}, None, [None, None, None]),
    ],
)
def test_profile_options_come_from_the_option_then_the_variable_then_the_default(
    argv: list[str], environ: dict[str, str], category: str | None, priced: list[float | None]
) -> None:
    assert _category_and_prices(argv, environ) == (category or classify("fetch_weather", {}), priced)


@pytest.mark.parametrize(
    ("argv", "environ", "windows"),
    [
        ([], {}, (None, 128_000)),
        (["--context-windows", '{"my-llm": 32000}'], {}, (32_000, 128_000)),
        ([], {"OTEL_AGENT_PROFILER_CONTEXT_WINDOWS": '{"my-llm": 8000, "gpt-4o": 64000}'}, (8_000, 64_000)),
        (
            ["--context-windows", '{"my-llm": 32000}'],
            {"OTEL_AGENT_PROFILER_CONTEXT_WINDOWS": '{"my-llm": 8000}'},
            (32_000, 128_000),
        ),
    ],
)
def test_context_windows_come_from_the_option_then_the_variable_over_the_built_in_ones(
    argv: list[str], environ: dict[str, str], windows: tuple[int | None, int]
) -> None:
    options = profile_options(cli._build_parser().parse_args(["serve", *argv]), environ)
    assert (options.context_windows.get("my-llm"), options.context_windows["gpt-4o"]) == windows


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("OTEL_AGENT_PROFILER_CATEGORY_OVERRIDES", "fetch_*=nonsense"),
        ("OTEL_AGENT_PROFILER_PRICES", "{not json"),
        ("OTEL_AGENT_PROFILER_CONTEXT_WINDOWS", '{"my-llm": 0}'),
    ],
)
def test_an_unusable_variable_stops_serve_naming_it(
    variable: str, value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(variable, value)
    code = cli.main(["serve", "--http-port", "0", "--grpc-port", "0"])
    assert code == cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("otel-agent-profiler: error: cannot serve: ") and variable in err


def test_an_agent_profiler_category_attribute_beats_the_overrides() -> None:
    options = profile_options(cli._build_parser().parse_args(["serve", "--category-overrides", "fetch_*=tool"]), {})
    assert options.classifier("fetch_x", {"agent_profiler.category": "memory"}) == "memory"


def test_the_profiles_endpoint_uses_the_context_windows_serve_was_given() -> None:
    request = ExportTraceServiceRequest()
    span = (
        request.resource_spans.add()
        .scope_spans.add()
        .spans.add(name="chat my-llm", start_time_unix_nano=1_000, end_time_unix_nano=2_000)
    )
    span.trace_id = (9).to_bytes(16, "big")
    span.span_id = (1).to_bytes(8, "big")
    for key, value in (("gen_ai.operation.name", "chat"), ("gen_ai.request.model", "my-llm")):
        span.attributes.add(key=key).value.string_value = value
    span.attributes.add(key="gen_ai.usage.input_tokens").value.int_value = 500
    options = profile_options(cli._build_parser().parse_args(["serve", "--context-windows", '{"my-llm": 1000}']), {})
    pipeline = Pipeline(PipelineConfig(quiet_period_s=0, profile_options=options), None)
    try:
        pipeline.receive(request)
        wait_until(lambda: pipeline.profile(f"{9:032x}") is not None, 10, "the trace profiled")
        profile = pipeline.profile(f"{9:032x}")
        assert profile is not None
        assert [s["context_window_use"] for s in profile["spans"]] == [0.5]
    finally:
        pipeline.stop()

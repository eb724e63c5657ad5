"""The ``serve`` subcommand's command line: help, defaults, bad values, ports in use."""

from __future__ import annotations

import socket

import pytest

from otel_agent_profiler import cli
from otel_agent_profiler.cli.serve import profile_options
from otel_agent_profiler.core.categories import classify

GPT_4O_MINI = '{"gpt-4o-mini": {"input": 0.1, "output": 0.5}}'
MY_LLM = '{"my-llm": {"input": 7, "output": 21}}'

OPTIONS = (
    "--host",
    "--http-port",
    "--grpc-port",
    "--upstream",
    "--upstream-protocol",
    "--quiet-period",
    "--max-traces",
    "--max-spans-per-trace",
    "--max-request-bytes",
    "--max-pending-spans",
    "--max-memory-mib",
    "--shutdown-grace",
    "--metrics-interval",
    "--category-overrides",
    "--prices",
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
        "4194304",
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
    ("variable", "value"),
    [("OTEL_AGENT_PROFILER_CATEGORY_OVERRIDES", "fetch_*=nonsense"), ("OTEL_AGENT_PROFILER_PRICES", "{not json")],
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

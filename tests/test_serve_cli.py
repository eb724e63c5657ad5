"""The ``serve`` subcommand's command line: help, defaults, bad values, ports in use."""

from __future__ import annotations

import socket

import pytest

from otel_agent_profiler import cli

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

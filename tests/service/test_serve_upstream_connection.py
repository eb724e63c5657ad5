"""What ``serve`` sends its upstream besides the data: headers from the options or the OpenTelemetry
variables (percent-decoding, precedence per signal), compression, the TLS files; and every bad value as
one line naming the option or variable, never the secret."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from otel_agent_profiler import cli
from otel_agent_profiler.service.app import ProfilingService, ServeConfig
from otel_agent_profiler.service.forwarder import make_exporter
from otel_agent_profiler.service.signals import LOGS, METRICS, TRACES
from otel_agent_profiler.service.upstream_connection import (
    UpstreamConnection,
    UpstreamTls,
    header_option,
    parse_headers_variable,
    resolve_compression,
    resolve_headers,
    resolve_tls,
)
from tests.support.authenticated_upstream import Pki, make_pki

SECRET = "s3cret-value-77"


@pytest.fixture(autouse=True)
def no_exporter_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("OTEL_EXPORTER_OTLP_"):
            monkeypatch.delenv(name)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization=Bearer abc", ("authorization", "Bearer abc")),
        ("X-Scope-OrgID=tenant-1", ("x-scope-orgid", "tenant-1")),
        ("authorization=Basic dXNlcjpwYXNz==", ("authorization", "Basic dXNlcjpwYXNz==")),  # '=' in the value
        ("api-key=a%20b", ("api-key", "a%20b")),  # an option is taken as written
        (" x-empty = ", ("x-empty", "")),
    ],
)
def test_an_option_header_is_taken_as_written(text: str, expected: tuple[str, str]) -> None:
    assert header_option(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (SECRET, "expected KEY=VALUE"),
        (f"={SECRET}", "expected KEY=VALUE"),
        (f"bad name={SECRET}", "not a header name"),
        (f"grpc-timeout={SECRET}", "not a header name"),
        (f"Content-Type={SECRET}", "set by serve itself"),
        (f"authorization={SECRET}\r\nx-injected: 1", "line break"),
        (f"authorization={SECRET}é", "printable ASCII"),
    ],
)
def test_a_bad_header_is_refused_without_repeating_its_value(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as error:
        header_option(text)
    assert SECRET not in str(error.value)


def test_a_variable_is_key_value_pairs_percent_decoded() -> None:
    assert parse_headers_variable("Authorization=Bearer%20abc%3D%3D, X-Scope-OrgID = tenant%2C1 ,,") == (
        ("authorization", "Bearer abc=="),
        ("x-scope-orgid", "tenant,1"),
    )
    with pytest.raises(ValueError, match="key=value pairs") as error:
        parse_headers_variable(f"authorization=ok,{SECRET}")
    assert SECRET not in str(error.value)


GIVEN = (("authorization", "from-option"),)


@pytest.mark.parametrize(
    ("given", "environ", "traces", "logs"),
    [
        (None, {}, (), ()),
        (None, {"OTEL_EXPORTER_OTLP_HEADERS": "a=generic"}, (("a", "generic"),), (("a", "generic"),)),
        (
            None,
            {"OTEL_EXPORTER_OTLP_HEADERS": "a=generic,b=2", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "a=traces"},
            (("a", "traces"),),  # the signal's variable replaces the generic one whole
            (("a", "generic"), ("b", "2")),
        ),
        (
            None,
            {"OTEL_EXPORTER_OTLP_HEADERS": "a=generic", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": " "},
            (("a", "generic"),),
            (("a", "generic"),),
        ),
        (
            GIVEN,
            {"OTEL_EXPORTER_OTLP_HEADERS": "a=generic", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "a=traces"},
            GIVEN,
            GIVEN,
        ),
    ],
)
def test_headers_precedence_option_then_signal_variable_then_generic(
    given: tuple[tuple[str, str], ...] | None,
    environ: dict[str, str],
    traces: tuple[tuple[str, str], ...],
    logs: tuple[tuple[str, str], ...],
) -> None:
    assert resolve_headers(TRACES, given, environ) == traces
    assert resolve_headers(LOGS, given, environ) == logs


def test_a_bad_variable_is_named_and_its_value_not_shown() -> None:
    environ = {"OTEL_EXPORTER_OTLP_METRICS_HEADERS": f"authorization={SECRET}%0Ax-injected=1"}
    with pytest.raises(ValueError, match=r"^OTEL_EXPORTER_OTLP_METRICS_HEADERS: .*line break") as error:
        resolve_headers(METRICS, None, environ)
    assert SECRET not in str(error.value)
    assert resolve_headers(TRACES, None, environ) == ()  # another signal does not read it


@pytest.mark.parametrize(
    ("given", "environ", "traces", "metrics"),
    [
        (None, {}, "none", "none"),
        (None, {"OTEL_EXPORTER_OTLP_COMPRESSION": "GZIP"}, "gzip", "gzip"),
        (
            None,
            {"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "none"},
            "none",
            "gzip",
        ),
        ("none", {"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"}, "none", "none"),
    ],
)
def test_compression_precedence(given: str | None, environ: dict[str, str], traces: str, metrics: str) -> None:
    assert resolve_compression(TRACES, given, environ) == traces
    assert resolve_compression(METRICS, given, environ) == metrics


def test_an_unknown_compression_is_an_error_naming_the_variable() -> None:
    with pytest.raises(ValueError, match="OTEL_EXPORTER_OTLP_LOGS_COMPRESSION: expected gzip or none, got 'zstd'"):
        resolve_compression(LOGS, None, {"OTEL_EXPORTER_OTLP_LOGS_COMPRESSION": "zstd"})


def test_tls_files_are_checked(pki: Pki, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs its key"):
        UpstreamTls(client_cert_file=str(pki.client_cert))
    with pytest.raises(ValueError, match="cannot load --upstream-ca"):
        UpstreamTls(ca_file=str(tmp_path / "missing.pem")).ssl_context()
    with pytest.raises(ValueError, match="cannot load the client certificate"):
        UpstreamTls(str(pki.ca), str(pki.client_cert), str(pki.server_key)).ssl_context()  # a key of another
    tls = UpstreamTls(str(pki.ca), str(pki.client_cert), str(pki.client_key))
    for protocol in ("grpc", "http"):
        with pytest.raises(ValueError, match="need an https:// upstream"):
            make_exporter("http://127.0.0.1:4317", protocol, connection=UpstreamConnection(tls=tls))
        make_exporter("https://127.0.0.1:4317", protocol, connection=UpstreamConnection(tls=tls)).close()


OPTIONS = UpstreamTls("option-ca.pem", "option-cert.pem", "option-key.pem")
CA, CERT, KEY = (
    "OTEL_EXPORTER_OTLP_CERTIFICATE",
    "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
    "OTEL_EXPORTER_OTLP_CLIENT_KEY",
)
TRACES_CA, TRACES_CERT, TRACES_KEY = (name.replace("OTLP_", "OTLP_TRACES_") for name in (CA, CERT, KEY))


@pytest.mark.parametrize(
    ("given", "environ", "secure", "traces", "logs"),
    [
        (UpstreamTls(), {}, True, (None, None, None), (None, None, None)),
        (
            UpstreamTls(),
            {CA: "ca.pem", CERT: "cert.pem", KEY: "key.pem"},
            True,
            ("ca.pem", "cert.pem", "key.pem"),
            ("ca.pem", "cert.pem", "key.pem"),
        ),
        (  # each setting: the signal's variable before the generic one
            UpstreamTls(),
            {CA: "ca.pem", TRACES_CA: "traces-ca.pem", CERT: "cert.pem", KEY: "key.pem", TRACES_KEY: "traces-key.pem"},
            True,
            ("traces-ca.pem", "cert.pem", "traces-key.pem"),
            ("ca.pem", "cert.pem", "key.pem"),
        ),
        (UpstreamTls(), {CA: " ", TRACES_CA: ""}, True, (None, None, None), (None, None, None)),  # empty: unset
        (  # the options before every variable
            OPTIONS,
            {CA: "ca.pem", TRACES_CA: "traces-ca.pem", TRACES_CERT: "c.pem", TRACES_KEY: "k.pem"},
            True,
            ("option-ca.pem", "option-cert.pem", "option-key.pem"),
            ("option-ca.pem", "option-cert.pem", "option-key.pem"),
        ),
        (  # a CA option, the client certificate from the variables
            UpstreamTls("option-ca.pem"),
            {CA: "ca.pem", CERT: "cert.pem", KEY: "key.pem"},
            True,
            ("option-ca.pem", "cert.pem", "key.pem"),
            ("option-ca.pem", "cert.pem", "key.pem"),
        ),
        (  # an http:// upstream: the variables are for secure connections only, as in the SDK
            UpstreamTls(),
            {CA: "ca.pem", CERT: "cert.pem", KEY: "key.pem"},
            False,
            (None, None, None),
            (None, None, None),
        ),
    ],
)
def test_tls_files_precedence_option_then_signal_variable_then_generic(
    given: UpstreamTls,
    environ: dict[str, str],
    secure: bool,
    traces: tuple[str | None, ...],
    logs: tuple[str | None, ...],
) -> None:
    for signal, expected in ((TRACES, traces), (LOGS, logs)):
        tls = resolve_tls(signal, given, environ, secure)
        assert (tls.ca_file, tls.client_cert_file, tls.client_key_file) == expected, signal.name


def test_a_client_certificate_variable_without_its_key_is_an_error_naming_both() -> None:
    with pytest.raises(ValueError, match=f"^{TRACES_CERT} needs {TRACES_KEY} or {KEY}: "):
        resolve_tls(TRACES, UpstreamTls(), {TRACES_CERT: "cert.pem"}, secure=True)
    with pytest.raises(ValueError, match=f"^{KEY} needs OTEL_EXPORTER_OTLP_LOGS_CLIENT_CERTIFICATE or {CERT}: "):
        resolve_tls(LOGS, UpstreamTls(), {KEY: "key.pem"}, secure=True)


def test_a_tls_file_from_a_variable_that_cannot_be_loaded_names_the_variable(pki: Pki, tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.pem")
    with pytest.raises(ValueError, match=f"cannot load {TRACES_CA} {missing}"):
        resolve_tls(TRACES, UpstreamTls(), {TRACES_CA: missing, CA: str(pki.ca)}, secure=True).ssl_context()
    mismatched = {CERT: str(pki.client_cert), KEY: str(pki.server_key)}
    with pytest.raises(ValueError, match=f"cannot load the client certificate .* \\({CERT} and {KEY}\\)"):
        resolve_tls(TRACES, UpstreamTls(), mismatched, secure=True).ssl_context()


def test_the_header_values_are_in_no_repr() -> None:
    config = ServeConfig(
        upstream="http://127.0.0.1:1", upstream_headers=(("authorization", SECRET),), shutdown_grace_s=0.1
    )
    assert SECRET not in repr(config)
    assert SECRET not in repr(UpstreamConnection(headers=(("authorization", SECRET),)))
    service = ProfilingService(config)
    described = service.describe_upstream()
    service.stop()
    assert "traces: headers authorization (values not shown), compression none" in described
    assert SECRET not in described


# -- the command line -------------------------------------------------------------------------------------


def test_help_names_the_options_and_variables(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["serve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for fact in (
        "--upstream-header KEY=VALUE",
        "--upstream-compression {gzip,none}",
        "--upstream-ca PATH",
        "--upstream-client-cert PATH",
        "--upstream-client-key PATH",
        "$OTEL_EXPORTER_OTLP_HEADERS",
        "$OTEL_EXPORTER_OTLP_<SIGNAL>_HEADERS",
        "$OTEL_EXPORTER_OTLP_COMPRESSION",
        "$OTEL_EXPORTER_OTLP_<SIGNAL>_CERTIFICATE, else $OTEL_EXPORTER_OTLP_CERTIFICATE",
        "$OTEL_EXPORTER_OTLP_<SIGNAL>_CLIENT_CERTIFICATE, else $OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
        "$OTEL_EXPORTER_OTLP_<SIGNAL>_CLIENT_KEY, else $OTEL_EXPORTER_OTLP_CLIENT_KEY",
        "Each of these options, given, beats its variables",
    ):
        assert fact in text, fact


@pytest.mark.parametrize(
    "args",
    [
        ["--upstream-header", SECRET],
        ["--upstream-header", f"Content-Length={SECRET}"],
        ["--upstream-compression", "zstd"],
    ],
)
def test_bad_option_values_are_one_line_and_exit_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["serve", "--upstream", "http://127.0.0.1:1", *args])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("otel-agent-profiler serve: error: ")
    assert SECRET not in err


def test_bad_setups_are_one_line_and_exit_2(
    pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ports = ["--http-port", "0", "--grpc-port", "0"]
    https = ["--upstream", "https://127.0.0.1:1"]
    for args, message in (
        ([*https, "--upstream-client-cert", str(pki.client_cert)], "go together"),
        (["--upstream-header", "a=b"], "--upstream-header needs an upstream"),
        ([*https, "--upstream-ca", str(tmp_path / "missing.pem")], "cannot load --upstream-ca"),
        (["--upstream", "http://127.0.0.1:1", "--upstream-ca", str(pki.ca)], "need an https:// upstream"),
    ):
        assert cli.main(["serve", *ports, *args]) == cli.EXIT_BAD_INPUT, args
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, (args, err)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"{SECRET}")
    assert cli.main(["serve", *ports, *https]) == cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot serve: OTEL_EXPORTER_OTLP_HEADERS: expected key=value pairs" in err
    assert SECRET not in err
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_HEADERS")
    for environ, message in (
        ({CERT: str(pki.client_cert)}, f"cannot serve: {CERT} needs OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY or {KEY}"),
        ({CA: str(tmp_path / "missing.pem")}, f"cannot serve: cannot load {CA} {tmp_path / 'missing.pem'}"),
    ):
        with monkeypatch.context() as patched:
            for name, value in environ.items():
                patched.setenv(name, value)
            assert cli.main(["serve", *ports, *https]) == cli.EXIT_BAD_INPUT, environ
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and message in err, (environ, err)
            # For an http:// upstream the variables are not read: serve starts (and is stopped here at once).
            config = ServeConfig(upstream="http://127.0.0.1:1", shutdown_grace_s=0.1)
            ProfilingService(config).stop()

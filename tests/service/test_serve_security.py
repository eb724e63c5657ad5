"""The receivers' optional TLS and bearer token, in-process: HTTPS and gRPC over TLS with a self-signed
certificate, 401 / UNAUTHENTICATED without the token, the OTel SDK's exporters end to end, and the CLI."""

from __future__ import annotations

import http.client
import json
import logging
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc  # type: ignore[import-untyped]
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_agent_profiler import cli
from otel_agent_profiler.service import app
from otel_agent_profiler.service.app import ProfilingService, ServeConfig
from otel_agent_profiler.service.pipeline import PipelineConfig
from otel_agent_profiler.service.receivers import BearerToken
from tests.support.backends import http_exchange

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
TOKEN = "s3cr3t-T0ken_for.tests~"


def _spans(count: int = 3) -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "security-test"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
        for i in range(count - 1):
            with tracer.start_as_current_span(
                f"execute_tool t{i}", attributes={"gen_ai.operation.name": "execute_tool"}
            ):
                pass
    provider.shutdown()
    return list(exporter.get_finished_spans())


def _body(count: int = 3) -> bytes:
    body: bytes = encode_spans(_spans(count)).SerializeToString()
    return body


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost, and its key."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.fail("these tests need the openssl command on PATH to make a test certificate")
    directory = tmp_path_factory.mktemp("tls")
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-keyout",
            str(key_path),
            "-out",
            str(cert_path),
        ],
        check=True,
        capture_output=True,
    )
    return cert_path, key_path


def _config(**kwargs: Any) -> ServeConfig:
    return ServeConfig(http_port=0, grpc_port=0, pipeline=PipelineConfig(quiet_period_s=0.1), **kwargs)


@pytest.fixture
def tls_service(cert: tuple[Path, Path]) -> Iterator[ProfilingService]:
    with ProfilingService(_config(tls_cert=str(cert[0]), tls_key=str(cert[1]))) as svc:
        yield svc


@pytest.fixture
def token_service() -> Iterator[ProfilingService]:
    with ProfilingService(_config(bearer_token=TOKEN)) as svc:
        yield svc


@pytest.fixture
def secure_service(cert: tuple[Path, Path]) -> Iterator[ProfilingService]:
    with ProfilingService(_config(tls_cert=str(cert[0]), tls_key=str(cert[1]), bearer_token=TOKEN)) as svc:
        yield svc


def _request(
    url: str,
    *,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    context: ssl.SSLContext | None = None,
) -> tuple[int, dict[str, str], bytes]:
    all_headers = {"Content-Type": "application/x-protobuf", **(headers or {})}
    request = urllib.request.Request(url, data=body, headers=all_headers, method="POST" if body else "GET")
    return http_exchange(request, context=context)


def _grpc_export(
    port: int, body: bytes, *, root: bytes | None = None, metadata: list[tuple[str, str]] | None = None
) -> grpc.StatusCode:
    target = f"127.0.0.1:{port}"
    channel = (
        grpc.insecure_channel(target)
        if root is None
        else grpc.secure_channel(target, grpc.ssl_channel_credentials(root_certificates=root))
    )
    with channel:
        call = channel.unary_unary(EXPORT, request_serializer=None, response_deserializer=None)
        try:
            ExportTraceServiceResponse.FromString(call(body, timeout=10, metadata=metadata))
        except grpc.RpcError as err:
            return err.code()
    return grpc.StatusCode.OK


def _health(base: str, context: ssl.SSLContext | None = None) -> dict[str, Any]:
    status, _, body = _request(f"{base}/health", context=context)
    assert status == 200
    return json.loads(body)  # type: ignore[no-any-return]


def _wait_profiled(base: str, count: int, context: ssl.SSLContext | None = None) -> dict[str, Any]:
    deadline = time.monotonic() + 10
    while True:
        health = _health(base, context)
        if health["counts"]["profiled"] >= count or time.monotonic() > deadline:
            return health
        time.sleep(0.05)


def test_off_by_default() -> None:
    config = ServeConfig()
    assert config.tls_cert is config.tls_key is config.bearer_token is None
    args = cli._build_parser().parse_args(["serve"])
    assert args.tls_cert is args.tls_key is args.bearer_token_file is None


def test_tls_on_http_and_grpc(tls_service: ProfilingService, cert: tuple[Path, Path]) -> None:
    context = ssl.create_default_context(cafile=str(cert[0]))
    base = f"https://127.0.0.1:{tls_service.http_port}"
    status, headers, _ = _request(f"{base}/v1/traces", body=_body(), context=context)
    assert status == 200 and headers["Content-Type"] == "application/x-protobuf"
    # Also by name: the certificate is for localhost as well. A client that connects and never starts the
    # handshake does not hold up the others (the handshake is done on the connection's own thread).
    with socket.create_connection(("127.0.0.1", tls_service.http_port)):
        assert _request(f"https://localhost:{tls_service.http_port}/health", context=context)[0] == 200

    # Plain HTTP to the TLS port gets no answer, and a client that does not trust the certificate refuses it.
    with pytest.raises((OSError, http.client.HTTPException)):
        _request(f"http://127.0.0.1:{tls_service.http_port}/v1/traces", body=_body())
    with pytest.raises(urllib.error.URLError) as refused:
        _request(f"{base}/v1/traces", body=_body(), context=ssl.create_default_context())
    assert isinstance(refused.value.reason, ssl.SSLCertVerificationError)

    root = cert[0].read_bytes()
    assert _grpc_export(tls_service.grpc_port, _body(2), root=root) == grpc.StatusCode.OK
    assert _grpc_export(tls_service.grpc_port, _body(2)) == grpc.StatusCode.UNAVAILABLE

    health = _wait_profiled(base, 5, context)
    assert health["counts"]["received"] == 5 and health["counts"]["profiled"] == 5
    # The service still answers after the failed handshakes.
    assert _request(f"{base}/profiles", context=context)[0] == 200


def test_bearer_token_over_http(token_service: ProfilingService, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    base = f"http://127.0.0.1:{token_service.http_port}"
    url = f"{base}/v1/traces"
    for headers, error in (
        ({}, None),
        ({"Authorization": "Bearer wrong"}, "invalid_token"),
        ({"Authorization": f"Bearer {TOKEN}x"}, "invalid_token"),
        ({"Authorization": f"Basic {TOKEN}"}, "invalid_token"),
        ({"Authorization": TOKEN}, "invalid_token"),
    ):
        status, answer_headers, answer = _request(url, body=_body(), headers=headers)
        assert status == 401, headers
        challenge = answer_headers["WWW-Authenticate"]
        assert challenge.startswith("Bearer") and ('error="invalid_token"' in challenge) == (error is not None)
        assert json.loads(answer)["code"] == 401
    # JSON requests too, and the answer comes before the path is looked at.
    assert _request(url, body=b"{}", headers={"Content-Type": "application/json"})[0] == 401
    assert _request(f"{base}/elsewhere", body=b"x")[0] == 401
    assert _health(base)["counts"]["received"] == 0

    good = {"Authorization": f"Bearer {TOKEN}"}
    spans = _spans()
    status, _, _ = _request(url, body=encode_spans(spans).SerializeToString(), headers=good)
    assert status == 200
    assert _request(url, body=_body(), headers={"Authorization": f"bearer  {TOKEN} "})[0] == 200
    health = _wait_profiled(base, 6)
    assert health["counts"]["received"] == 6

    # /health needs no token; /profiles and /profiles/{trace_id} do: they show span names and timings.
    trace_id = f"{spans[0].context.trace_id:032x}"
    for path in ("/profiles", f"/profiles/{trace_id}", "/nothing"):
        status, answer_headers, _ = _request(f"{base}{path}")
        assert status == 401 and answer_headers["WWW-Authenticate"].startswith("Bearer"), path
    status, _, body = _request(f"{base}/profiles", headers=good)
    assert status == 200 and json.loads(body)["trace_count"] == 2
    status, _, body = _request(f"{base}/profiles/{trace_id}", headers=good)
    assert status == 200 and json.loads(body)["span_count"] == 3
    assert _request(f"{base}/nothing", headers=good)[0] == 404

    assert "bearer token" in caplog.text
    assert TOKEN not in caplog.text


def test_bearer_token_over_grpc(token_service: ProfilingService, caplog: pytest.LogCaptureFixture) -> None:
    port = token_service.grpc_port
    for metadata in (
        None,
        [("authorization", "Bearer wrong")],
        [("authorization", f"Basic {TOKEN}")],
        [("authorization", f"Bearer {TOKEN}"), ("authorization", "Bearer wrong")],
    ):
        assert _grpc_export(port, _body(), metadata=metadata) == grpc.StatusCode.UNAUTHENTICATED, metadata
    base = f"http://127.0.0.1:{token_service.http_port}"
    assert _health(base)["counts"]["received"] == 0
    assert _grpc_export(port, _body(), metadata=[("authorization", f"Bearer {TOKEN}")]) == grpc.StatusCode.OK
    assert _wait_profiled(base, 3)["counts"]["received"] == 3
    assert TOKEN not in caplog.text


def test_sdk_exporters_get_through_tls_and_token(
    secure_service: ProfilingService, cert: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # requests (under the HTTP exporter) lets these override the exporter's certificate_file.
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    cert_file = str(cert[0])
    auth = {"authorization": f"Bearer {TOKEN}"}
    http_endpoint = f"https://127.0.0.1:{secure_service.http_port}/v1/traces"
    grpc_endpoint = f"127.0.0.1:{secure_service.grpc_port}"
    credentials = grpc.ssl_channel_credentials(root_certificates=cert[0].read_bytes())

    exporters = [
        HttpSpanExporter(endpoint=http_endpoint, certificate_file=cert_file, headers=auth, timeout=10),
        GrpcSpanExporter(endpoint=grpc_endpoint, insecure=False, credentials=credentials, headers=auth, timeout=10),
    ]
    wrong = {"authorization": "Bearer nope"}
    rejected = [
        HttpSpanExporter(endpoint=http_endpoint, certificate_file=cert_file, headers=wrong, timeout=10),
        HttpSpanExporter(endpoint=http_endpoint, certificate_file=cert_file, timeout=10),
        GrpcSpanExporter(endpoint=grpc_endpoint, insecure=False, credentials=credentials, headers=wrong, timeout=10),
        GrpcSpanExporter(endpoint=grpc_endpoint, insecure=False, credentials=credentials, timeout=10),
    ]
    try:
        for exporter in rejected:
            assert exporter.export(_spans()) == SpanExportResult.FAILURE
        for exporter in exporters:
            assert exporter.export(_spans()) == SpanExportResult.SUCCESS
    finally:
        for exporter in exporters + rejected:
            exporter.shutdown()
    context = ssl.create_default_context(cafile=cert_file)
    health = _wait_profiled(f"https://127.0.0.1:{secure_service.http_port}", 6, context)
    assert health["counts"]["received"] == 6 and health["counts"]["profiled"] == 6


def test_bearer_token_is_validated_and_never_shown() -> None:
    token = BearerToken(TOKEN)
    assert TOKEN not in repr(token) and TOKEN not in repr(ServeConfig(bearer_token=TOKEN))
    assert token.accepts(f"Bearer {TOKEN}") and token.accepts(f"BEARER {TOKEN}")
    assert not token.accepts(None) and not token.accepts("") and not token.accepts("Bearer")
    assert not token.accepts(f"Bearer {TOKEN[:-1]}") and not token.accepts(f"Bearer {TOKEN} extra")
    assert not token.accepts("Bearer ünïcode")
    for bad in ("", "has space", "tab\there", "ünïcode"):
        with pytest.raises(ValueError):
            BearerToken(bad)


def test_tls_configuration_errors(cert: tuple[Path, Path], tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="both"):
        ProfilingService(_config(tls_cert=str(cert[0])))
    with pytest.raises(ValueError, match="both"):
        ProfilingService(_config(tls_key=str(cert[1])))
    with pytest.raises(ValueError, match="cannot load TLS certificate"):
        ProfilingService(_config(tls_cert=str(tmp_path / "missing.pem"), tls_key=str(cert[1])))
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    with pytest.raises(ValueError, match="cannot load TLS certificate"):
        ProfilingService(_config(tls_cert=str(garbage), tls_key=str(cert[1])))
    with pytest.raises(ValueError, match="cannot load TLS certificate"):
        # The certificate as its own key: the key does not parse.
        ProfilingService(_config(tls_cert=str(cert[0]), tls_key=str(cert[0])))


@pytest.fixture
def captured_config(monkeypatch: pytest.MonkeyPatch) -> list[ServeConfig]:
    """Make ``serve`` record its configuration instead of serving."""
    seen: list[ServeConfig] = []

    def fake_run(config: ServeConfig, ready: object = None) -> int:
        seen.append(config)
        return 0

    monkeypatch.setattr(app, "run", fake_run)
    monkeypatch.delenv(cli.TOKEN_ENV, raising=False)
    return seen


def test_cli_options(
    captured_config: list[ServeConfig],
    cert: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["serve", "--help"])
    assert exit_info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for fact in ("--tls-cert", "--tls-key", "--bearer-token-file", cli.TOKEN_ENV, "/health", "401"):
        assert fact in text, fact

    assert cli.main(["serve"]) == 0
    assert captured_config[-1].tls_cert is None and captured_config[-1].bearer_token is None

    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    args = ["serve", "--tls-cert", str(cert[0]), "--tls-key", str(cert[1]), "--bearer-token-file", str(token_file)]
    assert cli.main(args) == 0
    config = captured_config[-1]
    assert (config.tls_cert, config.tls_key, config.bearer_token) == (str(cert[0]), str(cert[1]), TOKEN)

    monkeypatch.setenv(cli.TOKEN_ENV, "from-the-environment")
    assert cli.main(["serve"]) == 0
    assert captured_config[-1].bearer_token == "from-the-environment"
    assert cli.main(["serve", "--bearer-token-file", str(token_file)]) == 0
    assert captured_config[-1].bearer_token == TOKEN
    capsys.readouterr()

    for bad, code, message in (
        (["--tls-cert", str(cert[0])], cli.EXIT_BAD_INPUT, "--tls-key"),
        (["--tls-key", str(cert[1])], cli.EXIT_BAD_INPUT, "--tls-cert"),
        (["--bearer-token-file", str(tmp_path / "missing")], cli.EXIT_BAD_INPUT, "cannot read --bearer-token-file"),
    ):
        assert cli.main(["serve", *bad]) == code
        assert message in capsys.readouterr().err
    (tmp_path / "empty").write_text("\n")
    assert cli.main(["serve", "--bearer-token-file", str(tmp_path / "empty")]) == cli.EXIT_BAD_INPUT
    assert "is empty" in capsys.readouterr().err


def test_cli_reports_bad_tls_files_and_tokens(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "missing.pem")
    code = cli.main(["serve", "--http-port", "0", "--grpc-port", "0", "--tls-cert", missing, "--tls-key", missing])
    assert code == cli.EXIT_BAD_INPUT
    assert "cannot serve: cannot load TLS certificate" in capsys.readouterr().err
    token_file = tmp_path / "token"
    token_file.write_text("two words\n")
    code = cli.main(["serve", "--http-port", "0", "--grpc-port", "0", "--bearer-token-file", str(token_file)])
    assert code == cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "cannot serve" in err and "two words" not in err

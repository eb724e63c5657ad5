"""An OTLP upstream that wants credentials, as an authenticated collector or SaaS backend does.

Neither rotel nor the other backends here can require a token or a client certificate on their
receivers, so this one is built on grpcio and ``http.server``, with real TLS: it serves OTLP/gRPC
and OTLP/HTTP (protobuf, gzip or not) over TLS with a certificate from its own CA, asks every
client for a certificate signed by that CA (mutual TLS: a client without one fails the handshake),
and answers UNAUTHENTICATED / 401 to a request whose ``authorization`` header is not the expected
one. Every request it accepted is kept, with the headers it came with.

:func:`make_pki` makes the CA, the server's certificate (for 127.0.0.1 and localhost) and a
client certificate with the ``openssl`` command.
"""

from __future__ import annotations

import gzip
import shutil
import ssl
import subprocess
import threading
from collections.abc import Mapping
from concurrent import futures
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc  # type: ignore[import-untyped]

from otel_agent_profiler.service.signals import LOGS, METRICS, TRACES, Signal

HOST = "127.0.0.1"
SIGNALS = (TRACES, METRICS, LOGS)


@dataclass(frozen=True)
class Pki:
    """PEM files: the CA, the server's certificate and key, a client certificate and key."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def make_pki(directory: Path) -> Pki:
    """A CA, and a server and a client certificate it signed (EC P-256, valid for a day)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RuntimeError("the openssl command is needed to make the test certificates")

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], check=True, capture_output=True, cwd=directory)

    def key(name: str) -> None:
        run("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", f"{name}.key")

    key("ca")
    run("req", "-x509", "-new", "-key", "ca.key", "-days", "1", "-subj", "/CN=test upstream CA", "-out", "ca.pem")
    for name, extensions in (
        ("server", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"),
        ("client", "extendedKeyUsage=clientAuth\n"),
    ):
        key(name)
        run("req", "-new", "-key", f"{name}.key", "-subj", f"/CN=test {name}", "-out", f"{name}.csr")
        (directory / f"{name}.ext").write_text(extensions)
        run(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            f"{name}.ext",
            "-out",
            f"{name}.pem",
        )
    return Pki(
        directory / "ca.pem",
        directory / "server.pem",
        directory / "server.key",
        directory / "client.pem",
        directory / "client.key",
    )


@dataclass
class Received:
    """One request the upstream accepted: its signal, the request and the headers (lower-case names)."""

    signal: Signal
    request: Any
    headers: dict[str, str] = field(default_factory=dict)


class AuthenticatedUpstream:
    """OTLP/gRPC and OTLP/HTTP over mutual TLS, each request needing ``authorization: <expected>``.

    ``required`` maps further header names to the values they must have (``x-scope-orgid``, ...).
    """

    def __init__(self, pki: Pki, authorization: str, required: Mapping[str, str] | None = None) -> None:
        self.pki = pki
        self.required = {"authorization": authorization, **(required or {})}
        self.received: list[Received] = []
        self.refused = 0
        self._lock = threading.Lock()
        self._grpc: grpc.Server | None = None
        self._http: ThreadingHTTPServer | None = None
        self.grpc_port = self.http_port = 0

    @property
    def grpc_url(self) -> str:
        return f"https://{HOST}:{self.grpc_port}"

    @property
    def http_url(self) -> str:
        return f"https://{HOST}:{self.http_port}"

    def items(self, signal: Signal) -> int:
        with self._lock:
            return sum(signal.count(r.request) for r in self.received if r.signal is signal)

    def headers_seen(self) -> list[dict[str, str]]:
        with self._lock:
            return [r.headers for r in self.received]

    def _authorized(self, headers: Mapping[str, str]) -> bool:
        ok = all(headers.get(name) == value for name, value in self.required.items())
        if not ok:
            with self._lock:
                self.refused += 1
        return ok

    def _keep(self, signal: Signal, request: Any, headers: Mapping[str, str]) -> None:
        with self._lock:
            self.received.append(Received(signal, request, dict(headers)))

    def start(self) -> AuthenticatedUpstream:
        self._start_grpc()
        self._start_http()
        return self

    def stop(self) -> None:
        if self._grpc is not None:
            self._grpc.stop(None)
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()

    def __enter__(self) -> AuthenticatedUpstream:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _start_grpc(self) -> None:
        upstream = self

        def handler(signal: Signal) -> grpc.RpcMethodHandler:
            def export(request: Any, context: grpc.ServicerContext) -> Any:
                headers = {key: value for key, value in context.invocation_metadata() if isinstance(value, str)}
                if not upstream._authorized(headers):
                    context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong credentials")
                upstream._keep(signal, request, headers)
                return signal.response_class()

            return grpc.unary_unary_rpc_method_handler(
                export,
                request_deserializer=signal.request_class.FromString,
                response_serializer=signal.response_class.SerializeToString,
            )

        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        for signal in SIGNALS:
            server.add_generic_rpc_handlers(
                (grpc.method_handlers_generic_handler(signal.grpc_service, {"Export": handler(signal)}),)
            )
        credentials = grpc.ssl_server_credentials(
            [(self.pki.server_key.read_bytes(), self.pki.server_cert.read_bytes())],
            root_certificates=self.pki.ca.read_bytes(),
            require_client_auth=True,
        )
        self.grpc_port = server.add_secure_port(f"{HOST}:0", credentials)
        server.start()
        self._grpc = server

    def _start_http(self) -> None:
        upstream = self
        by_path = {signal.http_path: signal for signal in SIGNALS}

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                headers = {key.lower(): value for key, value in self.headers.items()}
                signal = by_path.get(self.path)
                if signal is None:
                    self._answer(404)
                elif not upstream._authorized(headers):
                    self._answer(401)
                else:
                    if headers.get("content-encoding") == "gzip":
                        body = gzip.decompress(body)
                    upstream._keep(signal, signal.request_class.FromString(body), headers)
                    self._answer(200, signal.response_class().SerializeToString())

            def _answer(self, status: int, body: bytes = b"") -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(self.pki.ca))
        context.load_cert_chain(self.pki.server_cert, self.pki.server_key)
        context.verify_mode = ssl.CERT_REQUIRED

        class TlsServer(ThreadingHTTPServer):
            daemon_threads = True

            def get_request(self) -> Any:
                sock, address = super().get_request()
                # The handshake in the handler's thread, so that a client refused there does not stop the server.
                return context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), address

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a client without a certificate: its handshake fails, as it should

        server = TlsServer((HOST, 0), Handler)
        self.http_port = server.server_address[1]
        self._http = server
        threading.Thread(target=server.serve_forever, name="authenticated-upstream-http", daemon=True).start()

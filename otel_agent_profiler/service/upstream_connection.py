"""How ``serve`` reaches an upstream that wants credentials: headers, a private CA, a client certificate, gzip.

Each comes from ``serve``'s options, else from the OpenTelemetry exporter variables as the
specification defines them, per signal: ``OTEL_EXPORTER_OTLP_TRACES_HEADERS`` (``_METRICS_``,
``_LOGS_``) beats ``OTEL_EXPORTER_OTLP_HEADERS``, and each replaces the other whole, as the SDK's
exporters do; the options replace both. The same goes for ``..._COMPRESSION``, ``..._CERTIFICATE``
(the CA), ``..._CLIENT_CERTIFICATE`` and ``..._CLIENT_KEY``; the TLS files are read for an
``https://`` upstream only, as the SDK's exporters use them only for a secure connection. The
header variables hold ``key=value`` pairs separated by commas, percent-decoded
(``Authorization=Bearer%20abc``); an option is taken as written. An empty variable counts as unset.

Header values are secrets (tokens, API keys): nothing here puts one in a message, a ``repr`` or a
log line. A header that cannot be sent raises ``ValueError`` naming the header, never its value.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..core.key_value_text import split_pairs

if TYPE_CHECKING:
    import ssl

    import grpc  # type: ignore[import-untyped]

    from .signals import Signal

#: Headers sent with every request to the upstream, for every signal (``key=value,...``, percent-encoded values).
OTEL_EXPORTER_OTLP_HEADERS = "OTEL_EXPORTER_OTLP_HEADERS"
#: Compression of the requests to the upstream, for every signal: ``gzip`` or ``none``.
OTEL_EXPORTER_OTLP_COMPRESSION = "OTEL_EXPORTER_OTLP_COMPRESSION"
#: PEM CA certificate(s) an ``https://`` upstream is verified with, for every signal (``--upstream-ca``).
OTEL_EXPORTER_OTLP_CERTIFICATE = "OTEL_EXPORTER_OTLP_CERTIFICATE"
#: PEM client certificate shown to an ``https://`` upstream, for every signal (``--upstream-client-cert``).
OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE = "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE"
#: PEM private key (unencrypted) of that client certificate, for every signal (``--upstream-client-key``).
OTEL_EXPORTER_OTLP_CLIENT_KEY = "OTEL_EXPORTER_OTLP_CLIENT_KEY"

COMPRESSIONS = ("gzip", "none")

#: Header names as HTTP and gRPC metadata both accept them (a token, which gRPC wants in lower case).
_HEADER_NAME = re.compile(r"^[0-9a-z!#$%&'*+.^_`|~-]+$")
#: Printable ASCII and tabs inside: a line break would start another header, and gRPC metadata is ASCII.
_HEADER_VALUE = re.compile(r"^[\x20-\x7e\t]*$")
#: Headers the transport sets itself; sending others under these names would break the request.
_RESERVED = frozenset(
    {"content-type", "content-length", "content-encoding", "transfer-encoding", "host", "connection", "te"}
)

Headers = tuple[tuple[str, str], ...]


def signal_variable(signal: Signal, setting: str) -> str:
    """The signal's own variable for ``setting``: ``OTEL_EXPORTER_OTLP_TRACES_HEADERS`` and so on."""
    return f"OTEL_EXPORTER_OTLP_{signal.name.upper()}_{setting}"


def checked_header(key: str, value: str) -> tuple[str, str]:
    """``(key, value)`` with the key in lower case; raises ``ValueError`` for one that cannot be sent."""
    name = key.strip().lower()
    if not _HEADER_NAME.match(name) or name.startswith("grpc-"):
        raise ValueError(f"{key.strip()!r} is not a header name that can be sent")
    if name in _RESERVED:
        raise ValueError(f"the header {name!r} is set by serve itself")
    if not _HEADER_VALUE.match(value):
        raise ValueError(f"the value of the header {name!r} has a line break or a character outside printable ASCII")
    return name, value.strip()


def header_option(text: str) -> tuple[str, str]:
    """One ``--upstream-header KEY=VALUE``, taken as written (no percent-decoding)."""
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        # The text may be the secret itself: say what is wrong without repeating it.
        raise ValueError("expected KEY=VALUE")
    return checked_header(key, value)


def parse_headers_variable(text: str) -> Headers:
    """The headers of an ``OTEL_EXPORTER_OTLP_*HEADERS`` value: ``key=value`` pairs, percent-decoded."""
    try:
        pairs = split_pairs(text, "key=value pairs")
    except ValueError:
        raise ValueError("expected key=value pairs separated by commas") from None
    return tuple(checked_header(urllib.parse.unquote(k), urllib.parse.unquote(v)) for k, v in pairs)


def _variable(environ: Mapping[str, str], signal: Signal, setting: str) -> tuple[str, str] | None:
    """The signal's variable for ``setting`` if set, else the generic one, as (name, value); None when neither."""
    for name in (signal_variable(signal, setting), f"OTEL_EXPORTER_OTLP_{setting}"):
        value = environ.get(name, "").strip()
        if value:
            return name, value
    return None


def resolve_headers(signal: Signal, given: Headers | None, environ: Mapping[str, str]) -> Headers:
    """``given`` (the options), else the signal's variable, else the generic one, else none.

    Raises ``ValueError`` naming the variable when its value cannot be used.
    """
    if given is not None:
        return given
    found = _variable(environ, signal, "HEADERS")
    if found is None:
        return ()
    name, value = found
    try:
        return parse_headers_variable(value)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


def resolve_compression(signal: Signal, given: str | None, environ: Mapping[str, str]) -> str:
    """``given`` (the option), else the signal's variable, else the generic one, else ``none``."""
    if given is not None:
        return given
    found = _variable(environ, signal, "COMPRESSION")
    if found is None:
        return "none"
    name, value = found
    if value.lower() not in COMPRESSIONS:
        raise ValueError(f"{name}: expected gzip or none, got {value!r}")
    return value.lower()


def resolve_tls(signal: Signal, given: UpstreamTls, environ: Mapping[str, str], secure: bool) -> UpstreamTls:
    """The CA and the client certificate of ``signal``'s requests: each as ``given`` (the options), else
    from the signal's variable, else the generic one; for an ``https://`` upstream (``secure``) only.

    Raises ``ValueError`` naming the variables when a client certificate comes without its key.
    """
    if not secure:
        return given
    ca_file, ca_from = given.ca_file, given.ca_from
    if ca_file is None:
        found = _variable(environ, signal, "CERTIFICATE")
        if found is not None:
            ca_from, ca_file = found
    if given.client_cert_file is not None:
        return UpstreamTls(ca_file, given.client_cert_file, given.client_key_file, ca_from, given.client_from)
    cert = _variable(environ, signal, "CLIENT_CERTIFICATE")
    key = _variable(environ, signal, "CLIENT_KEY")
    if cert is not None and key is not None:
        return UpstreamTls(ca_file, cert[1], key[1], ca_from, f"{cert[0]} and {key[0]}")
    if cert is not None:
        raise _unpaired(cert[0], signal, "CLIENT_KEY")
    if key is not None:
        raise _unpaired(key[0], signal, "CLIENT_CERTIFICATE")
    return UpstreamTls(ca_file, None, None, ca_from, given.client_from)


def _unpaired(present: str, signal: Signal, missing: str) -> ValueError:
    return ValueError(
        f"{present} needs {signal_variable(signal, missing)} or OTEL_EXPORTER_OTLP_{missing}: "
        "a client certificate and its key go together"
    )


@dataclass(frozen=True)
class UpstreamTls:
    """A private CA to verify the upstream with, and a client certificate to show it, as PEM files.

    ``ca_from`` and ``client_from`` name where the files were given (the options, or variables), for
    the error that says one cannot be loaded.
    """

    ca_file: str | None = None
    client_cert_file: str | None = None
    client_key_file: str | None = None
    ca_from: str = "--upstream-ca"
    client_from: str = "--upstream-client-cert and --upstream-client-key"

    def __post_init__(self) -> None:
        if (self.client_cert_file is None) != (self.client_key_file is None):
            raise ValueError(
                "a client certificate needs its key: give both --upstream-client-cert and "
                "--upstream-client-key, or neither"
            )

    @property
    def given(self) -> bool:
        return self.ca_file is not None or self.client_cert_file is not None

    def ssl_context(self) -> ssl.SSLContext:
        """The HTTP exporter's context: the system's CAs, or the given one; the client certificate if any.

        Loading here also checks that the files parse and that the key matches the certificate.
        """
        # Imported here, as gRPC below: `serve --help` reads this module's options, not its TLS.
        import ssl

        try:
            context = ssl.create_default_context(cafile=self.ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"cannot load {self.ca_from} {self.ca_file}: {_reason(exc)}") from None
        if self.client_cert_file is not None:
            try:
                context.load_cert_chain(self.client_cert_file, self.client_key_file, password=_no_password)
            except (OSError, ssl.SSLError, ValueError) as exc:
                raise ValueError(
                    f"cannot load the client certificate {self.client_cert_file} and key {self.client_key_file} "
                    f"({self.client_from}): {_reason(exc)}"
                ) from None
        return context

    def grpc_credentials(self) -> grpc.ChannelCredentials:
        """The gRPC exporter's credentials, from the same files (checked through :meth:`ssl_context` first)."""
        import grpc

        self.ssl_context()
        return grpc.ssl_channel_credentials(
            root_certificates=_read(self.ca_file),
            private_key=_read(self.client_key_file),
            certificate_chain=_read(self.client_cert_file),
        )


@dataclass(frozen=True)
class UpstreamConnection:
    """What one signal's exporter sends besides the data: headers, compression, and TLS material."""

    headers: Headers = field(default=(), repr=False)
    compression: str = "none"
    tls: UpstreamTls = field(default_factory=UpstreamTls)


def _read(path: str | None) -> bytes | None:
    if path is None:
        return None
    with open(path, "rb") as file:
        return file.read()


def _no_password() -> bytes:
    raise ValueError("encrypted private keys are not supported")


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or getattr(exc, "reason", None) or str(exc)

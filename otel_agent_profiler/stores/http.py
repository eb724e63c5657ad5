"""The HTTP every store client shares: headers, TLS, timeouts, retries with backoff, bounded concurrency.

Each failure that ends a fetch is a :class:`StoreError` whose message is one line naming the
store, the address and what to do. Retries are for answers that say "later" (429 and 5xx) and
are bounded in number and in wait; nothing is retried forever.
"""

from __future__ import annotations

import contextlib
import threading
import time
import urllib.parse
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import msgspec
import requests

from ..core.key_value_text import split_pairs
from ..errors import StoreError

_Item = TypeVar("_Item")
_Result = TypeVar("_Result")

#: Answers worth asking again: the store is busy, or failed in a way that may pass.
RETRIED_STATUSES = frozenset({429, 500, 502, 503, 504})


class FetchProgress(Protocol):
    """Where the clients report their requests (``report.progress.Progress`` is one)."""

    def start(self, label: str, total: int) -> None:
        """Begin the phase ``label`` of ``total`` steps (0: unknown)."""

    def advance(self, steps: int = 1, detail: str = "") -> None:
        """Count ``steps`` done."""


class LockedProgress:
    """A progress that the fetching threads can share: one call at a time reaches ``progress``."""

    def __init__(self, progress: FetchProgress) -> None:
        self._progress = progress
        self._lock = threading.Lock()

    def start(self, label: str, total: int) -> None:
        with self._lock:
            self._progress.start(label, total)

    def advance(self, steps: int = 1, detail: str = "") -> None:
        with self._lock:
            self._progress.advance(steps, detail)


class NoProgress:
    """A progress that shows nothing."""

    def start(self, label: str, total: int) -> None:
        pass

    def advance(self, steps: int = 1, detail: str = "") -> None:
        pass


@dataclass(frozen=True)
class HttpSettings:
    """How the clients talk to a store."""

    #: Sent with every request (authentication: ``Authorization``, Tempo's ``X-Scope-OrgID``, ...).
    headers: Mapping[str, str] = field(default_factory=dict)
    #: Where ``headers`` came from, named in the error line of a 401 or 403.
    headers_from: str = "the request headers"
    #: Verify the store's TLS certificate (True), against this CA bundle (a path), or not (False).
    verify: bool | str = True
    #: Seconds to wait for a connection, and for each read of an answer.
    timeout_s: float = 30.0
    #: Attempts after the first for an answer in :data:`RETRIED_STATUSES`.
    retries: int = 3
    #: The first wait before a retry, doubled each time up to ``max_backoff_s``.
    backoff_s: float = 0.25
    #: The longest wait before a retry, also for a ``Retry-After`` that asks for more.
    max_backoff_s: float = 8.0
    #: Requests in flight at once.
    concurrency: int = 4


def parse_headers(text: str) -> dict[str, str]:
    """Headers from ``key=value`` pairs separated by commas, values percent-decoded.

    The format of ``OTEL_EXPORTER_OTLP_HEADERS``: ``Authorization=Basic%20dXNlcjpwYXNz,X-Scope-OrgID=tenant``.
    Raises ``ValueError`` for a pair without ``=`` or with an empty key.
    """
    return {
        urllib.parse.unquote(key): urllib.parse.unquote(value) for key, value in split_pairs(text, "key=value pairs")
    }


def _reason(exc: BaseException) -> str:
    # requests wraps urllib3's errors several levels deep; the innermost says what happened.
    while exc.__context__ is not None and exc.__context__ is not exc and str(exc.__context__):
        exc = exc.__context__
    text = " ".join(str(exc).split())
    return text if len(text) <= 160 else text[:157] + "..."


def _excerpt(body: bytes) -> str:
    text = " ".join(body.decode("utf-8", "replace").split())
    return text if len(text) <= 120 else text[:117] + "..."


class StoreHttp:
    """GETs JSON from one store, with the :class:`HttpSettings`; safe to use from several threads."""

    def __init__(self, store: str, base_url: str, settings: HttpSettings) -> None:
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise StoreError(f"{store}: {base_url!r} is not an http:// or https:// URL")
        self.store = store
        self.base_url = base_url.rstrip("/")
        self.settings = settings
        self._local = threading.local()

    def _session(self) -> requests.Session:
        # One session (and connection pool) per thread: requests does not promise a shared one is safe.
        session: requests.Session | None = getattr(self._local, "session", None)
        if session is None:
            session = requests.Session()
            session.headers.update({"Accept": "application/json", **self.settings.headers})
            # Proxies (HTTPS_PROXY, NO_PROXY) and $REQUESTS_CA_BUNDLE come from the environment, as for curl.
            self._local.session = session
        return session

    def url(self, path: str) -> str:
        return f"{self.base_url}{path}"

    def get_json(
        self,
        path: str,
        params: Sequence[tuple[str, str]] = (),
        *,
        missing_ok: bool = False,
        json_errors: Collection[int] = (),
    ) -> Any:
        """The decoded JSON answer to ``GET base_url + path``; None for a 404 when ``missing_ok``.

        An answer whose status is in ``json_errors`` and whose body is JSON is returned as a 200's
        is: the API explains the error in it (Prometheus's ``{"status": "error", ...}``). Raises
        :class:`StoreError` when the store cannot be reached, refuses, fails after the retries or
        answers something that is not JSON.
        """
        url = self.url(path)
        settings = self.settings
        for attempt in range(settings.retries + 1):
            try:
                # verify per request: requests lets $REQUESTS_CA_BUNDLE beat a session's own CA bundle.
                answer = self._session().get(
                    url, params=list(params), timeout=settings.timeout_s, verify=settings.verify
                )
            except requests.exceptions.SSLError as exc:
                raise StoreError(
                    f"{self.store} at {self.base_url}: TLS verification failed ({_reason(exc)}); "
                    "give the store's CA certificates with --ca-bundle FILE"
                ) from None
            except requests.exceptions.Timeout:
                raise StoreError(
                    f"{self.store} at {self.base_url}: no answer within {settings.timeout_s:g} s (see --timeout)"
                ) from None
            except requests.exceptions.RequestException as exc:
                raise StoreError(f"{self.store} at {self.base_url}: cannot connect ({_reason(exc)})") from None
            status = answer.status_code
            if status in RETRIED_STATUSES and attempt < settings.retries:
                time.sleep(self._wait_s(attempt, answer.headers.get("Retry-After")))
                continue
            return self._decoded(answer, url, missing_ok, attempt, json_errors)
        raise AssertionError("unreachable")  # pragma: no cover

    def _wait_s(self, attempt: int, retry_after: str | None) -> float:
        settings = self.settings
        wait = settings.backoff_s * 2**attempt
        if retry_after is not None:
            # A number of seconds; an HTTP date is left to the backoff.
            with contextlib.suppress(ValueError):
                wait = float(retry_after)
        return float(max(0.0, min(wait, settings.max_backoff_s)))

    def _decoded(
        self, answer: requests.Response, url: str, missing_ok: bool, attempt: int, json_errors: Collection[int] = ()
    ) -> Any:
        status = answer.status_code
        where = f"{self.store} at {self.base_url}"
        if status == 404 and missing_ok:
            return None
        if status in json_errors:
            with contextlib.suppress(msgspec.DecodeError, UnicodeDecodeError, RecursionError):
                return msgspec.json.decode(answer.content)
        if status in (401, 403):
            return _fail(
                f"{where}: {status} {answer.reason or 'Unauthorized'}; check the credentials in "
                f"{self.settings.headers_from}"
            )
        if status in RETRIED_STATUSES:
            return _fail(f"{where}: {status} {answer.reason} after {attempt + 1} attempts; try again later")
        if status == 404:
            return _fail(f"{where}: 404 Not Found for {url} (is it the store's query address?)")
        if status != 200:
            return _fail(f"{where}: {status} {answer.reason} for {url}: {_excerpt(answer.content)}")
        try:
            return msgspec.json.decode(answer.content)
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
            return _fail(f"{where}: malformed answer from {url}: not JSON ({_excerpt(answer.content) or 'empty'})")

    def map(self, fetch: Callable[[_Item], _Result], items: Iterable[_Item]) -> list[_Result]:
        """``[fetch(item) for item in items]``, a few at a time (``concurrency``), in order.

        The first :class:`StoreError` stops the rest and is raised.
        """
        items = list(items)
        if len(items) <= 1 or self.settings.concurrency <= 1:
            return [fetch(item) for item in items]
        with ThreadPoolExecutor(max_workers=self.settings.concurrency, thread_name_prefix="store-fetch") as pool:
            futures = [pool.submit(fetch, item) for item in items]
            try:
                return [future.result() for future in futures]
            except BaseException:
                for future in futures:
                    future.cancel()
                raise


def _fail(message: str) -> Any:
    raise StoreError(message)

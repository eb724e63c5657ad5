"""Where the offline commands read traces: files, or a trace store (``--jaeger``, ``--tempo``, ``--phoenix``).

The store options build a ``stores.StoreQuery``; ``diff`` takes the same query as one argument per
side (:func:`parse_side`). A wrong combination is one line on standard error and exit code 2.
``--prometheus`` adds the inference servers' load that Prometheus recorded to the LLM calls.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..plugin.environment_variables import OTEL_AGENT_PROFILER_SOURCE_HEADERS
from ..report.progress import Progress, progress_enabled
from ..stores.store_names import DEFAULT_LIMIT, JAEGER, PHOENIX, STORES, TEMPO
from . import arguments
from .arguments import PROG, error

if TYPE_CHECKING:
    from ..offline.inputs import OfflineInputs, StoreSource

    # The HTTP library takes a tenth of a second to import: only a command reading a store pays for it.
    from ..stores.http import HttpSettings
    from ..stores.query import StoreQuery

_NS_PER_S = 10**9
_UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")

#: Which store each search option belongs to.
_OPTION_STORES = {
    "service": (JAEGER,),
    "operation": (JAEGER,),
    "tags": (JAEGER,),
    "traceql": (TEMPO,),
    "project": (PHOENIX,),
}
_OPTION_NAMES = {"traceql": "--query", "trace_ids": "--trace-id"}

#: The ``diff`` side syntax, for its help and its error lines.
SIDE_SYNTAX = "STORE+URL?KEY=VALUE&..., e.g. 'jaeger+http://localhost:16686?service=agent&since=1d'"


# Argument types.


def duration_ns(text: str) -> int:
    """A duration such as ``90s``, ``15m``, ``1h30m``, ``2d`` or ``1w``, in ns."""
    compact = text.strip().lower().replace(" ", "")
    if not compact or _DURATION.sub("", compact):
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration such as 30m, 1h or 2d")
    seconds = sum(float(number) * _UNITS_S[unit] for number, unit in _DURATION.findall(compact))
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration of more than 0")
    return int(seconds * _NS_PER_S)


def moment_ns(text: str) -> int:
    """A time: ISO 8601 (``2026-11-24T08:00:00Z``; UTC unless it has an offset) or Unix seconds, in ns."""
    stripped = text.strip()
    try:
        return int(float(stripped) * _NS_PER_S)
    except ValueError:
        pass
    from datetime import datetime, timezone

    try:
        moment = datetime.fromisoformat(stripped.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a time such as 2026-11-24T08:00:00Z or Unix seconds"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp()) * _NS_PER_S + moment.microsecond * 1000


def tag(text: str) -> tuple[str, str]:
    """A ``key=value`` tag."""
    key, equals, value = text.partition("=")
    if not equals or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not key=value")
    return key, value


def existing_file(text: str) -> str:
    if not os.path.isfile(text):
        raise argparse.ArgumentTypeError(f"no such file: {text}")
    return text


def positive_float(text: str) -> float:
    value = arguments.non_negative_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return value


# The options.


def add_store_options(parser: argparse.ArgumentParser, *, with_store: bool = True) -> None:
    """The options reading a trace store; ``with_store=False`` gives only the connection options (diff).

    Also keeps the parser's ``error`` in ``args.usage_error``: a wrong combination of options is
    found after parsing, and is reported as argparse reports a usage error (one line, exit code 2).
    """
    parser.set_defaults(usage_error=parser.error)
    group = parser.add_argument_group(
        "reading from a trace store" if with_store else "reading a side from a trace store",
        (
            "instead of FILE: --jaeger URL --service NAME [--operation OP] [--tags K=V ...] or --trace-id ID ...; "
            "--tempo URL --query TRACEQL or --trace-id ID ...; --phoenix URL --project NAME [--trace-id ID ...]. "
            "A search covers --since, or --start to --end (default: the last hour for Jaeger and Tempo, all of "
            f"the project for Phoenix). Headers (authentication) come from ${OTEL_AGENT_PROFILER_SOURCE_HEADERS}: "
            "key=value pairs separated by commas, values percent-encoded"
            if with_store
            else f"a side given as {SIDE_SYNTAX}; the keys are the store options' names (service, operation, "
            "tag, query, project, trace-id, since, start, end, limit) and a value is percent-encoded (& as %26). "
            f"Headers (authentication) come from ${OTEL_AGENT_PROFILER_SOURCE_HEADERS}"
        ),
    )
    if with_store:
        stores = group.add_mutually_exclusive_group()
        stores.add_argument(
            "--jaeger",
            metavar="URL",
            help="Jaeger's query service, e.g. http://localhost:16686 (ending in /api/v3: its v3 API)",
        )
        stores.add_argument("--tempo", metavar="URL", help="Grafana Tempo's HTTP API, e.g. http://localhost:3200")
        stores.add_argument("--phoenix", metavar="URL", help="Arize Phoenix, e.g. http://localhost:6006")
        group.add_argument("--service", metavar="NAME", help="Jaeger: the service whose traces to search")
        group.add_argument("--operation", metavar="OP", help="Jaeger: only traces with this operation")
        group.add_argument(
            "--tags", type=tag, nargs="+", action="extend", metavar="K=V", help="Jaeger: only traces with these tags"
        )
        group.add_argument(
            "--query",
            dest="traceql",
            metavar="TRACEQL",
            help="Tempo: the TraceQL search, e.g. '{ span.gen_ai.operation.name = \"chat\" }'",
        )
        group.add_argument("--project", metavar="NAME", help="Phoenix: the project whose traces to read")
        group.add_argument(
            "--trace-id",
            dest="trace_ids",
            nargs="+",
            action="extend",
            metavar="ID",
            help="read these traces (hex ids) instead of searching",
        )
        window = group.add_mutually_exclusive_group()
        window.add_argument(
            "--since", type=duration_ns, metavar="DURATION", help="search the last DURATION: 30m, 1h, 2d"
        )
        window.add_argument(
            "--start", type=moment_ns, metavar="TIME", help="search from TIME (ISO 8601, UTC unless given; or Unix s)"
        )
        group.add_argument("--end", type=moment_ns, metavar="TIME", help="search up to TIME (default: now)")
        group.add_argument(
            "--limit",
            type=arguments.positive_int,
            metavar="N",
            help=f"read at most N traces of a search, as the store picks them (default: {DEFAULT_LIMIT})",
        )
        group.add_argument(
            "--save", metavar="FILE", help="also write the traces read to FILE as OTLP JSON, to repeat the run offline"
        )
    group.add_argument(
        "--allow-empty", action="store_true", help="a search that finds no traces is not an error (exit code 0)"
    )
    group.add_argument(
        "--ca-bundle",
        type=existing_file,
        metavar="FILE",
        help="verify the store's TLS certificate against these CA certificates (PEM) instead of the system's",
    )
    group.add_argument(
        "--timeout",
        type=positive_float,
        default=30.0,
        metavar="SECONDS",
        help="wait at most this long to connect and for each answer (default: %(default)s)",
    )


def add_prometheus_options(parser: argparse.ArgumentParser) -> None:
    """``--prometheus URL`` and ``--prometheus-match SELECTOR``: the inference servers' load from Prometheus."""
    group = parser.add_argument_group(
        "the inference server's load, from Prometheus",
        (
            "for the time the traces cover, read the load series of vLLM or SGLang servers (running and waiting "
            "requests, KV-cache use, prefix-cache hits, preemptions) from the Prometheus that scraped them, "
            "and attach the load each LLM call met to it (one server per 'instance' label; with several, the one "
            "whose 'model_name' is the call's model). Uses $"
            f"{OTEL_AGENT_PROFILER_SOURCE_HEADERS}, --ca-bundle and --timeout as a trace store does"
        ),
    )
    group.add_argument("--prometheus", metavar="URL", help="Prometheus's HTTP API, e.g. http://localhost:9090")
    group.add_argument(
        "--prometheus-match",
        metavar="SELECTOR",
        help="label matchers added to every query, e.g. '{job=\"vllm\"}' (default: every series of those names)",
    )


def _prometheus_matchers(args: argparse.Namespace) -> str:
    """Check ``--prometheus`` and ``--prometheus-match``: the label matchers (empty for none); raises
    ``ValueError`` (one line) for a wrong one."""
    url, selector = getattr(args, "prometheus", None), getattr(args, "prometheus_match", None)
    if selector is not None and not url:
        raise ValueError("--prometheus-match narrows --prometheus: give --prometheus URL")
    if not url:
        return ""
    import urllib.parse  # here: only a store or Prometheus URL needs it, not `--help`

    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"--prometheus: {url!r} is not an http:// or https:// URL")
    if selector is None:
        return ""
    from ..stores.prometheus import label_matchers

    try:
        return label_matchers(selector)
    except ValueError as exc:
        raise ValueError(f"--prometheus-match: {exc}") from None


def _store_of(args: argparse.Namespace) -> tuple[str, str] | None:
    for store in STORES:
        url = getattr(args, store, None)
        if url:
            return store, url
    return None


def _option(key: str) -> str:
    """How the command line spells the option of a query field: ``trace_ids`` -> ``--trace-id``."""
    return _OPTION_NAMES.get(key, "--" + key.replace("_", "-"))


_TITLES = {JAEGER: "Jaeger", TEMPO: "Tempo", PHOENIX: "Phoenix"}
_SEARCH_FIELDS = ("service", "operation", "tags", "traceql", "since", "start", "end", "limit")


def query_of(
    store: str,
    url: str,
    values: dict[str, Any],
    *,
    now_ns: int | None = None,
    name: Callable[[str], str] = _option,
) -> StoreQuery:
    """The query of ``store`` at ``url`` from option values; raises ``ValueError`` (one line) for a wrong combination.

    ``name`` spells a field in the message (``--trace-id`` on the command line, ``trace-id=`` in a diff side).
    """
    # Imported here, as the inputs below: `--help` needs only the stores' names (``store_names``).
    import urllib.parse

    from ..stores.query import StoreQuery

    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"--{store}: {url!r} is not an http:// or https:// URL")
    if store == JAEGER and values.get("tags") and url.rstrip("/").endswith("/api/v3"):
        raise ValueError(f"{name('tags')}: Jaeger's v3 API takes no tags (leave /api/v3 out of the URL)")
    for key, stores in _OPTION_STORES.items():
        if values.get(key) and store not in stores:
            raise ValueError(f"{name(key)} is for {' or '.join(_TITLES[s] for s in stores)}, not {_TITLES[store]}")
    trace_ids = tuple(dict.fromkeys(str(t).strip().lower() for t in values.get("trace_ids") or ()))
    for trace_id in trace_ids:
        if not re.fullmatch(r"[0-9a-f]{1,32}", trace_id):
            raise ValueError(f"{name('trace_ids')}: {trace_id!r} is not a hex trace id")
    searching = [key for key in _SEARCH_FIELDS if values.get(key)]
    if trace_ids and searching:
        options = ", ".join(name(key) for key in searching)
        raise ValueError(f"{name('trace_ids')} reads traces by id: leave out {options}")
    required = {JAEGER: "service", TEMPO: "traceql", PHOENIX: "project"}[store]
    if not values.get(required) and not (trace_ids and store != PHOENIX):
        alternative = "" if store == PHOENIX else f" or {name('trace_ids')}"
        raise ValueError(f"reading {_TITLES[store]} needs {name(required)}{alternative}")
    start_ns, end_ns = values.get("start"), values.get("end")
    if values.get("since"):
        if end_ns is not None:
            raise ValueError(f"{name('since')} counts back from now: leave out {name('end')}")
        end_ns = now_ns if now_ns is not None else time.time_ns()
        start_ns = end_ns - values["since"]
    if start_ns is not None and end_ns is not None and start_ns >= end_ns:
        raise ValueError(f"{name('start')} must be before {name('end')}")
    return StoreQuery(
        store,
        url,
        trace_ids=trace_ids,
        service=values.get("service"),
        operation=values.get("operation"),
        tags=tuple(values.get("tags") or ()),
        traceql=values.get("traceql"),
        project=values.get("project"),
        start_ns=start_ns,
        end_ns=end_ns,
        limit=values.get("limit") or DEFAULT_LIMIT,
    )


def offline_inputs(args: argparse.Namespace) -> OfflineInputs | None:
    """What analyze, report and export read, from their arguments: after checking that files or a
    store are given (not both), the files (folders expanded), the prices and the store or Prometheus.

    A wrong combination of options is a usage error (``SystemExit``); None, with the error line
    printed, for unusable headers or prices.
    """
    store = _store_of(args)
    query: StoreQuery | None = None
    try:
        if store is None:
            if not args.files:
                raise ValueError("give trace files, or a trace store with --jaeger, --tempo or --phoenix")
            for key in (*_OPTION_STORES, "trace_ids", "since", "start", "end", "limit", "save"):
                if getattr(args, key, None):
                    raise ValueError(f"{_option(key)} is for a trace store: give --jaeger, --tempo or --phoenix")
        else:
            if args.files:
                raise ValueError(f"read trace files or --{store[0]}, not both")
            query = query_of(store[0], store[1], vars(args))
        matchers = _prometheus_matchers(args)
    except ValueError as exc:
        args.usage_error(str(exc))
    prometheus_url: str | None = getattr(args, "prometheus", None) or None
    settings = None
    if query is not None or prometheus_url:
        try:
            settings = http_settings(args)
        except ValueError as exc:
            error(str(exc))
            return None
    files = arguments.offline_inputs(args)
    if files is None:
        return None
    paths, prices, folder_problems = files
    from ..offline.inputs import OfflineInputs, PrometheusSource

    return OfflineInputs(
        files=tuple(paths),
        prices=prices,
        folder_problems=tuple(folder_problems),
        store=None if query is None or settings is None else store_source(query, args, settings),
        prometheus=None
        if not prometheus_url or settings is None
        else PrometheusSource(prometheus_url, settings, matchers),
    )


def store_source(query: StoreQuery, args: argparse.Namespace, settings: HttpSettings) -> StoreSource:
    """The store ``query`` reads, with the connection options of ``args``."""
    from ..offline.inputs import StoreSource

    return StoreSource(query, settings, save=getattr(args, "save", None), allow_empty=args.allow_empty)


def http_settings(args: argparse.Namespace) -> HttpSettings:
    """The HTTP settings; raises ``ValueError`` naming the variable when the headers are unusable."""
    from ..stores.http import HttpSettings, parse_headers

    raw = os.environ.get(OTEL_AGENT_PROFILER_SOURCE_HEADERS, "")
    try:
        headers = parse_headers(raw)
    except ValueError as exc:
        raise ValueError(f"{OTEL_AGENT_PROFILER_SOURCE_HEADERS}: {exc}") from None
    return HttpSettings(
        headers=headers,
        headers_from=f"${OTEL_AGENT_PROFILER_SOURCE_HEADERS}" + ("" if headers else " (unset)"),
        verify=args.ca_bundle or True,
        timeout_s=args.timeout,
    )


def print_note(line: str) -> None:
    """A note on standard error: not an error, the command goes on."""
    print(f"{PROG}: note: {line}", file=sys.stderr)


# diff's sides.

_SIDE_KEYS = {
    "service": "service",
    "operation": "operation",
    "tag": "tags",
    "query": "traceql",
    "project": "project",
    "trace-id": "trace_ids",
    "since": "since",
    "start": "start",
    "end": "end",
    "limit": "limit",
}
_SIDE_TYPES: dict[str, Callable[[str], Any]] = {
    "tags": tag,
    "since": duration_ns,
    "start": moment_ns,
    "end": moment_ns,
    "limit": arguments.positive_int,
}
_SIDE_REPEATED = ("tags", "trace_ids")


def is_store_side(side: str) -> bool:
    """Whether a ``diff`` side names a store (``jaeger+http://...``) rather than a file or folder."""
    scheme = side.split("://", 1)[0]
    return "://" in side and scheme.split("+", 1)[0].lower() in STORES


def parse_side(side: str, now_ns: int | None = None) -> StoreQuery:
    """The store query of a ``diff`` side; raises ``ValueError`` (one line) for a side that is not one."""
    scheme, _, rest = side.partition("://")
    store, plus, transport = scheme.partition("+")
    store = store.lower()
    if store not in STORES or not plus or transport.lower() not in ("http", "https"):
        raise ValueError(f"{side!r}: a store side is {SIDE_SYNTAX}")
    address, _, query_string = rest.partition("?")
    values: dict[str, Any] = {}
    import urllib.parse

    for key, value in urllib.parse.parse_qsl(query_string, keep_blank_values=True):
        field = _SIDE_KEYS.get(key)
        if field is None:
            raise ValueError(f"{side!r}: unknown key {key!r} (known: {', '.join(_SIDE_KEYS)})")
        try:
            converted = _SIDE_TYPES.get(field, str)(value)
        except argparse.ArgumentTypeError as exc:
            raise ValueError(f"{side!r}: {key}: {exc}") from None
        if field in _SIDE_REPEATED:
            values.setdefault(field, []).append(converted)
        else:
            values[field] = converted
    side_names = {field: key for key, field in _SIDE_KEYS.items()}
    try:
        return query_of(
            store, f"{transport}://{address}", values, now_ns=now_ns, name=lambda field: f"{side_names[field]}="
        )
    except ValueError as exc:
        raise ValueError(f"{side!r}: {exc}") from None


def progress_for(args: argparse.Namespace) -> Progress:
    """The progress bar of a command (``--progress``), or shown when standard error is a terminal."""
    return Progress(progress_enabled(getattr(args, "progress", None)), sys.stderr)

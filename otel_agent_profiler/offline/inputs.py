"""What an offline command reads: trace files or a trace store's search, the prices, and Prometheus.

Made once from the command line (``cli.sources.offline_inputs``), then handed to the loading
functions as it is: nothing derived is kept anywhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..core.pricing import PriceTable
from ..stores.query import StoreQuery

if TYPE_CHECKING:
    # The HTTP library takes a tenth of a second to import: only a command reading a store pays for it.
    from ..stores.http import HttpSettings


@dataclass(frozen=True)
class StoreSource:
    """A trace store's search or traces by id, and how to talk to it."""

    query: StoreQuery
    settings: HttpSettings
    #: Also write the traces read to this file as OTLP JSON (``--save``).
    save: str | None = None
    #: A search that finds no traces is not an error.
    allow_empty: bool = False


@dataclass(frozen=True)
class PrometheusSource:
    """The Prometheus that recorded the inference servers' load (``--prometheus``)."""

    url: str
    settings: HttpSettings
    #: Label matchers added to every query (``--prometheus-match``), without braces; empty for none.
    matchers: str = ""


@dataclass(frozen=True)
class OfflineInputs:
    """The traces to read: ``files`` (folders expanded), or ``store`` when it is given."""

    files: tuple[str, ...]
    prices: PriceTable
    #: An error line per folder given that holds no trace files.
    folder_problems: tuple[str, ...] = ()
    store: StoreSource | None = None
    prometheus: PrometheusSource | None = None

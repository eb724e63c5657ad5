"""Loading an offline command's inputs: trace files, or a trace store's traces, and Prometheus's load.

:func:`load_inputs` is what ``analyze``, ``report`` and ``export`` read through; ``diff`` fetches
a store side with :func:`fetch_store`. Failures that leave nothing to analyse raise
:class:`~.inputs.CannotAnalyse` with the one line to print.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone

import msgspec

from ..adapters.files import TraceFile
from ..errors import CannotAnalyse
from ..report.progress import Progress, progress_enabled
from .inputs import OfflineInputs, PrometheusSource, StoreSource
from .loading import LoadedProfiles, LoadOptions, load_profiles, profile_trace_files

_NS_PER_S = 10**9


def fetch_store(store: StoreSource, progress: Progress | None = None) -> list[TraceFile]:
    """The traces of ``store``'s query; raises :class:`CannotAnalyse` when the store could not be read."""
    from ..errors import StoreError
    from ..stores.fetch import fetch_traces

    try:
        return fetch_traces(store.query, store.settings, progress, allow_empty=store.allow_empty)
    except (StoreError, ValueError) as exc:
        if progress is not None:
            progress.close()
        raise CannotAnalyse(str(exc)) from None


def load_inputs(
    inputs: OfflineInputs,
    *,
    progress: Progress | None = None,
    on_error_line: Callable[[str], None] | None = None,
    on_note: Callable[[str], None] | None = None,
) -> LoadedProfiles:
    """Profiles of the files, or of the traces in the store (saved with ``store.save``), with Prometheus's load.

    Raises :class:`CannotAnalyse` when the store or Prometheus could not be read or the saved file
    written. ``on_note`` gets a line when Prometheus had nothing for the calls (not an error).
    """
    options: LoadOptions = {"prices": inputs.prices, "progress": progress, "on_error_line": on_error_line}
    if inputs.store is None:
        loaded = load_profiles(inputs.files, **options)
    else:
        loaded = _fetched(inputs.store, progress, options)
    if inputs.prometheus is not None:
        _with_backend_load(inputs.prometheus, loaded, progress, on_note)
    return loaded


def _fetched(store: StoreSource, progress: Progress | None, options: LoadOptions) -> LoadedProfiles:
    # A fetch shows its bar when standard error is a terminal, also in a command without --progress.
    shown = progress if progress is not None else Progress(progress_enabled(None))
    trace_files = fetch_store(store, shown)
    if store.save:
        from ..stores.fetch import saved_document
        from .atomic_files import replaced_atomically

        document = msgspec.json.encode(saved_document(trace_files)) + b"\n"
        shown.close()
        try:
            with replaced_atomically(store.save) as saved:
                saved.write(document)
        except OSError as exc:
            raise CannotAnalyse(f"cannot write {store.save}: {exc.strerror or exc}") from None
    loaded = profile_trace_files(trace_files, **options)
    shown.close()
    return loaded


def _with_backend_load(
    prometheus: PrometheusSource,
    loaded: LoadedProfiles,
    progress: Progress | None,
    on_note: Callable[[str], None] | None,
) -> None:
    """Attach the load Prometheus recorded to the LLM calls; raises :class:`CannotAnalyse` if that failed.

    Prometheus without the servers' series is not an error: a note says so and the analysis goes on.
    """
    from ..errors import StoreError
    from ..stores.prometheus import attach_prometheus_load

    shown = progress if progress is not None else Progress(progress_enabled(None))
    try:
        found = attach_prometheus_load(
            loaded.profiles,
            prometheus.url,
            matchers=prometheus.matchers,
            settings=prometheus.settings,
            progress=shown,
        )
    except (StoreError, ValueError) as exc:
        shown.close()
        raise CannotAnalyse(str(exc)) from None
    shown.close()
    if on_note is None:
        return
    if found.windows and not found.servers:
        first, last = found.windows[0], found.windows[-1]
        selector = f"{{{prometheus.matchers}}}" if prometheus.matchers else ""
        on_note(
            f"no inference-server metrics in Prometheus for {_utc(first.start_ns)} to "
            f"{_utc(last.end_ns)} (vllm: or sglang: series{selector}); the LLM calls have no backend load"
        )
    elif found.servers and not found.attached:
        on_note(
            f"Prometheus has the load of {len(found.servers)} inference servers, but none of the "
            f"{found.llm_calls} LLM calls could be matched to one (by the 'model_name' label)"
        )


def _utc(time_ns: int) -> str:
    return datetime.fromtimestamp(time_ns // _NS_PER_S, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

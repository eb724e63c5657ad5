"""An inference server's Prometheus text (its ``/metrics``) -> a ``LoadSample``.

Parsed with the Prometheus project's own parser (``prometheus_client.parser``), then reduced to
the few series the profiler uses, by their names in vLLM and SGLang:

=====================  ===============================================  ==========================================
LoadSample field       vLLM                                             SGLang
=====================  ===============================================  ==========================================
running                ``vllm:num_requests_running``                    ``sglang:num_running_reqs``
waiting                ``vllm:num_requests_waiting``                    ``sglang:num_queue_reqs``
kv_cache_usage         ``vllm:kv_cache_usage_perc``, older              ``sglang:token_usage``
                       ``vllm:gpu_cache_usage_perc``
prefix_cache_queries   ``vllm:prefix_cache_queries_total``, older       ``sglang:prompt_tokens_total``
                       ``vllm:gpu_prefix_cache_queries_total``
prefix_cache_hits      ``vllm:prefix_cache_hits_total``, older          ``sglang:cached_tokens_total``
                       ``vllm:gpu_prefix_cache_hits_total``
prefix_cache_hit_rate  (none: computed from the two counters)           ``sglang:cache_hit_rate`` (a gauge),
                                                                        where the counters are missing
preemptions            ``vllm:num_preemptions_total``                   ``sglang:num_retracted_requests_total``
=====================  ===============================================  ==========================================

SGLang's names are those of its metrics collector (``python/sglang/srt/metrics/collector.py``) and
its "Production Metrics" page. Its prefix-cache hits are the cached prompt tokens
(``sglang:cached_tokens_total``, one series per ``cache_source``, summed) over the prompt tokens;
its ``sglang:cache_hit_rate`` gauge covers only the last batch, so it is kept for servers without
the counters (older releases), where a call's hit rate is the gauge's mean over the call
(``core.backend_load``). Its ``sglang:num_retracted_reqs`` is a gauge of the last batch, not a
count, so preemptions come from the ``_total`` counter.

A server serving several models (or several engines) has one series per label set: counts and
counters are summed over them, KV-cache use is the highest, SGLang's hit rate the mean. The
models are the ``model_name`` labels. The parser names a counter's family without ``_total``
but keeps it on the samples; samples are matched by name, with ``_total`` taken off and the
underscore OpenMetrics writes for the prefix's colon (``vllm_num_requests_running``) read as it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..core.profile import LoadSample
from ..errors import MetricsTextError

__all__ = [
    "AVG",
    "LOAD_METRICS",
    "MAX",
    "SCRAPE_FALLBACKS",
    "SUM",
    "LoadMetric",
    "MetricsTextError",
    "load_sample_from_text",
]

#: How a server's series of one name are combined (PromQL's operators of the same names).
SUM = "sum"
MAX = "max"
AVG = "avg"


@dataclass(frozen=True)
class LoadMetric:
    """One field of a ``LoadSample`` and the metric names that give it, in order of preference.

    Attributes:
        field: The ``LoadSample`` attribute.
        names: The names as exposed (counters with ``_total``), vLLM's then SGLang's; a server
            with several gets the first it has.
        aggregation: How a server's series of one name are combined: ``SUM`` (counts and
            counters), ``MAX`` (the fullest KV cache) or ``AVG`` (a hit rate).
    """

    field: str
    names: tuple[str, ...]
    aggregation: str = SUM


#: What both readers read: the poller here, and ``stores.prometheus`` from a Prometheus.
LOAD_METRICS = (
    LoadMetric("running", ("vllm:num_requests_running", "sglang:num_running_reqs")),
    LoadMetric("waiting", ("vllm:num_requests_waiting", "sglang:num_queue_reqs")),
    LoadMetric("kv_cache_usage", ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"), MAX),
    LoadMetric("prefix_cache_queries", ("vllm:prefix_cache_queries_total", "sglang:prompt_tokens_total")),
    LoadMetric("prefix_cache_hits", ("vllm:prefix_cache_hits_total", "sglang:cached_tokens_total")),
    LoadMetric("preemptions", ("vllm:num_preemptions_total", "sglang:num_retracted_requests_total")),
)
#: Read from a scrape only, as fallbacks: older vLLM's prefix-cache counters, and SGLang's
#: hit-rate gauge for releases without the cached-tokens counter.
SCRAPE_FALLBACKS = (
    LoadMetric("prefix_cache_queries", ("vllm:gpu_prefix_cache_queries_total",)),
    LoadMetric("prefix_cache_hits", ("vllm:gpu_prefix_cache_hits_total",)),
    LoadMetric("prefix_cache_hit_rate", ("sglang:cache_hit_rate",), AVG),
)


def _base_name(name: str) -> str:
    # OpenMetrics exposition (prometheus_client's, when asked for it) spells the prefix's colon as
    # an underscore: "vllm_num_requests_running".
    for prefix in _PREFIXES:
        if name.startswith(prefix + "_"):
            name = prefix + ":" + name[len(prefix) + 1 :]
            break
    return name[: -len("_total")] if name.endswith("_total") else name


_PREFIXES = ("vllm", "sglang")
#: Each field's names (as matched: without ``_total``) by preference, and how they combine.
_SERIES: dict[str, tuple[list[str], str]] = {}
for _metric in (*LOAD_METRICS, *SCRAPE_FALLBACKS):
    _SERIES.setdefault(_metric.field, ([], _metric.aggregation))[0].extend(map(_base_name, _metric.names))
_FIELD_OF = {name: field for field, (names, _) in _SERIES.items() for name in names}
_MODEL_LABEL = "model_name"


def load_sample_from_text(text: str, source: str, time_ns: int) -> LoadSample:
    """The load in one scrape of ``source``'s ``/metrics``, taken at ``time_ns`` (Unix epoch ns).

    A series the server declares but has no value for yet stays None in the sample.

    Raises:
        MetricsTextError: the text cannot be parsed, or names no vLLM or SGLang load series.
    """
    # Imported here: the plugin imports this module at start-up, and prometheus_client takes tens
    # of milliseconds to import, which only an application polling a server should pay.
    from prometheus_client.parser import text_string_to_metric_families

    values: dict[str, list[float]] = {}
    models: dict[str, None] = {}
    declared = False
    try:
        for family in text_string_to_metric_families(text):
            # A labelled series has no sample until its first value (vLLM's before the first request).
            declared = declared or _base_name(family.name) in _FIELD_OF
            for sample in family.samples:
                name = _base_name(sample.name)
                if name not in _FIELD_OF or not math.isfinite(sample.value):
                    continue
                values.setdefault(name, []).append(sample.value)
                model = sample.labels.get(_MODEL_LABEL)
                if model:
                    models[model] = None
    except Exception as exc:  # the parser raises ValueError and others on malformed lines
        raise MetricsTextError(f"not Prometheus text exposition ({type(exc).__name__}: {exc})") from None
    fields: dict[str, float] = {}
    for field, (names, aggregation) in _SERIES.items():
        found = next((values[name] for name in names if name in values), None)
        if found is not None:
            fields[field] = _combine(aggregation, found)
    if not fields and not declared:
        raise MetricsTextError(
            "no vLLM or SGLang load metrics in it (looked for vllm:num_requests_running, "
            "sglang:num_running_reqs and the like)"
        )
    return LoadSample(time_ns=time_ns, source=source, models=tuple(models), **fields)


def _combine(aggregation: str, values: list[float]) -> float:
    """One value from a series' label sets, as ``aggregation`` says."""
    if aggregation == MAX:
        return max(values)
    if aggregation == AVG:
        return sum(values) / len(values)
    return sum(values)

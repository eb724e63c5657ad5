"""adapters/prometheus_metrics.py: an inference server's /metrics text -> LoadSample.

vLLM's text is the real exposition of the bundled vLLM-like server's registry (prometheus_client, vLLM's
names and types). SGLang's and older vLLM's are written by hand in the shape their documentation shows:
SGLang's "Production Metrics" page (docs/references/production_metrics.md: ``sglang:num_running_reqs``,
``sglang:num_queue_reqs``, ``sglang:token_usage``, ``sglang:cache_hit_rate`` gauges with a ``model_name``
label) and its metrics collector (python/sglang/srt/metrics/collector.py: the counter
``sglang:num_retracted_requests_total``); vLLM's metrics page for the names before its V1 engine
(``vllm:gpu_cache_usage_perc``, ``vllm:gpu_prefix_cache_queries_total`` / ``_hits_total``).
"""

from __future__ import annotations

import threading

import pytest

from demo.vllm_like import RequestTimes, VllmLike
from otel_agent_profiler.adapters.prometheus_metrics import load_sample_from_text
from otel_agent_profiler.errors import MetricsTextError

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def test_the_bundled_vllm_like_servers_exposition() -> None:
    vllm = VllmLike(max_running=1, kv_cache_tokens=1000)
    never = threading.Event()
    vllm.admit(MODEL, 250, never)  # one running, holding a quarter of the KV cache
    vllm.record(MODEL, RequestTimes(arrived=0.0, arrived_wall_ns=0, finished=1.0, prompt_tokens=400,
                cached_tokens=100), traceparent=None, request_id="r1", request={})  # fmt: skip
    sample = load_sample_from_text(vllm.metrics_text().decode(), "http://vllm:8000/metrics", 42)
    assert sample.time_ns == 42 and sample.source == "http://vllm:8000/metrics"
    assert sample.models == (MODEL,)
    assert (sample.running, sample.waiting, sample.kv_cache_usage) == (1, 0, 0.25)
    # Counters: prometheus_client names their families without _total; the samples keep it.
    assert (sample.prefix_cache_queries, sample.prefix_cache_hits, sample.preemptions) == (400, 100, 0)
    assert sample.prefix_cache_hit_rate is None


def test_before_the_first_request_the_declared_series_have_no_values_yet() -> None:
    sample = load_sample_from_text(VllmLike().metrics_text().decode(), "s", 1)
    assert sample.running is None and sample.models == ()


SGLANG = """\
# HELP sglang:num_running_reqs The number of running requests
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct"} 162.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct"} 2826.0
# HELP sglang:token_usage The token usage
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.28
# HELP sglang:cache_hit_rate The cache hit rate
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.007507552643049313
# HELP sglang:num_retracted_reqs The number of retracted requests.
# TYPE sglang:num_retracted_reqs gauge
sglang:num_retracted_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.0
# HELP sglang:num_retracted_requests_total Total number of retracted requests.
# TYPE sglang:num_retracted_requests_total counter
sglang:num_retracted_requests_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} 48.0
# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} 8.128902e+06
"""


def test_sglangs_names_and_its_hit_rate_gauge() -> None:
    sample = load_sample_from_text(SGLANG, "http://sglang:30000/metrics", 7)
    assert (sample.running, sample.waiting, sample.kv_cache_usage) == (162, 2826, 0.28)
    # No cached-tokens counter (as in the docs' example): the server's own rate is kept, and a
    # call gets its mean (core.backend_load falls back on it without both counters).
    assert sample.prefix_cache_queries == 8.128902e06 and sample.prefix_cache_hits is None
    assert sample.prefix_cache_hit_rate == pytest.approx(0.0075, abs=1e-4)
    # Preemptions from the counter, not from the gauge of the last batch's retractions.
    assert sample.preemptions == 48
    assert sample.models == (MODEL,)


# SGLang's collector (python/sglang/srt/metrics/collector.py) counts cached prompt tokens per cache
# source (device, host, storage); the OpenMetrics exposition spells the prefix with an underscore.
SGLANG_COUNTERS = """\
# TYPE sglang_num_running_reqs gauge
sglang_num_running_reqs{model_name="m"} 4.0
# TYPE sglang_prompt_tokens counter
sglang_prompt_tokens_total{model_name="m"} 1000.0
# TYPE sglang_cached_tokens counter
sglang_cached_tokens_total{model_name="m",cache_source="device"} 300.0
sglang_cached_tokens_total{model_name="m",cache_source="host"} 100.0
# EOF
"""


def test_sglangs_cached_token_counters_summed_over_cache_sources_in_openmetrics_spelling() -> None:
    sample = load_sample_from_text(SGLANG_COUNTERS, "s", 1)
    assert sample.running == 4
    assert (sample.prefix_cache_queries, sample.prefix_cache_hits) == (1000, 400)
    assert sample.prefix_cache_hit_rate is None


OLDER_VLLM = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="a",engine="0"} 2.0
vllm:num_requests_running{model_name="a",engine="1"} 3.0
vllm:num_requests_running{model_name="b",engine="0"} 1.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="a",engine="0"} 4.0
vllm:num_requests_waiting{model_name="b",engine="0"} 1.0
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="a",engine="0"} 0.5
vllm:gpu_cache_usage_perc{model_name="b",engine="0"} 0.9
# TYPE vllm:gpu_prefix_cache_queries_total counter
vllm:gpu_prefix_cache_queries_total{model_name="a",engine="0"} 100.0
vllm:gpu_prefix_cache_queries_total{model_name="b",engine="0"} 50.0
# TYPE vllm:gpu_prefix_cache_hits_total counter
vllm:gpu_prefix_cache_hits_total{model_name="a",engine="0"} 60.0
vllm:gpu_prefix_cache_hits_total{model_name="b",engine="0"} 10.0
vllm:num_preemptions_total{model_name="a",engine="0"} 2
"""


def test_older_vllm_names_and_several_models_summed_over_their_label_sets() -> None:
    sample = load_sample_from_text(OLDER_VLLM, "s", 0)
    assert (sample.running, sample.waiting) == (6, 5)
    assert sample.kv_cache_usage == 0.9  # the fullest cache, not a sum of fractions
    assert (sample.prefix_cache_queries, sample.prefix_cache_hits) == (150, 70)
    assert sample.preemptions == 2  # an untyped line keeps its _total
    assert sample.models == ("a", "b")


def test_newer_names_win_when_both_are_published() -> None:
    text = OLDER_VLLM + '# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{model_name="a"} 0.25\n'
    assert load_sample_from_text(text, "s", 0).kv_cache_usage == 0.25


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("<html><body>Not Found</body></html>", "not Prometheus text exposition"),
        ("", "no vLLM or SGLang load metrics"),
        ("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1.5\n", "no vLLM or SGLang load"),
        ('vllm:num_requests_running{model_name="a" 1\n', "not Prometheus text exposition"),
    ],
)
def test_text_the_profiler_cannot_use_is_a_clear_error(text: str, reason: str) -> None:
    with pytest.raises(MetricsTextError, match=reason):
        load_sample_from_text(text, "s", 0)


def test_values_that_are_not_finite_are_left_out() -> None:
    text = "vllm:num_requests_running NaN\nvllm:num_requests_waiting 2\n"
    sample = load_sample_from_text(text, "s", 0)
    assert sample.running is None and sample.waiting == 2

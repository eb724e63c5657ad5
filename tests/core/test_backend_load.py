"""core/backend_load.py: what an LLM call met on its server, from sampled metrics."""

from __future__ import annotations

import threading

from otel_agent_profiler.core.backend_load import load_during
from otel_agent_profiler.core.profile import LoadSample
from otel_agent_profiler.live.load_history import LoadHistory

S = 1_000_000_000


def _sample(t_s: float, **values: float) -> LoadSample:
    return LoadSample(time_ns=round(t_s * S), source="http://vllm:8000/metrics", models=("m",), **values)


def test_gauges_from_the_sample_before_the_call_and_those_during_it() -> None:
    samples = [_sample(0, running=1, waiting=0), _sample(1, running=2, waiting=3), _sample(2, running=2, waiting=1),
               _sample(3, running=0, waiting=0)]  # fmt: skip
    load = load_during(samples, round(0.5 * S), round(2.5 * S))
    assert load is not None
    assert load.samples == 3
    assert load.running_mean == (1 + 2 + 2) / 3 and load.running_max == 2
    assert load.waiting_max == 3 and load.waiting_mean == (0 + 3 + 1) / 3


def test_a_call_shorter_than_the_interval_gets_the_state_it_arrived_into() -> None:
    samples = [_sample(0, running=4, waiting=7), _sample(1, running=0, waiting=0)]
    load = load_during(samples, round(0.2 * S), round(0.4 * S))
    assert load is not None and load.samples == 1 and load.waiting_max == 7


def test_no_recent_sample_means_no_load() -> None:
    samples = [_sample(0, running=4), _sample(10, running=0)]
    assert load_during(samples, 5 * S, 6 * S) is None
    assert load_during([], 0, S) is None


def test_counters_are_differences_across_the_call_and_survive_a_restart() -> None:
    samples = [_sample(0, prefix_cache_queries=100, prefix_cache_hits=50, preemptions=2),
               _sample(1, prefix_cache_queries=300, prefix_cache_hits=200, preemptions=3),
               _sample(2, prefix_cache_queries=500, prefix_cache_hits=250, preemptions=5)]  # fmt: skip
    load = load_during(samples, round(0.5 * S), round(1.5 * S))
    assert load is not None
    assert load.prefix_cache_hit_rate == (250 - 50) / (500 - 100)
    assert load.preemptions == 3
    restarted = [_sample(0, prefix_cache_queries=1000, prefix_cache_hits=900), _sample(1, prefix_cache_queries=40,
                 prefix_cache_hits=10)]  # fmt: skip
    load = load_during(restarted, round(0.2 * S), round(0.8 * S))
    assert load is not None and load.prefix_cache_hit_rate == 10 / 40


def test_metrics_a_server_does_not_publish_stay_none() -> None:
    load = load_during([_sample(0, running=1)], round(0.1 * S), round(0.2 * S))
    assert load is not None
    assert load.waiting_max is None and load.kv_cache_usage_max is None and load.prefix_cache_hit_rate is None
    assert load.preemptions is None


def test_history_is_bounded_and_picks_the_server_by_model() -> None:
    history = LoadHistory(max_samples=3)
    for t in range(10):
        history.add(LoadSample(time_ns=t * S, source="a", running=t, models=("llama",)))
    assert [s.running for s in history.samples("a")] == [7, 8, 9]
    load = history.load_during(8 * S, 9 * S, model="anything")
    assert load is not None and load.running_max == 9  # one server: it serves every call
    history.add(LoadSample(time_ns=9 * S, source="b", running=1, models=("qwen",)))
    assert history.load_during(9 * S, 9 * S, model="qwen") is not None
    qwen = history.load_during(9 * S, 9 * S, model="qwen")
    assert qwen is not None and qwen.source == "b"
    assert history.load_during(9 * S, 9 * S, model="mistral") is None
    assert history.load_during(9 * S, 9 * S) is None


def test_history_keeps_time_order_and_takes_samples_from_another_thread() -> None:
    history = LoadHistory()
    history.add(LoadSample(time_ns=5 * S, source="a", running=1))
    history.add(LoadSample(time_ns=4 * S, source="a", running=2))
    assert [s.time_ns for s in history.samples("a")] == [5 * S]
    thread = threading.Thread(target=lambda: [history.add(LoadSample(time_ns=(6 + i) * S, source="a")) for i in
                              range(100)])  # fmt: skip
    thread.start()
    thread.join()
    assert len(history.samples("a")) == 101 and history.sources() == ["a"]


def test_attach_sets_the_load_on_counted_llm_calls_only() -> None:
    from otel_agent_profiler.core.backend_load import attach_backend_load
    from tests.core.test_call_anatomy import server_attributes
    from tests.support.span_builders import CLIENT, SERVER, by_name, profile, span

    llm = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.system": "openai"}
    trace = profile([
        span("root", None, 0, 4 * S),
        span("call", "root", 1 * S, 3 * S, CLIENT, attributes=llm),
        span("server", "call", round(1.1 * S), round(2.9 * S), SERVER, attributes=server_attributes(0.5, 0.3, 0.9)),
        span("tool", "root", 3 * S, 4 * S, attributes={"gen_ai.operation.name": "execute_tool"}),
    ])  # fmt: skip
    history = LoadHistory()
    for t, waiting in ((0, 0), (1, 2), (2, 5), (3, 0)):
        history.add(LoadSample(time_ns=t * S, source="vllm", running=2, waiting=waiting, models=("m",)))
    assert attach_backend_load(trace, history) == 1
    spans = by_name(trace)
    load = spans["call"].backend_load
    assert load is not None and load.waiting_max == 5 and load.samples == 3
    assert spans["server"].backend_load is None and spans["tool"].backend_load is None


def test_a_servers_hit_rate_gauge_is_averaged_over_the_call_when_it_has_no_counters() -> None:
    samples = [_sample(0, prefix_cache_hit_rate=0.2), _sample(1, prefix_cache_hit_rate=0.6), _sample(2)]
    load = load_during(samples, round(0.5 * S), round(1.5 * S))
    assert load is not None and load.prefix_cache_hit_rate == (0.2 + 0.6) / 2


def test_a_call_finds_its_server_by_the_model_family() -> None:
    history = LoadHistory()
    history.add(LoadSample(time_ns=0, source="a", running=1, models=("gpt-4o-mini",)))
    history.add(LoadSample(time_ns=0, source="b", running=2, models=("llama",)))
    load = history.load_during(0, S, model="gpt-4o-mini-2024-07-18")
    assert load is not None and load.source == "a"


def test_attach_keeps_a_recorded_load_the_history_does_not_describe() -> None:
    from otel_agent_profiler.core.backend_load import attach_backend_load
    from tests.support.span_builders import CLIENT, by_name, profile, span

    llm = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "agent_profiler.backend.samples": 2,
           "agent_profiler.backend.waiting_max": 3.0}  # fmt: skip
    trace = profile([span("call", None, 100 * S, 101 * S, CLIENT, attributes=llm)])
    assert attach_backend_load(trace, LoadHistory()) == 0
    load = by_name(trace)["call"].backend_load
    assert load is not None and load.waiting_max == 3.0 and trace.backend_samples == []

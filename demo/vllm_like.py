"""The bundled server playing a self-hosted inference server: vLLM's scheduling, spans and metrics.

``FakeOpenAIServer(vllm_like=VllmLike(...))`` behaves like vLLM behind its OpenAI-compatible API:

* at most ``max_running`` chat requests run at once; the others wait in a queue, first come
  first served (vLLM's ``--max-num-seqs``), so concurrent calls really queue;
* a request's prefill takes the model's fixed time plus its *uncached* prompt tokens at
  ``prefill_per_token`` each (the prefix cache of ``fake_llm``), then it decodes one token per
  ``decode_per_token``;
* it continues the client's trace from the W3C ``traceparent`` header and exports one SERVER
  span ``llm_request`` per chat request, with vLLM's attributes (``gen_ai.latency.*`` in seconds,
  ``gen_ai.usage.prompt_tokens`` / ``completion_tokens``, ``gen_ai.request.id``, ...), through
  the real OTLP exporter to the endpoint it is given (or through a given ``TracerProvider``);
* ``GET /metrics`` serves Prometheus text with vLLM's metric names and types (prometheus_client):
  gauges ``vllm:num_requests_running``, ``vllm:num_requests_waiting``,
  ``vllm:kv_cache_usage_perc``; counters ``vllm:prompt_tokens_total``,
  ``vllm:generation_tokens_total``, ``vllm:num_preemptions_total``,
  ``vllm:prefix_cache_queries_total``, ``vllm:prefix_cache_hits_total``; histograms
  ``vllm:request_queue_time_seconds``, ``vllm:time_to_first_token_seconds``,
  ``vllm:request_prefill_time_seconds``, ``vllm:request_decode_time_seconds``,
  ``vllm:e2e_request_latency_seconds``. Every series has a ``model_name`` label, as vLLM's do.

Needs opentelemetry-sdk, an OTLP exporter and prometheus_client (the project's dev install).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

__all__ = ["METRICS_CONTENT_TYPE", "RequestTimes", "VllmLike"]

METRICS_CONTENT_TYPE = CONTENT_TYPE_LATEST

# vLLM's request-latency buckets (seconds), shortened at both ends.
_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0)
_PROPAGATOR = TraceContextTextMapPropagator()


@dataclass
class RequestTimes:
    """One chat request's life on the server, in ``time.monotonic()`` seconds and tokens."""

    arrived: float
    arrived_wall_ns: int
    admitted: float | None = None
    first_token: float | None = None
    finished: float | None = None
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0


class VllmLike:
    """vLLM's behaviour for ``FakeOpenAIServer``: a bounded batch, server spans and ``/metrics``.

    Args:
        max_running: requests that run at once; the rest wait (vLLM's ``--max-num-seqs``).
        otlp_endpoint: where to export the ``llm_request`` spans over OTLP, e.g.
            ``http://127.0.0.1:4317`` (gRPC) or ``http://127.0.0.1:4318`` (with ``otlp_protocol``
            ``"http/protobuf"``; ``/v1/traces`` is appended). None with no ``tracer_provider``:
            no spans.
        otlp_protocol: ``"grpc"`` (vLLM's default) or ``"http/protobuf"``.
        tracer_provider: a provider to create the spans with instead (an in-process engine).
        service_name: the ``service.name`` of the spans' resource.
        kv_cache_tokens: the KV cache's size in tokens, for ``vllm:kv_cache_usage_perc``.
    """

    def __init__(
        self,
        *,
        max_running: int = 2,
        otlp_endpoint: str | None = None,
        otlp_protocol: str = "grpc",
        tracer_provider: Any = None,
        service_name: str = "vllm",
        kv_cache_tokens: int = 32_768,
    ) -> None:
        if max_running < 1:
            raise ValueError("max_running must be at least 1")
        if otlp_protocol not in ("grpc", "http/protobuf"):
            raise ValueError("otlp_protocol must be 'grpc' or 'http/protobuf'")
        self.max_running = max_running
        self.kv_cache_tokens = kv_cache_tokens
        self._condition = threading.Condition()
        self._running = 0
        self._waiting = 0
        self._kv_tokens = 0
        self._own_provider: TracerProvider | None = None
        if tracer_provider is None and otlp_endpoint is not None:
            tracer_provider = self._own_provider = TracerProvider(
                resource=Resource.create({"service.name": service_name})
            )
            tracer_provider.add_span_processor(
                BatchSpanProcessor(_span_exporter(otlp_endpoint, otlp_protocol), schedule_delay_millis=200)
            )
        self._tracer = tracer_provider.get_tracer("demo.vllm_like") if tracer_provider is not None else None
        self.registry = CollectorRegistry()
        labels = ["model_name"]
        registry = self.registry
        self._running_gauge = Gauge(
            "vllm:num_requests_running", "Number of requests in model execution batches.", labels, registry=registry
        )
        self._waiting_gauge = Gauge(
            "vllm:num_requests_waiting", "Number of requests waiting to be processed.", labels, registry=registry
        )
        self._kv_gauge = Gauge(
            "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", labels, registry=registry
        )
        self._prompt_tokens = Counter(
            "vllm:prompt_tokens", "Number of prefill tokens processed.", labels, registry=registry
        )
        self._generation_tokens = Counter(
            "vllm:generation_tokens", "Number of generation tokens processed.", labels, registry=registry
        )
        self._preemptions = Counter(
            "vllm:num_preemptions", "Cumulative number of preemption from the engine.", labels, registry=registry
        )
        self._cache_queries = Counter(
            "vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.", labels,
            registry=registry,
        )  # fmt: skip
        self._cache_hits = Counter(
            "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", labels,
            registry=registry,
        )  # fmt: skip
        histogram: Callable[[str, str], Histogram] = lambda name, doc: Histogram(  # noqa: E731
            name, doc, labels, buckets=_LATENCY_BUCKETS, registry=registry
        )
        self._queue_time = histogram("vllm:request_queue_time_seconds", "Time spent in WAITING phase for request.")
        self._ttft = histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.")
        self._prefill_time = histogram("vllm:request_prefill_time_seconds", "Time spent in PREFILL phase for request.")
        self._decode_time = histogram("vllm:request_decode_time_seconds", "Time spent in DECODE phase for request.")
        self._e2e = histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.")
        self._models_seen: set[str] = set()

    # -- scheduling --

    def _touch(self, model: str) -> None:
        # Series appear once a model has been asked for, as vLLM's appear for its served model.
        if model not in self._models_seen:
            self._models_seen.add(model)
            for metric in (self._preemptions, self._cache_queries, self._cache_hits):
                metric.labels(model).inc(0)

    def _publish(self, model: str) -> None:
        self._running_gauge.labels(model).set(self._running)
        self._waiting_gauge.labels(model).set(self._waiting)
        self._kv_gauge.labels(model).set(min(1.0, self._kv_tokens / self.kv_cache_tokens))

    def admit(self, model: str, tokens: int, stopping: threading.Event) -> float:
        """Wait for a free slot in the batch (first come, first served); returns when admitted.

        Raises ``InterruptedError`` if ``stopping`` is set while waiting.
        """
        with self._condition:
            self._touch(model)
            self._waiting += 1
            self._publish(model)
            try:
                while self._running >= self.max_running:
                    if stopping.is_set():
                        raise InterruptedError("server stopping")
                    self._condition.wait(0.05)
            finally:
                self._waiting -= 1
            self._running += 1
            self._kv_tokens += tokens
            self._publish(model)
        return time.monotonic()

    def release(self, model: str, tokens: int) -> None:
        """Free the slot of a request that ran (finished, failed or aborted)."""
        with self._condition:
            self._running -= 1
            self._kv_tokens -= tokens
            self._publish(model)
            self._condition.notify()

    # -- what a finished request leaves behind --

    def record(
        self,
        model: str,
        times: RequestTimes,
        *,
        traceparent: str | None,
        request_id: str,
        request: dict[str, Any],
        error: str | None = None,
    ) -> None:
        """Count a request in the metrics and export its ``llm_request`` span."""
        finished = times.finished if times.finished is not None else time.monotonic()
        admitted = times.admitted if times.admitted is not None else finished
        first_token = times.first_token if times.first_token is not None else finished
        queue = admitted - times.arrived
        prefill = max(0.0, first_token - admitted)
        decode = max(0.0, finished - first_token)
        e2e = finished - times.arrived
        self._prompt_tokens.labels(model).inc(times.prompt_tokens)
        self._generation_tokens.labels(model).inc(times.completion_tokens)
        self._cache_queries.labels(model).inc(times.prompt_tokens)
        self._cache_hits.labels(model).inc(times.cached_tokens)
        self._queue_time.labels(model).observe(queue)
        if times.first_token is not None:
            self._ttft.labels(model).observe(first_token - times.arrived)
            self._prefill_time.labels(model).observe(prefill)
            self._decode_time.labels(model).observe(decode)
        self._e2e.labels(model).observe(e2e)
        if self._tracer is None:
            return
        context = _PROPAGATOR.extract({"traceparent": traceparent}) if traceparent else None
        attributes: dict[str, Any] = {
            "gen_ai.response.model": model,
            "gen_ai.request.id": request_id,
            "gen_ai.usage.prompt_tokens": times.prompt_tokens,
            "gen_ai.usage.completion_tokens": times.completion_tokens,
            "gen_ai.latency.time_in_queue": queue,
            "gen_ai.latency.time_to_first_token": first_token - times.arrived,
            "gen_ai.latency.e2e": e2e,
            "gen_ai.latency.time_in_scheduler": queue,
            "gen_ai.latency.time_in_model_prefill": prefill,
            "gen_ai.latency.time_in_model_decode": decode,
            "gen_ai.latency.time_in_model_inference": prefill + decode,
        }
        for key, attribute in (
            ("temperature", "gen_ai.request.temperature"),
            ("top_p", "gen_ai.request.top_p"),
            ("max_tokens", "gen_ai.request.max_tokens"),
            ("n", "gen_ai.request.n"),
        ):
            value = request.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                attributes[attribute] = value
        span = self._tracer.start_span(
            "llm_request",
            context=context,
            kind=SpanKind.SERVER,
            attributes=attributes,
            start_time=times.arrived_wall_ns,
        )
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, error))
        span.end(end_time=times.arrived_wall_ns + round(e2e * 1e9))

    def metrics_text(self) -> bytes:
        """``/metrics``: the Prometheus text exposition of the registry."""
        return generate_latest(self.registry)

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Export the spans still buffered (those of the provider this object made)."""
        if self._own_provider is None:
            return True
        return self._own_provider.force_flush(round(timeout_s * 1000))

    def shutdown(self) -> None:
        """Flush and stop the exporter this object made; a given provider is left to its owner."""
        if self._own_provider is not None:
            self._own_provider.shutdown()
            self._own_provider = None


def _span_exporter(endpoint: str, protocol: str) -> Any:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        return GrpcExporter(endpoint=endpoint, insecure=endpoint.startswith("http://"))
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

    url = endpoint if endpoint.rstrip("/").endswith("/v1/traces") else endpoint.rstrip("/") + "/v1/traces"
    return HttpExporter(endpoint=url)

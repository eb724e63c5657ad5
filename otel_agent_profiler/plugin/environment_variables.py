"""Environment variables that configure the live profiler.

Every option of ``install()`` and ``AgentProfilerSpanProcessor`` can also be set here; an
explicit argument wins over the variable, which wins over the default. A variable holding a
value that cannot be used is reported in the log and the default is used instead.
"""

OTEL_AGENT_PROFILER_ENABLED = "OTEL_AGENT_PROFILER_ENABLED"
"""``true`` (default) or ``false``: with ``false`` the zero-code setup leaves the profiler out."""

OTEL_AGENT_PROFILER_MAX_TRACES = "OTEL_AGENT_PROFILER_MAX_TRACES"
"""Traces held in memory at once while they complete (default 1000). When a new trace would
exceed it, the oldest trace's spans are exported unprofiled."""

OTEL_AGENT_PROFILER_MAX_SPANS_PER_TRACE = "OTEL_AGENT_PROFILER_MAX_SPANS_PER_TRACE"
"""Spans held per trace (default 10000). A trace that grows past it is exported unprofiled."""

OTEL_AGENT_PROFILER_TRACE_TIMEOUT = "OTEL_AGENT_PROFILER_TRACE_TIMEOUT"
"""Seconds from a trace's first span to wait for it to complete (default 60), however busy it
still is. After that the trace is profiled with the spans that ended; spans ending later are
exported unprofiled."""

OTEL_AGENT_PROFILER_SAMPLE_RATE = "OTEL_AGENT_PROFILER_SAMPLE_RATE"
"""Fraction of traces to profile, 0 to 1 (default 1). Every span is still exported."""

OTEL_AGENT_PROFILER_CATEGORY_OVERRIDES = "OTEL_AGENT_PROFILER_CATEGORY_OVERRIDES"
"""Categories by span name pattern, e.g. ``fetch_*=tool,*memory*=memory`` (shell-style
patterns, first match wins; they beat the conventions, an ``agent_profiler.category``
attribute beats them)."""

OTEL_AGENT_PROFILER_PRICES = "OTEL_AGENT_PROFILER_PRICES"
"""Price table for cost: a path to a JSON file, or the JSON itself, mapping model names to
``{"input": ..., "output": ..., "cached_input": ...}`` in US dollars per million tokens, laid over
the built-in list prices (``core.pricing.BUILT_IN_PRICES``); ``{}`` prices nothing."""

OTEL_AGENT_PROFILER_CONTEXT_WINDOWS = "OTEL_AGENT_PROFILER_CONTEXT_WINDOWS"
"""Context windows in tokens by model, for ``agent_profiler.context_window_use`` and the
large-prompt finding: a path to a JSON file, or the JSON itself, ``{"my-model": 32000}``, laid over
the built-in windows (``core.findings.DEFAULT_CONTEXT_WINDOWS``)."""

OTEL_AGENT_PROFILER_METRICS = "OTEL_AGENT_PROFILER_METRICS"
"""``true`` (default) or ``false``: record the profile metrics."""

OTEL_AGENT_PROFILER_ENRICH_SPANS = "OTEL_AGENT_PROFILER_ENRICH_SPANS"
"""``true`` (default) or ``false``: add ``agent_profiler.*`` attributes to exported spans."""

OTEL_AGENT_PROFILER_SPAN_ATTRIBUTES = "OTEL_AGENT_PROFILER_SPAN_ATTRIBUTES"
"""``essential`` (default) or ``all``: which ``agent_profiler.*`` attributes spans other than a
trace's roots get. ``essential``: the category, self time, the span's critical-path time and
whether it is on the critical path, a priced call's cost and an inference server's load; ``all``
adds the operation, time to first token, context-window use and an LLM call's server phases. Roots
always get all of them and the trace's totals."""

OTEL_AGENT_PROFILER_CONSOLE_REPORT = "OTEL_AGENT_PROFILER_CONSOLE_REPORT"
"""``true`` or ``false`` (default): print a report of the profiled traces to standard error when
the process exits."""

OTEL_AGENT_PROFILER_MAX_OPERATIONS = "OTEL_AGENT_PROFILER_MAX_OPERATIONS"
"""Distinct operation names (models, tools, agents) used as metric attribute values (default
100); later ones are recorded as ``other``, which keeps metric cardinality bounded."""

OTEL_AGENT_PROFILER_MAX_BUFFER_BYTES = "OTEL_AGENT_PROFILER_MAX_BUFFER_BYTES"
"""Bytes of spans held at most, estimated (default 268435456, 256 MiB): the spans of traces
still running plus spans waiting to be handed to the exporters. Over it, the oldest traces are
exported unprofiled."""

OTEL_AGENT_PROFILER_SHUTDOWN_TIMEOUT = "OTEL_AGENT_PROFILER_SHUTDOWN_TIMEOUT"
"""Seconds ``shutdown()`` spends profiling what is held and handing it to the exporters (default
30). Spans the exporters could not take by then are counted and logged as lost; the exporting
processors are shut down after that, with their own timeouts."""

OTEL_AGENT_PROFILER_BACKEND_METRICS = "OTEL_AGENT_PROFILER_BACKEND_METRICS"
"""Prometheus endpoints of the inference servers the application calls, separated by commas, e.g.
``http://vllm:8000/metrics`` (vLLM or SGLang; default none). Each is polled every second while the
application runs, and every LLM call gets the load its server showed while it ran (requests
running and waiting, KV-cache use, prefix-cache hit rate, preemptions), as
``agent_profiler.backend.*`` attributes. A URL that is not http(s) is logged and left out."""

OTEL_AGENT_PROFILER_BACKEND_METRICS_INTERVAL = "OTEL_AGENT_PROFILER_BACKEND_METRICS_INTERVAL"
"""Seconds between polls of ``OTEL_AGENT_PROFILER_BACKEND_METRICS`` (default 1). Shorter describes
short calls better; each poll is one HTTP request per server."""

OTEL_AGENT_PROFILER_SOURCE_HEADERS = "OTEL_AGENT_PROFILER_SOURCE_HEADERS"
"""Headers the offline commands send to a trace store (``--jaeger``, ``--tempo``, ``--phoenix``), as
``key=value`` pairs separated by commas with percent-encoded values, like ``OTEL_EXPORTER_OTLP_HEADERS``:
``Authorization=Bearer%20TOKEN`` or, for Grafana Cloud, ``Authorization=Basic%20<base64 of user:token>``."""

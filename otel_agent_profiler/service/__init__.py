"""``otel-agent-profiler serve``: an OTLP receiver that profiles traces from any number of services.

Spans arrive over OTLP/gRPC or OTLP/HTTP (``receivers``), are grouped by trace until the trace
goes quiet (``live.trace_assembly``), profiled with the core, enriched with the ``agent_profiler.*``
attributes (``spans``) and forwarded upstream with the profile metrics (``forwarder``).
``app`` wires it together; ``pipeline`` holds the state shared by the receivers.

Internal: used through ``otel-agent-profiler serve``, not imported.
"""

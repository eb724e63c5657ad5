"""Reading traces where they already live: Jaeger, Grafana Tempo and Arize Phoenix, over HTTP.

``fetch.fetch_traces`` asks a store for the traces a ``query.StoreQuery`` names and reads each
answer as a trace file is read (``adapters.files``), so ``offline.loading.profile_trace_files`` profiles
them exactly as it profiles the same traces read from a file. One module per store; ``http``
holds what they share (headers, TLS, timeouts, retries, bounded concurrency). Only ``query``
is free of the HTTP library, which the command line imports when a store is read.
``prometheus`` reads the inference servers' load back from Prometheus, for the LLM calls.

Internal: used through the command line's ``--jaeger``, ``--tempo``, ``--phoenix`` and
``--prometheus``, not imported.
"""

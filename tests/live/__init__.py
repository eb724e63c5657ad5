"""Tests of live profiling: enrichment, metrics, backend polling (otel_agent_profiler.live)."""

"""Tests of reading trace stores (otel_agent_profiler.stores)."""

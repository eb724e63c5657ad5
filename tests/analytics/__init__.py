"""Tests of the cross-trace analytics (otel_agent_profiler.analytics)."""

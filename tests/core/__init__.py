"""Tests of the analysis core (otel_agent_profiler.core)."""

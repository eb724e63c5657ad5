"""Tests of the input and output formats (otel_agent_profiler.adapters)."""

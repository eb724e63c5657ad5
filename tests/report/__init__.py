"""Tests of the reports (otel_agent_profiler.report)."""

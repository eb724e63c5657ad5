"""Tests of the command line (otel_agent_profiler.cli)."""

"""Tests of the OTLP service, ``serve`` (otel_agent_profiler.service)."""

"""Tests of the OpenTelemetry plugin: processor, wiring, decorators (otel_agent_profiler.plugin)."""

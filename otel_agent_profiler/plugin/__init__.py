"""The in-process OpenTelemetry SDK plugin: the span processor, its wiring and configuration, decorators.

Internal: its modules are imported through the package's public names (``install``,
``AgentProfilerSpanProcessor``, the decorators), not directly.
"""

"""The in-process OpenTelemetry SDK plugin: the span processor, its wiring and configuration, decorators."""

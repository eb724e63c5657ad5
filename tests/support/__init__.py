"""Shared test helpers (importable as ``tests.support.<module>``); not tests themselves."""

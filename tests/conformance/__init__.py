"""Conformance: real agent frameworks in their own virtual environments."""

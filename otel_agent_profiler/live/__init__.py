"""What the in-process plugin and ``serve`` share: trace buffering, span attributes, profile metrics.

Internal: used by ``plugin`` and ``service`` only.
"""

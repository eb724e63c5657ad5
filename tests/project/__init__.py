"""Tests of the whole project: layout, docs, examples, demo, deployment, static checks, benchmarks, public API."""

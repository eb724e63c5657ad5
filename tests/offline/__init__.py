"""Tests of the offline pipeline: on-disk shards, worker processes, bad inputs."""

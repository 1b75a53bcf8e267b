"""Benchmarks: each prints tiermem's figure beside a baseline measured in the same run."""

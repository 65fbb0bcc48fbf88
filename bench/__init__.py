"""Benchmarks: `python -m bench` (or `make bench`) compares the engine with a raw client loop."""

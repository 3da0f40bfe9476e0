"""Benchmarks: ``make bench`` (``perf``), ``make bench-gpu`` (``gpu``), their timers and the sweep step."""

"""Benchmarks and calibration scripts (python -m bench.calibrate)."""

"""Chaos under load on a real control plane (python -m bench chaos); see bench/bench_chaos.py."""

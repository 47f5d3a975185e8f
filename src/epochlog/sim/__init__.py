"""Deterministic simulation: virtual time (loop.py) under which epochlog's own code runs
unchanged on simulated seams."""

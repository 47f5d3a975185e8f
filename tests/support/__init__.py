"""Shared harness for tests that run real broker processes and real clients."""

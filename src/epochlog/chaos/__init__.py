"""Process-level chaos (``epochlog chaos``): real brokers in network namespaces under
real faults, judged by the simulator's checkers."""

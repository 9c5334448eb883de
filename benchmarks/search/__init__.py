"""The pieces of benchmarks/search_quality.py: recorded landscapes, the one set of rules every
strategy is run under, and Kernel Tuner as a peer. Everything here is REPLAY of recorded
measurements."""

"""Adapters that serve autotune's search to other tools (Ray Tune)."""

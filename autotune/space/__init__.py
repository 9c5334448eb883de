"""space."""

"""CUPID evaluation: infer → decompose → match → judge."""

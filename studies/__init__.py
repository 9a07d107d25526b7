"""Studies that compose both halves of the harness: they synthesize data (synthesis/) and
evaluate models on it (evaluation/), so they live above both, and neither half imports them."""

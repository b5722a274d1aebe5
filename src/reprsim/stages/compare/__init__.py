"""Stage compare: every measure between every layer pair of two models, and summaries over all pairs."""

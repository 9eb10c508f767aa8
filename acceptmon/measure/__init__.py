"""Records to numbers: per-run aggregates, token counts, windows and the A/B comparison (pure)."""

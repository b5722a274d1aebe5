"""Statistics of the results: half-sample intervals and chance levels (resampling), the best match of a layer corrected
for its choice (best_match)."""

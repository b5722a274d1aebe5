"""Stage extract: every layer's activations of one model on one dataset into a Zarr store."""

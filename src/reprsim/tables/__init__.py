"""What the stages exchange through tables: the names and the arithmetic one stage writes and another reads (layer
pairing, block structure, pair series, stitching statistics, grounding outcomes, the universality study's verdicts
and depth groups). Torch-free and free of measure code, so the report can read them."""

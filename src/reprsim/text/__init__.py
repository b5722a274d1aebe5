"""Words defined by the data: the segmentation of each text into words and the token -> word maps (pure Python and numpy
where possible)."""

"""Drawing similarity: the one drawing code of the report's similarity figures (drawing) and the public plots from a
pair table (plots)."""

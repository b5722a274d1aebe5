"""Stage data: prepare datasets (built-in generator, local files, Hugging Face hub) into tables."""

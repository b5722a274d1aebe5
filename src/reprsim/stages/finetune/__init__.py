"""Stage finetune: fine-tuning, and what it did to each layer (truncation, skipping blocks, layer views)."""

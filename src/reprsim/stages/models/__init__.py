"""Stage models: materialise models (hub, local directory, installed package, random init), pretrain language
models from scratch, and copy a pretraining's checkpoints out as models."""

"""The configuration's checks by topic, which reprsim.config runs: the schema's problems in words, the hub keys, the
cross-references, what needs labels, grounding, word rows and attention maps, brought activations, seeds and
checkpoints expanded, the universality study, the models' transformers configs, and the rows a measure needs.
Torch-free: they run whenever Snakemake builds the DAG."""

"""Torch-free helpers the Snakemake rules need: code dependencies, results paths, job resources."""

"""Snakemake entry point: one `source: hf` model or dataset downloaded into the hub cache (rules/hub.smk, a local
rule: it runs where Snakemake runs, with the network)."""
import json

from reprsim.io.hub import fetch_model
from reprsim.io.logs import tee_to_log
from reprsim.io.outputs import write_text
from reprsim.stages.data.hub import fetch_dataset

with tee_to_log(snakemake.log[0]):
    fetch = fetch_model if snakemake.wildcards.kind == "model" else fetch_dataset
    fetched = fetch(snakemake.wildcards.name, json.loads(snakemake.params.spec))
    print(f"{fetched['kind']} {fetched['name']}: {fetched['id']} at {fetched['commit']}, {fetched['files']} files, "
          f"{fetched['bytes'] / 1e6:.1f} MB in {fetched['cache']}", flush=True)
    write_text(snakemake.output.fetched, json.dumps(fetched, indent=2, sort_keys=True) + "\n")

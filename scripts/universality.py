"""Snakemake entry point: what is universal, from the pair tables (rules/universality.smk)."""
import json
from pathlib import Path

from reprsim.io.logs import tee_to_log
from reprsim.io.outputs import write_parquet
from reprsim.io.tables import read_tables
from reprsim.stages.grounding.competence import best_layers
from reprsim.stages.universality.statement import statement
from reprsim.stages.universality.study import Study, select, with_dimension_placebos
from reprsim.stages.universality.tables import universality_tables

with tee_to_log(snakemake.log[0]):
    config = json.loads(snakemake.params.study)
    specs = json.loads(snakemake.params.models)
    registered = json.loads(snakemake.params.measures)
    labels = config["measures"] or list(registered)
    ordered = {factor: {level: config["factors"][factor][level] for level in levels}
               for factor, levels in json.loads(snakemake.params.levels)}
    metas = {Path(d).name: json.loads((Path(d) / "meta.json").read_text()) for d in snakemake.input.models}
    placebos = json.loads(snakemake.params.placebos)
    ordered, specs, metas = with_dimension_placebos(ordered, specs, metas, placebos)
    study = Study(reference=config["reference"], floor=config["floor"], factors=ordered,
                  margin=float(config["margin"]), confidence=float(snakemake.params.confidence), specs=specs,
                  measures={label: registered[label] for label in labels}, seed_draws=int(config["seed_draws"]),
                  seed=int(snakemake.params.seed), params=json.loads(snakemake.params.params),
                  conditionings=json.loads(snakemake.params.conditionings))
    models = list(specs)
    where = (snakemake.params.dataset, snakemake.params.representation, labels, models)
    pairs = select(read_tables([snakemake.input.pairs, *snakemake.input.placebos]), *where)
    replicates = select(read_tables([snakemake.input.replicates, *snakemake.input.placebo_replicates]), *where)
    grounding = read_tables(snakemake.input.measure_tests) if snakemake.input.measure_tests else None
    # each model's competence on the shared probe: its best-decoding layer's held-out accuracy and the chance level
    competence = (best_layers(read_tables(snakemake.input.competence))[["accuracy", "ci_low", "ci_high", "chance",
                                                                        "layer"]].to_dict("index")
                  if snakemake.input.competence else {})
    # the functional sense: the stitch jobs' tables (none without universality.function)
    function = ((read_tables(snakemake.input.function), read_tables(snakemake.input.function_replicates))
                if snakemake.input.function else None)
    table, senses, curve, claims, controls = universality_tables(
        pairs, replicates, study, metas, grounding, competence, function,
        json.loads(snakemake.params.function_left_out))
    sentences = statement(table, claims, study, senses, controls)
    for text in sentences["text"]:
        print(text, flush=True)
    write_parquet(snakemake.output.table, table)
    write_parquet(snakemake.output.senses, senses)
    write_parquet(snakemake.output.controls, controls)
    write_parquet(snakemake.output.convergence, curve)
    write_parquet(snakemake.output.claims, claims)
    write_parquet(snakemake.output.statement, sentences)

"""The `reprsim` command: check a configuration, inspect and verify outputs.

The workflow itself runs with `snakemake` (see the user guide, docs/getting-started.md); this command is for the
questions a user asks around it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from reprsim.config import SCHEMA_PATH, ConfigError, load_yaml, validate_config
from reprsim.workflow import paths


def _validate(args: argparse.Namespace) -> int:
    try:
        config = validate_config(load_yaml(args.config), args.schema)
    except ConfigError as error:
        print(error, file=sys.stderr)
        return 2
    print(
        f"{args.config}: valid ({len(config['datasets'])} dataset(s), {len(config['models'])} model(s))"
    )
    return 0


def _plan(args: argparse.Namespace) -> int:
    from reprsim.stages.data.prepare import DatasetError, local_split_rows
    from reprsim.workflow.dag import DagError
    from reprsim.workflow.planning import format_plan, make_plan
    from reprsim.workflow.predicted import UnknownSize

    def local_rows(name: str, spec: dict) -> dict[str, int]:
        try:
            return local_split_rows(name, spec)
        except DatasetError as error:  # not there yet: priced as unknown, named in the plan
            raise UnknownSize(str(error)) from error

    try:
        validate_config(load_yaml(args.config))
    except ConfigError as error:
        print(error, file=sys.stderr)
        return 2
    try:
        plan = make_plan(args.config, args.directory, local_rows)
    except DagError as error:
        print(error, file=sys.stderr)
        return 1
    print(format_plan(plan))
    return 0


def _inspect(args: argparse.Namespace) -> int:
    path = Path(args.path)
    if path.suffix == ".zarr":
        from reprsim.io.integrity import CorruptOutputError
        from reprsim.io.store import array_names, open_store

        try:
            store = open_store(path)
        except CorruptOutputError as error:
            print(error, file=sys.stderr)
            return 1
        arrays = {name: {"shape": list(store[name].shape), "dtype": str(store[name].dtype)}
                  for name in array_names(store)}
        # attrs hold "truncated": per split, the examples longer than extraction.max_length tokens
        print(json.dumps({"arrays": arrays, "attrs": dict(store.attrs)}, indent=2, default=str))
        return 0
    meta = path / "meta.json"
    if meta.is_file():
        print(meta.read_text())
        return 0
    print(f"{path}: neither an activation store (*.zarr) nor a directory with meta.json", file=sys.stderr)
    return 2


def _verify(args: argparse.Namespace) -> int:
    from reprsim.io.verify import remove_temporaries, verify_results

    try:
        found = verify_results(args.results)
    except FileNotFoundError as error:
        print(error, file=sys.stderr)
        return 2
    for problem in found.problems:
        print(problem)
    temporaries = found.temporaries
    if args.clean:
        removed, temporaries = remove_temporaries(temporaries)
        for path in removed:
            print(f"{path}: leftover temporary removed")
    for path in temporaries:
        print(f"{path}: leftover temporary of an interrupted write"
              + ("; kept: its writer still runs" if args.clean else
                 "; delete it when no workflow runs (reprsim verify --clean)"))
    checked = ", ".join(f"{count} {kind}(s)" for kind, count in found.checked.items()) or "no outputs"
    print(f"verify {args.results}: checked {checked}; {len(found.problems)} problem(s), "
          f"{len(temporaries)} leftover temporary file(s)")
    return 1 if found.problems or temporaries else 0


def _parse_param(text: str) -> tuple[str, object]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"--param expects key=value; got {text!r}")
    key, raw = text.split("=", 1)
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw  # a bare word such as estimator=unbiased
    return key, value


def _metric(args: argparse.Namespace) -> int:
    import numpy as np

    from reprsim.metrics.api import compute

    try:
        result = compute(args.name, np.load(args.x), np.load(args.y), **dict(args.param))
    except (ValueError, TypeError) as error:
        print(f"reprsim metric {args.name}: {error}", file=sys.stderr)
        return 2
    print(json.dumps({"value": result.value, "meta": result.meta}, default=str))
    return 0


def _fetch(args: argparse.Namespace) -> int:
    """Every `source: hf` model and dataset of a config into the hub cache (a login node, before a cluster study)."""
    from reprsim.io.hub import NotCached, cache_dir, fetch_model, hub_specs
    from reprsim.stages.data.hub import fetch_dataset
    from reprsim.stages.data.validate import DatasetError

    try:
        config = validate_config(load_yaml(args.config))
    except ConfigError as error:
        print(error, file=sys.stderr)
        return 2
    wanted = hub_specs(config)
    if not wanted:
        print(f"{args.config}: no `source: hf` model or dataset; nothing to fetch")
        return 0
    total, failed = 0, 0
    for kind, name, spec in wanted:
        try:
            fetched = (fetch_model if kind == "model" else fetch_dataset)(name, spec)
        except (NotCached, DatasetError) as error:
            print(error, file=sys.stderr)
            failed += 1
            continue
        total += fetched["bytes"]
        print(f"{kind:8} {name:24} {spec['id']} @ {fetched['commit'][:12]}  {fetched['files']:4} files  "
              f"{fetched['bytes'] / 1e6:10.1f} MB", flush=True)
    print(f"{len(wanted) - failed} of {len(wanted)} fetched, {total / 1e9:.2f} GB, into {cache_dir()}")
    return 1 if failed else 0


def _export_activations(args: argparse.Namespace) -> int:
    """One split's pooled rows of an activation store as a brought model's file (config `source: activations`)."""
    from reprsim.io.integrity import CorruptOutputError
    from reprsim.stages.extract.brought import export_activations

    try:
        written = export_activations(args.store, args.out, split=args.split, pooling=args.pooling, format=args.format)
    except (CorruptOutputError, FileNotFoundError, KeyError, ValueError) as error:
        print(f"reprsim export-activations: {error}", file=sys.stderr)
        return 2
    print(f"{args.store} ({args.split}, pooled/{args.pooling}) -> {written}")
    return 0


def _measures(args: argparse.Namespace) -> int:
    from reprsim.metrics import catalogue

    print(catalogue.markdown() if args.markdown else catalogue.text_table(), end="" if args.markdown else "\n")
    return 0


def _heatmap(args: argparse.Namespace) -> int:
    """One model pair's layer x layer heatmaps, drawn on demand from whichever pair job's table holds the pair (the
    workflow draws them itself only while pairs are computed one per job: similarity.block_size 1)."""
    from reprsim.stages.report.on_demand import OnDemandError, draw

    configfile = args.configfile or ("config/config.yaml" if Path("config/config.yaml").is_file() else None)
    try:
        out = draw(Path(args.results), args.representation, args.dataset, args.model_a, args.model_b, configfile,
                   Path(args.out) if args.out else None)
    except OnDemandError as error:
        print(f"reprsim heatmap: {error}", file=sys.stderr)
        return error.code
    print(out)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="reprsim", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    validate = commands.add_parser("validate", help="check a workflow configuration file against the schema")
    validate.add_argument("config", help="YAML configuration file")
    validate.add_argument("--schema", default=str(SCHEMA_PATH), help="schema file (default: the repository's)")
    validate.set_defaults(run=_validate)
    plan = commands.add_parser("plan", help="what a config will cost before anything runs: jobs per rule, "
                               "GPU- and CPU-hours per stage, disk, the largest job's memory, cluster batching, "
                               "the rules whose jobs ask for more time than a partition allows "
                               "(REPRSIM_SLURM_GPU_TIME_LIMIT, REPRSIM_SLURM_CPU_TIME_LIMIT)")
    plan.add_argument("config", help="YAML configuration file")
    plan.add_argument("--directory", default=".", help="working directory the workflow runs in (where results/ "
                      "is; outputs already there are read instead of predicted); default: here")
    plan.set_defaults(run=_plan)
    inspect = commands.add_parser("inspect", help="summarise an activation store, model or dataset directory")
    inspect.add_argument("path")
    inspect.set_defaults(run=_inspect)
    verify = commands.add_parser("verify", help="check every output of a results tree: files readable, "
                                 "recorded checksums, no leftover temporaries (exit 1 on any problem)")
    verify.add_argument("results", nargs="?", default=paths.RESULTS,
                        help=f"results directory (default: {paths.RESULTS})")
    verify.add_argument("--clean", action="store_true",
                        help="delete leftover temporaries (run it when no workflow runs)")
    verify.set_defaults(run=_verify)
    metric = commands.add_parser("metric", help="one similarity measure between two (n, d) .npy arrays, as JSON")
    metric.add_argument("name", help="measure name, e.g. cka, svcca, pwcca, procrustes")
    metric.add_argument("x", help="X.npy, shape (n, d1)")
    metric.add_argument("y", help="Y.npy, shape (n, d2)")
    metric.add_argument("--param", action="append", default=[], type=_parse_param, metavar="KEY=VALUE",
                        help="measure parameter (repeatable), e.g. --param estimator=unbiased")
    metric.set_defaults(run=_metric)
    fetch = commands.add_parser("fetch", help="download every `source: hf` model and dataset of a config into the "
                                "Hugging Face cache, with sizes (run it where the network is, e.g. a login node)")
    fetch.add_argument("config", help="YAML configuration file")
    fetch.set_defaults(run=_fetch)
    export = commands.add_parser("export-activations", help="write one split's pooled rows of an activation store "
                                 "as a brought model's file (models.NAME.source: activations)")
    export.add_argument("store", help="an activation store, e.g. results/activations/sst2/minilm.zarr")
    export.add_argument("out", help="what to write: X.npz, X.safetensors, X.zarr, or a directory of .npy files")
    export.add_argument("--split", default="test", help="the split whose rows are written (default: test)")
    export.add_argument("--pooling", default="mean", choices=["mean", "cls", "last"],
                        help="the pooled representation written (default: mean)")
    export.add_argument("--format", default=None, choices=["npy", "npz", "safetensors", "zarr"],
                        help="default: from OUT's suffix (.npz, .safetensors, .zarr; else a directory of .npy files)")
    export.set_defaults(run=_export_activations)
    measures = commands.add_parser("measures", help="every similarity measure with its declared properties "
                                   "(kind, range, symmetry, invariances, rows needed, cost)")
    measures.add_argument("--markdown", action="store_true", help="the docs page (docs/measures.md) instead")
    measures.set_defaults(run=_measures)
    heatmap = commands.add_parser("heatmap", help="one model pair's layer x layer heatmaps from the pair tables "
                                  "(the workflow draws them only with similarity.block_size 1; with larger blocks, "
                                  "draw a pair's here)")
    heatmap.add_argument("model_a", help="a model of the pair (either order)")
    heatmap.add_argument("model_b", help="the other model (the same model for a model against itself)")
    heatmap.add_argument("--representation", default="mean",
                         help="the pooled representation compared, as in results/pairs/REPRESENTATION (default: mean)")
    heatmap.add_argument("--dataset", default=None,
                         help="the dataset (default: the only one under RESULTS/pairs/REPRESENTATION)")
    heatmap.add_argument("--results", default=paths.RESULTS, help=f"results directory (default: {paths.RESULTS})")
    heatmap.add_argument("--configfile", default=None,
                         help="the study's configuration, for grouping the panels by measure family (default: "
                         "config/config.yaml if there is one)")
    heatmap.add_argument("--out", default=None, help="the PNG to write (default: the workflow's path, "
                         "RESULTS/figures/pairs/REPRESENTATION/DATASET/MODEL_A__MODEL_B.png, names sorted)")
    heatmap.set_defaults(run=_heatmap)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())

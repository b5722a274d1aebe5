"""The `reprsim` command: check a configuration, inspect outputs.

The workflow itself runs with `snakemake` (see README); this command is for the
questions a user asks around it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from reprsim.config import SCHEMA_PATH, ConfigError, load_yaml, validate_config


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


def _inspect(args: argparse.Namespace) -> int:
    path = Path(args.path)
    if path.suffix == ".zarr":
        from reprsim.io.store import open_store

        store = open_store(path)
        arrays = {name: {"shape": list(array.shape), "dtype": str(array.dtype)}
                  for name, array in store.arrays()}
        for group_name, group in store.groups():
            arrays.update({f"{group_name}/{name}": {"shape": list(a.shape), "dtype": str(a.dtype)}
                           for name, a in group.arrays()})
        print(json.dumps({"arrays": arrays, "attrs": dict(store.attrs)}, indent=2, default=str))
        return 0
    meta = path / "meta.json"
    if meta.is_file():
        print(meta.read_text())
        return 0
    print(f"{path}: neither an activation store (*.zarr) nor a directory with meta.json", file=sys.stderr)
    return 2


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

    from reprsim.metrics import compute

    try:
        result = compute(args.name, np.load(args.x), np.load(args.y), **dict(args.param))
    except (ValueError, TypeError) as error:
        print(f"reprsim metric {args.name}: {error}", file=sys.stderr)
        return 2
    print(json.dumps({"value": result.value, "meta": result.meta}, default=str))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="reprsim", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    validate = commands.add_parser("validate", help="check a workflow configuration file against the schema")
    validate.add_argument("config", help="YAML configuration file")
    validate.add_argument("--schema", default=str(SCHEMA_PATH), help="schema file (default: the repository's)")
    validate.set_defaults(run=_validate)
    inspect = commands.add_parser("inspect", help="summarise an activation store, model or dataset directory")
    inspect.add_argument("path")
    inspect.set_defaults(run=_inspect)
    metric = commands.add_parser("metric", help="one similarity measure between two (n, d) .npy arrays, as JSON")
    metric.add_argument("name", help="measure name, e.g. cka, svcca, pwcca, procrustes")
    metric.add_argument("x", help="X.npy, shape (n, d1)")
    metric.add_argument("y", help="Y.npy, shape (n, d2)")
    metric.add_argument("--param", action="append", default=[], type=_parse_param, metavar="KEY=VALUE",
                        help="measure parameter (repeatable), e.g. --param estimator=unbiased")
    metric.set_defaults(run=_metric)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())

"""One model pair's layer x layer heatmaps drawn on demand (`reprsim heatmap`): with pairs computed in blocks
(similarity.block_size > 1) the workflow draws no per-pair heatmaps, which would grow like the square of the models.
The pair's rows are read from whichever pair job's table holds them (reprsim.workflow.pair_blocks), and the figure
is the one rule pair_heatmap draws."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import yaml

from reprsim.config import load_yaml
from reprsim.io.integrity import CorruptOutputError
from reprsim.measure_aliases import resolve_section


class OnDemandError(RuntimeError):
    """What was looked for, and where, that is not there; `code` is the command's exit status."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


def dataset_directory(results: Path, representation: str, dataset: str | None) -> Path:
    """RESULTS/pairs/REPRESENTATION/DATASET; `dataset` None: the only one there."""
    under = Path(results) / "pairs" / representation
    if not under.is_dir():
        raise OnDemandError(f"no pair tables of representation {representation!r}: {under} is not a directory (run "
                            "the workflow's compare stage first, or pass --results / --representation)")
    datasets = sorted(path.name for path in under.iterdir() if path.is_dir())
    if dataset is None:
        if len(datasets) != 1:
            raise OnDemandError(f"{under} holds {len(datasets)} datasets"
                                + (f" ({', '.join(datasets)}); name one with --dataset" if datasets else ""))
        return under / datasets[0]
    if dataset not in datasets:
        raise OnDemandError(f"no pair tables of dataset {dataset!r} under {under}"
                            + (f" (it has {', '.join(datasets)})" if datasets else " (it has no dataset)"))
    return under / dataset


def pair_rows(directory: Path, a: str, b: str) -> pd.DataFrame:
    """The rows of the pair {a, b} (stored with its names sorted) from the pair tables in `directory`, reading only
    those rows of each; where several tables hold it (one left from an earlier block size), the newest."""
    a, b = sorted((a, b))
    tables = sorted(path for path in directory.glob("*.parquet") if not path.name.endswith(".resamples.parquet"))
    wanted = [[("model_a", "==", a), ("model_b", "==", b)], [("model_a", "==", b), ("model_b", "==", a)]]
    found, unreadable = [], []
    for path in tables:
        try:
            rows = pd.read_parquet(path, filters=wanted, page_checksum_verification=True)
        except (pa.ArrowException, OSError, ValueError) as error:
            unreadable.append(CorruptOutputError(path, f"not a readable Parquet file ({type(error).__name__}: "
                                                       f"{error})"))
            continue
        if not rows.empty:
            found.append((path, rows))
    for error in unreadable:
        print(error, file=sys.stderr)
    if not found:
        raise OnDemandError(f"no pair table holds {a} vs {b}: searched {len(tables)} table(s) {directory}/*.parquet"
                            + (f", {len(unreadable)} of them unreadable" if unreadable else ""),
                            code=1 if unreadable else 2)
    if len(found) > 1:
        found.sort(key=lambda item: item[0].stat().st_mtime)
        print(f"reprsim heatmap: {len(found)} tables hold {a} vs {b} (" + ", ".join(str(p) for p, _ in found)
              + f"); drawing the newest, {found[-1][0]}", file=sys.stderr)
    return found[-1][1].reset_index(drop=True)


def figure_measures(rows: pd.DataFrame, configfile: str | Path | None) -> dict[str, str]:
    """label -> measure for the labels the rows hold, as the rule passes it from the config (rules/report.smk); a
    label the config does not define (or no config) stands for itself."""
    configured = {}
    if configfile is not None:
        try:
            config = load_yaml(configfile)
        except (OSError, yaml.YAMLError) as error:
            raise OnDemandError(f"configuration {configfile}: {error}") from None
        specs = config.get("measures") if isinstance(config, dict) else None
        if isinstance(specs, dict):
            resolve_section(specs)  # aliases to registry names, as validate_config does
            configured = {label: spec["measure"] for label, spec in specs.items()
                          if isinstance(spec, dict) and isinstance(spec.get("measure"), str)}
    return {label: configured.get(label, label) for label in sorted(set(rows["measure"]))}


def draw(results: Path, representation: str, dataset: str | None, a: str, b: str, configfile: str | Path | None,
         out: Path | None = None) -> Path:
    """Draw the pair's heatmaps; by default where the workflow draws them with blocks of one model,
    RESULTS/figures/pairs/REPRESENTATION/DATASET/A__B.png (names sorted). Returns the path written."""
    directory = dataset_directory(results, representation, dataset)
    rows = pair_rows(directory, a, b)
    measures = figure_measures(rows, configfile)
    stored_a, stored_b = rows["model_a"].iloc[0], rows["model_b"].iloc[0]
    out = Path(out) if out else (Path(results) / "figures" / "pairs" / representation / directory.name
                                 / f"{stored_a}__{stored_b}.png")
    from reprsim.stages.report import figures  # matplotlib's file backend before pyplot, as the workflow's script

    figures.pair_heatmaps({"table": rows}, out, measures=measures)
    return out

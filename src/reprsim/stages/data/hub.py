"""`source: hf` datasets: the files of a hub dataset's config and splits, found in the hub cache, and their rows.

One code path online and offline: huggingface_hub.snapshot_download resolves the revision and, online,
downloads the files asked for into the hub cache (HF_HOME / HF_HUB_CACHE); offline (HF_HUB_OFFLINE=1, the
jobs on a cluster) it returns the snapshot the cache holds. The files of the config's splits are then chosen
as the hub chooses them and read with pandas; nothing is written to the datasets library's cache.

Why not datasets.load_dataset(id, config, split=..., revision=...): offline it reads only its own cache of
prepared datasets (HF_DATASETS_CACHE), never the hub cache, so a dataset that `reprsim fetch` put in the hub
cache is "not found" in an offline job (datasets 5.2: "Couldn't reach 'org/name' on the Hub
(OfflineModeIsEnabled)"). Nor is it kept as an online fallback: datasets >= 4 runs no loading scripts, so
any hub dataset it can load is data files, which this path reads; a repo holding only a script is refused
with the hint to read the hub's parquet export instead (revision: refs/convert/parquet).

Layouts, tried in this order (https://huggingface.co/docs/hub/datasets-data-files-configuration):

1. README.md metadata `configs:` (what push_to_hub writes; nyu-mll/glue and stanfordnlp/imdb have it): each
   entry's `config_name` and `data_files`: a pattern, a list of patterns, a split -> pattern(s) mapping or a
   list of {split, path}, or `data_dir` (then 3. inside it). Patterns are globs relative to the repo, `*`
   within a directory and `**` across (resolved by datasets.data_files.resolve_pattern, as the hub does).
   Without `config` in the spec: the entry marked `default: true`, else the only one.
2. The hub's parquet export (revision: refs/convert/parquet, which has no README):
   `<config>/<split>/NNNN.parquet`. Without `config`: the only config directory, else `default`.
3. Neither: the file names the datasets library infers for a repo of data files alone
   (datasets.data_files.get_data_patterns): `data/<split>-NNNNN-of-NNNNN.<ext>` for any split name; else
   files or directories named after train (training), validation (valid, dev, val) or test (testing, eval,
   evaluation), whose split is then train, validation or test; else every file is train. Its one config
   is `default`.

File formats: .parquet, .csv, .tsv, .json (a JSON array or JSON Lines), .jsonl (one split may mix them;
compressed files are not read).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from reprsim.io.hub import NotCached, describe, download, fetched, miss_message
from reprsim.stages.data.validate import DatasetError

FORMATS = {".parquet": "parquet", ".csv": "csv", ".tsv": "tsv", ".json": "json", ".jsonl": "jsonl"}
EXPORT_REVISION = "refs/convert/parquet"


def _error(name: str, spec: dict, missing: str, error: BaseException | None = None,
           config: str | None = None) -> DatasetError:
    source = describe("dataset", spec["id"], spec.get("revision"), config or spec.get("config"))
    return DatasetError(miss_message(f"dataset {name!r}", source, missing, error))


def _snapshot(name: str, spec: dict, revision: str | None, patterns: list[str]) -> Path:
    """The snapshot folder of the dataset repo at `revision` with the files matching `patterns` (fnmatch, as
    huggingface_hub filters): downloaded online, found in the hub cache offline."""
    try:
        return download(spec["id"], "dataset", revision, patterns)
    except NotCached as miss:
        raise _error(name, spec, str(miss), miss.__cause__) from miss.__cause__


def _card_configs(folder: Path) -> list[dict]:
    """The `configs:` entries of the README.md metadata (YAML front matter), [] without any."""
    readme = folder / "README.md"
    if not readme.is_file():
        return []
    from huggingface_hub.repocard import metadata_load

    configs = (metadata_load(readme) or {}).get("configs") or []
    return [entry for entry in configs if isinstance(entry, dict)]


def _choose(name: str, spec: dict, configs: list[str], default: str | None, declared: str) -> str:
    """The config the spec asks for (or the default one), or a DatasetError listing those there are."""
    wanted = spec.get("config")
    if wanted is not None and wanted in configs:
        return wanted
    if wanted is None and (default or len(configs) == 1):
        return default or configs[0]
    missing = (f"config {wanted!r} is not in it" if wanted is not None
               else "it has several configs and none is marked the default; set "
                    f"datasets.{name}.config")
    raise _error(name, spec, f"{missing} ({declared}: {', '.join(configs) or 'none'})", config=wanted)


def _resolve(folder: Path, patterns: list[str]) -> list[Path]:
    """The data files of `folder` that `patterns` match (datasets' glob: `*` within a directory, `**` across)."""
    from datasets.data_files import resolve_pattern

    found = set()
    for pattern in patterns:
        try:
            found.update(resolve_pattern(pattern, str(folder), allowed_extensions=list(FORMATS)))
        except FileNotFoundError:
            continue
    return sorted(Path(path) for path in found)


def _inferred(folder: Path) -> dict[str, list[Path]]:
    """Layout 3: split -> files, as the datasets library infers them for a folder of data files alone."""
    from datasets.data_files import EmptyDatasetError, get_data_patterns

    if not folder.is_dir():
        return {}
    try:
        patterns = get_data_patterns(str(folder))
    except EmptyDatasetError:
        return {}
    splits = {str(split): _resolve(folder, split_patterns) for split, split_patterns in patterns.items()}
    return {split: files for split, files in splits.items() if files}


def _patterns(entry: dict) -> dict[str, list[str]]:
    """A README `configs:` entry's data_files as split -> patterns."""
    from datasets.data_files import sanitize_patterns

    patterns = sanitize_patterns(entry["data_files"])
    return {split: [str(p).removeprefix("./") for p in split_patterns] for split, split_patterns in patterns.items()}


def split_files(name: str, spec: dict) -> tuple[str, dict[str, list[Path]], Path]:
    """(config, hub split -> its data files, snapshot folder) of the `source: hf` dataset `name` at its revision,
    downloaded online and found in the hub cache offline (the layouts of the module docstring)."""
    # the README first: it says which files the config's splits are, so only those are downloaded
    folder = _snapshot(name, spec, spec.get("revision"), ["README.md"])
    commit = folder.name  # the revision resolved: the data files come from the same commit
    configs = _card_configs(folder)
    if configs:
        names = [str(entry.get("config_name", "default")) for entry in configs]
        default = next((str(e.get("config_name", "default")) for e in configs if e.get("default")), None)
        config = _choose(name, spec, names, default, "configs in its README.md")
        entry = configs[names.index(config)]
        if entry.get("data_files") is not None:
            patterns = _patterns(entry)
            folder = _snapshot(name, spec, commit, [p for ps in patterns.values() for p in ps])
            return config, {split: _resolve(folder, ps) for split, ps in patterns.items()}, folder
        data_dir = str(entry.get("data_dir") or "").strip("/")
        folder = _snapshot(name, spec, commit, [f"{data_dir}/*" if data_dir else "*"])
        return config, _inferred(folder / data_dir), folder

    # no configs in a README: the parquet export's config directories (only they can serve a named config),
    # else every data file of the repo
    wanted = spec.get("config")
    folder = _snapshot(name, spec, commit, [f"{wanted}/*"] if wanted else [f"*{suffix}" for suffix in FORMATS])
    files = [path.relative_to(folder) for path in _resolve(folder, ["**"])]
    if files and all(len(path.parts) == 3 and path.suffix == ".parquet" for path in files):
        exported = sorted({path.parts[0] for path in files})
        config = _choose(name, spec, exported, "default" if "default" in exported else None,
                         "config directories of its parquet export")
        splits: dict[str, list[Path]] = {}
        for path in files:
            if path.parts[0] == config:
                splits.setdefault(path.parts[1], []).append(folder / path)
        return config, splits, folder
    if wanted is not None and wanted != "default":
        raise _error(name, spec, f"config {wanted!r} is not in it: it declares no configs (no `configs:` in a "
                                 "README.md), so its one config is 'default'")
    return "default", _inferred(folder), folder


def read_table(path: Path) -> pd.DataFrame:
    """One data file as a table of its columns."""
    fmt = FORMATS[path.suffix.lower()]
    if fmt == "parquet":
        return pd.read_parquet(path)
    if fmt in ("csv", "tsv"):   # "NA", "null" are text here; an empty field is refused as empty later
        return pd.read_csv(path, sep="\t" if fmt == "tsv" else ",", keep_default_na=False)
    if fmt == "json":   # a .json file on the hub is often JSON Lines, which the datasets library also reads
        try:
            return pd.read_json(path)
        except ValueError:
            pass
    return pd.read_json(path, lines=True)


def hub_tables(name: str, spec: dict) -> tuple[dict[str, pd.DataFrame], str]:
    """Hub split -> its rows (the source's columns, indexed 1..n) for every split the spec names, and the
    dataset as messages name it ("org/name/config")."""
    config, splits, folder = split_files(name, spec)
    tables = {}
    for theirs in dict.fromkeys(spec["splits"].values()):
        if theirs not in splits or not splits[theirs]:
            if theirs in splits:
                missing = f"no file of split {theirs!r} is in the cached snapshot {folder}"
            elif splits:
                missing = (f"split {theirs!r} is not in it (its splits: {', '.join(sorted(splits))}); set "
                           f"datasets.{name}.splits to hub split names")
            else:
                missing = (f"split {theirs!r} is not in it: the cached snapshot {folder} holds no data files "
                           f"({', '.join(FORMATS)}); a repo with a loading script alone can be read from its "
                           f"parquet export (revision: {EXPORT_REVISION})")
            raise _error(name, spec, missing, config=config)
        frame = pd.concat([read_table(path) for path in splits[theirs]], ignore_index=True)
        frame.index = np.arange(1, len(frame) + 1)
        tables[theirs] = frame
    return tables, f"{spec['id']}/{config}"


def fetch_dataset(name: str, spec: dict) -> dict:
    """Download (online) or find (offline) the files of hub dataset `name`'s config and splits: its README and
    those files alone (:func:`split_files`); what was fetched (reprsim.io.hub.fetched)."""
    config, splits, folder = split_files(name, spec)
    return fetched("dataset", name, spec, folder, config=config,
                   splits={split: len(files) for split, files in sorted(splits.items())})

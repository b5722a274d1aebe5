"""The hub keys of `source: hf` models and datasets: a repo id, a revision, a dataset's config and split names as
the hub allows them."""

from __future__ import annotations

import re
from collections.abc import Iterator

# A hub revision: a branch, tag, refs/... name (refs/convert/parquet, refs/pr/3) or commit, as git allows a ref
# name; above all no whitespace and no '..', since the hub cache keeps a ref at refs/<revision>.
REVISION_REFUSED = re.compile(r"\s|\.\.|//|^/|/$|[~^:?*\[\\]")
HUB_SPLIT = re.compile(r"\w+(\.\w+)*")      # the hub's (and the datasets library's) split names
CONFIG_REFUSED = re.compile(r"[<>:/\\|?*]|^\s|\s$|^\.{1,2}$")   # the datasets library's, and no '.', '..'


def hub_spec_errors(key: str, spec: dict) -> Iterator[str]:
    """What is wrong with the hub keys of one `source: hf` model or dataset (`key`: models.NAME or
    datasets.NAME): id a hub repo id (huggingface_hub.utils.validate_repo_id), revision a ref name or commit,
    a dataset's config and split names as the hub allows them. Values of the wrong type are the schema's."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    repo_id = spec.get("id")
    if isinstance(repo_id, str):
        try:
            validate_repo_id(repo_id)
        except HFValidationError as error:
            yield (f"key '{key}.id' is {repo_id!r}, which is not a hub repo id ({error}); give 'name' or 'org/name' "
                   "as on huggingface.co (letters, digits, '-', '_', '.'; no '--' or '..'); files on disk are a "
                   f"source: local {'model' if key.startswith('models.') else 'dataset'}")
    revision = spec.get("revision")
    if isinstance(revision, str) and (not revision or REVISION_REFUSED.search(revision)):
        yield (f"key '{key}.revision' is {revision!r}; give a branch, tag or commit of the repo (main, v1.0, "
               "refs/convert/parquet, a 40-hex commit): no whitespace, no '..', no leading or trailing '/', "
               "none of ~^:?*[\\, or leave it out (main)")
    config = spec.get("config")
    if isinstance(config, str) and (not config or CONFIG_REFUSED.search(config)):
        yield (f"key '{key}.config' is {config!r}; give a config name of the dataset (none of <>:/\\|?*, no "
               "surrounding whitespace), or leave it out (its default config)")
    splits = spec.get("splits")
    for ours, theirs in (splits.items() if isinstance(splits, dict) else []):
        if isinstance(theirs, str) and not HUB_SPLIT.fullmatch(theirs):
            yield (f"key '{key}.splits.{ours}' is {theirs!r}, which is not a hub split name (letters, digits and "
                   "'_', parts joined by '.', e.g. validation_matched)")


def _hub_errors(config: dict) -> Iterator[str]:
    """hub_spec_errors of every `source: hf` model and dataset."""
    for section in ("models", "datasets"):
        entries = config.get(section)
        for name, spec in (entries.items() if isinstance(entries, dict) else []):
            if isinstance(spec, dict) and spec.get("source") == "hf":
                yield from hub_spec_errors(f"{section}.{name}", spec)

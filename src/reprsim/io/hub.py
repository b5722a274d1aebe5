"""The Hugging Face hub cache: downloads into it, what it holds for a `source: hf` model or dataset, and the
error that says what is missing when a job cannot load one.

On most clusters compute nodes have no route to the internet: the workflow downloads every `source: hf` model
and dataset in local rules on the submitting host (rule `fetch_hub`), or `reprsim fetch CONFIG` does it on a
login node beforehand; the jobs then load them from the cache with HF_HUB_OFFLINE=1 (rules/common.smk sets it
in every submitted job). Its layout is huggingface_hub's:

    <HF_HUB_CACHE>/models--<org>--<name>/          (datasets--<org>--<name>/ for a dataset)
        refs/<revision>                            a branch, tag or refs/... name -> the 40-hex commit
        snapshots/<commit>/<path in the repo>      the files fetched (links into blobs/)
        blobs/

A revision that is a 40-hex commit names its snapshot directly; any other revision (default: main) is looked
up in refs/, as huggingface_hub itself resolves it offline. The hub libraries' own errors for a miss ("couldn't
find them in the cached files") name neither the revision nor the file, so the loaders (materialize.py,
stages/data/hub.py) diagnose the cache with :func:`cached_snapshot` and raise :func:`miss_message`. A dataset's
files are chosen by the data stage (stages/data/hub.py), which downloads only its config's. Torch-free.
"""


from __future__ import annotations

import re
from pathlib import Path

FETCH_HINT = ("To fetch it, run `reprsim fetch CONFIG` on a machine with network (e.g. a login node) with the same "
              "HF_HOME (or HF_HUB_CACHE) as the jobs, then rerun")
COMMIT = re.compile(r"[0-9a-f]{40}")


class NotCached(LookupError):
    """Something a `source: hf` model or dataset needs is not in the hub cache; the message says what."""


def cache_dir() -> Path:
    """The hub cache this process reads (huggingface_hub reads HF_HOME / HF_HUB_CACHE when imported)."""
    from huggingface_hub import constants
    return Path(constants.HF_HUB_CACHE)


def offline() -> bool:
    """Whether this process may not use the network (HF_HUB_OFFLINE, read by huggingface_hub when imported)."""
    from huggingface_hub import constants
    return bool(constants.HF_HUB_OFFLINE)


def repo_dir(repo_id: str, repo_type: str) -> Path:
    """The cache directory of a repo: models--org--name or datasets--org--name."""
    from huggingface_hub.file_download import repo_folder_name
    return cache_dir() / repo_folder_name(repo_id=repo_id, repo_type=repo_type)


def cached_revisions(repo: Path) -> str:
    """What the cache holds of a repo: its refs (name -> commit) and snapshots, for an error message."""
    refs_dir = repo / "refs"
    refs = sorted(p for p in refs_dir.rglob("*") if p.is_file()) if refs_dir.is_dir() else []
    shown = [f"{p.relative_to(refs_dir).as_posix()} -> {p.read_text().strip()[:12]}" for p in refs]
    snapshots = sorted(p.name for p in (repo / "snapshots").iterdir()) if (repo / "snapshots").is_dir() else []
    return (f"refs: {', '.join(shown) or 'none'}; snapshots: "
            f"{', '.join(s[:12] for s in snapshots) or 'none'}")


def cached_snapshot(repo_id: str, repo_type: str, revision: str | None) -> Path:
    """The snapshot directory `revision` (None: main) of the repo resolves to in the hub cache; NotCached saying
    what is missing (the repo, the revision, its snapshot) otherwise. Files inside are not checked."""
    revision = revision or "main"
    if ".." in revision.split("/"):   # config validation refuses it; never read outside the repo's refs
        raise NotCached(f"revision {revision!r} is not a revision name")
    repo = repo_dir(repo_id, repo_type)
    if not repo.is_dir():
        raise NotCached(f"the cache holds nothing of it (no {repo.name} there)")
    if COMMIT.fullmatch(revision):
        commit = revision
    else:
        ref = repo / "refs" / revision
        if not ref.is_file():
            raise NotCached(f"revision {revision!r} is not in the cache (no refs/{revision}; it holds "
                            f"{cached_revisions(repo)})")
        commit = ref.read_text().strip()
    snapshot = repo / "snapshots" / commit
    if not snapshot.is_dir():
        given = "" if commit == revision else f" (commit {commit})"
        raise NotCached(f"revision {revision!r}{given} is not in the cache (no snapshots/{commit}; it holds "
                        f"{cached_revisions(repo)})")
    return snapshot


def describe(kind: str, repo_id: str, revision: str | None, config: str | None = None) -> str:
    """"hub dataset 'org/name' (config 'x'), revision 'main'" as the messages name a source."""
    shown = f"{revision!r}" if revision else "'main' (the default)"
    return f"hub {kind} {repo_id!r}{f' (config {config!r})' if config else ''}, revision {shown}"


def miss_message(what: str, source: str, missing: str, error: BaseException | None = None) -> str:
    """The message for a `source: hf` model or dataset that cannot be loaded: who (`what`, e.g. "model 'bert'"),
    which hub source (:func:`describe`), what is missing, where it was looked for, and how to fetch it."""
    if offline():
        where = f"Searched the hub cache {cache_dir()} offline (HF_HUB_OFFLINE=1)"
    else:
        where = f"It could not be downloaded, and the hub cache {cache_dir()} does not hold it"
    detail = f" ({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})" if error else ""
    return f"{what}: {source}: {missing}. {where}. {FETCH_HINT}{detail}"


# What a model job reads: config, tokenizer files and safetensors weights (the loader refuses pickled weights).
MODEL_FILES = ["*.json", "*.safetensors", "*.txt", "*.model", "*.tiktoken", "tokenizer*"]


def snapshot_size(folder: Path) -> tuple[int, int]:
    """(files, bytes) of a snapshot folder (its files are links into the cache's blobs)."""
    import os
    files = [p for p in folder.rglob("*") if p.is_file()]
    return len(files), sum(os.path.getsize(p) for p in files)


def fetched(kind: str, name: str, spec: dict, folder: Path, **extra) -> dict:
    """What a download put in the cache (the fetch rule's output, `reprsim fetch`'s line)."""
    files, size = snapshot_size(folder)
    return {"kind": kind, "name": name, "id": spec["id"], "revision": spec.get("revision"), "commit": folder.name,
            "snapshot": str(folder), "files": files, "bytes": size, "cache": str(cache_dir()), **extra}


def download(repo_id: str, repo_type: str, revision: str | None, allow_patterns: list[str]) -> Path:
    """huggingface_hub.snapshot_download: online the files matching `allow_patterns` are downloaded, offline the
    cache's snapshot is returned. A failure raises NotCached saying what the cache lacks (the repo, the revision,
    its files), chained to the hub library's error, whose wording differs by version."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo_id=repo_id, repo_type=repo_type, revision=revision,
                                      allow_patterns=allow_patterns))
    except Exception as error:
        try:
            missing = f"its files are not all in the cached snapshot {cached_snapshot(repo_id, repo_type, revision)}"
        except NotCached as miss:
            missing = str(miss)
        raise NotCached(missing) from error


def fetch_model(name: str, spec: dict) -> dict:
    """Download (online) or find (offline) hub model `name`'s config, tokenizer and safetensors weights at its
    revision; :func:`fetched`. A miss raises NotCached with :func:`miss_message`."""
    try:
        folder = download(spec["id"], "model", spec.get("revision"), MODEL_FILES)
    except NotCached as miss:
        raise NotCached(miss_message(f"model {name!r}", describe("model", spec["id"], spec.get("revision")),
                                     str(miss), miss.__cause__)) from miss.__cause__
    return fetched("model", name, spec, folder)


def hub_specs(config: dict) -> list[tuple[str, str, dict]]:
    """(kind, name, spec) of every `source: hf` dataset and model of a validated config."""
    return ([("dataset", name, spec) for name, spec in sorted(config["datasets"].items()) if spec["source"] == "hf"]
            + [("model", name, spec) for name, spec in sorted(config["models"].items()) if spec["source"] == "hf"])

"""Memory (mem_mb, MB) and wall time (runtime, minutes) of the heavy rules, from plain facts.

Pure functions: they take what a job processes -- a model's facts (its meta.json: n_parameters,
n_layers, hidden_size), row counts (a dataset's meta.json `sizes`), a Zarr store's attributes
(n_examples, n_layers, hidden_size, split_sizes) -- and the settings from the config. Memory comes as
ints scaled by Snakemake's `attempt`, compute as seconds, which `minutes(seconds, attempt)` turns into
the runtime a job asks, so each retry (--retries) asks for more. reprsim.workflow.job_costs applies them
to a job (rules/resources.smk, reprsim plan). Standard library only: the rules load this whenever the
DAG is built.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from reprsim.workflow.pair_work import CORE_FLOPS
from reprsim.workflow.plan import training_steps

MODEL_FLOPS = 1e12  # sustained FLOP/s assumed for a model job on one GPU (a modest one, well below peak)
# A pair job's rates, on a CPU core and on a GPU, are measured: reprsim.workflow.pair_work.
MIN_MINUTES = 5  # floor per job: start-up, loading, writing

SYNTHETIC = None  # `b` of the align functions for synthetic recovery: one store, mapped onto itself


# ----------------------------------------------------------------- building blocks
def split_rows(sizes: Mapping[str, int], splits: Iterable[str], cap: int | None = None) -> int:
    """Rows of `splits` (a dataset's `sizes`; a missing split has none), each split capped at `cap`."""
    return sum(min(sizes.get(split, 0), cap or sizes.get(split, 0)) for split in splits)


def head_train_rows(n_train: int, heads: Mapping | None) -> int:
    """Train rows the truncation heads learn from: none unless enabled, at most max_train_examples."""
    heads = heads or {}
    if not heads.get("enabled", False):
        return 0
    return min(n_train, heads.get("max_train_examples") or math.inf)


def weights_mb(model: Mapping, copies: int) -> float:
    """float32 parameters; copies = 4 for training (weights, gradients, two Adam moments)."""
    return copies * 4 * model["n_parameters"] / 1e6


def activations_mb(model: Mapping, batch_size: int, max_length: int, copies: int) -> float:
    """Hidden states of every layer for one batch."""
    return copies * 4 * (model["n_layers"] + 1) * batch_size * max_length * model["hidden_size"] / 1e6


def minutes(seconds: float, attempt: int) -> int:
    """The wall time a job asks for: its estimated `seconds`, plus the MIN_MINUTES floor, times `attempt`."""
    return int(math.ceil((MIN_MINUTES + seconds / 60) * attempt))


# ----------------------------------------------------------------- partition time limits
# A partition's time limit, in the same environment the SLURM profile reads its partitions from
# (profiles/slurm/config.yaml): a job may not ask for more, or SLURM refuses it.
TIME_LIMIT_VARIABLES = {"cpu": "REPRSIM_SLURM_CPU_TIME_LIMIT", "gpu": "REPRSIM_SLURM_GPU_TIME_LIMIT"}
PAIRS_ON_GPU_VARIABLE = "REPRSIM_SLURM_PAIRS_ON_GPU"
PAIR_GROUPS = ("pairs", "terms")  # the profile's groups that REPRSIM_SLURM_PAIRS_ON_GPU sends to the GPU partition


def slurm_minutes(value: str) -> int | None:
    """Minutes of a SLURM time (sinfo's TIMELIMIT, sbatch --time): "MM", "MM:SS", "HH:MM:SS", "D-HH",
    "D-HH:MM", "D-HH:MM:SS"; None for "infinite", "UNLIMITED" or nothing. Seconds round up."""
    text = value.strip().lower()
    if text in ("", "infinite", "unlimited"):
        return None
    days, clock = text.split("-", 1) if "-" in text else ("0", text)
    fields = [int(field) for field in clock.split(":")]  # ValueError on anything but digits
    if len(fields) > 3:
        raise ValueError(value)
    if "-" in text:  # D-HH, D-HH:MM, D-HH:MM:SS
        hours, mins, secs = fields + [0] * (3 - len(fields))
    else:  # MM, MM:SS, HH:MM:SS
        hours, mins, secs = {1: [0, *fields, 0], 2: [0, *fields], 3: fields}[len(fields)]
    total = int(days) * 1440 + hours * 60 + mins + math.ceil(secs / 60)
    if min(int(days), hours, mins, secs) < 0 or total <= 0:
        raise ValueError(value)
    return total


def time_limits(environ: Mapping[str, str]) -> dict[str, int | None]:
    """partition ("cpu", "gpu") -> its time limit in minutes from TIME_LIMIT_VARIABLES, None where unset."""
    limits = {}
    for partition, variable in TIME_LIMIT_VARIABLES.items():
        try:
            limits[partition] = slurm_minutes(environ.get(variable, ""))
        except ValueError:
            raise ValueError(f"{variable}={environ[variable]!r}: give the partition's time limit in minutes "
                             "(2880) or as SLURM writes it (2-00:00:00)") from None
    return limits


def pairs_on_gpu(environ: Mapping[str, str]) -> bool:
    """REPRSIM_SLURM_PAIRS_ON_GPU, read as the profile reads it."""
    return environ.get(PAIRS_ON_GPU_VARIABLE, "").strip().lower() in ("1", "true", "yes")


def partition(gpu: bool, group: str | None, environ: Mapping[str, str]) -> str:
    """The partition the SLURM profile sends a job to: "gpu" for a GPU rule, and for the pair and terms groups
    only with REPRSIM_SLURM_PAIRS_ON_GPU; "cpu" for the rest."""
    return ("gpu" if pairs_on_gpu(environ) else "cpu") if group in PAIR_GROUPS else ("gpu" if gpu else "cpu")


def capped_minutes(seconds: float, attempt: int, limit: int | None) -> int:
    """minutes(seconds, attempt), at most the partition's `limit` (None: no limit), so that a retry, which asks
    for more, still asks for no more than the partition allows."""
    asked = minutes(seconds, attempt)
    return asked if limit is None else min(asked, limit)


# ----------------------------------------------------------------- extract
def extract_mem_mb(model: Mapping, extraction: Mapping, attempt: int) -> int:
    """The model twice over and a few copies of one batch's hidden states."""
    return int((2000 + weights_mb(model, 2) + activations_mb(model, extraction["batch_size"],
                                                             extraction["max_length"], 3)) * attempt)


def extract_seconds(model: Mapping, rows: int, extraction: Mapping) -> float:
    """A forward pass (2 FLOPs per parameter per token) over `rows` rows of max_length tokens."""
    tokens = rows * extraction["max_length"]
    return 2 * model["n_parameters"] * tokens / MODEL_FLOPS



# ----------------------------------------------------------------- finetune
def finetune_mem_mb(base: Mapping, spec: Mapping, attempt: int) -> int:
    """Training state of the base model (4 copies) and the activations kept for backward."""
    return int((2500 + weights_mb(base, 4) + activations_mb(base, spec["batch_size"], spec["max_length"], 12))
               * attempt)


def finetune_seconds(base: Mapping, spec: Mapping, n_train: int, n_validation: int) -> float:
    """Training steps (6 FLOPs per parameter per token) and an evaluation pass over validation."""
    tokens = training_steps(spec, n_train) * spec["batch_size"] * spec["max_length"]
    evaluation = n_validation * spec["max_length"]
    return base["n_parameters"] * (6 * tokens + 2 * evaluation) / MODEL_FLOPS



# ----------------------------------------------------------------- pretrain
GPT2_ALIASES = {"hidden_size": "n_embd", "num_hidden_layers": "n_layer", "num_attention_heads": "n_head",
                "max_position_embeddings": "n_positions"}  # GPT2Config.attribute_map


MASKED_TYPES = 2  # a masked LM's (a BERT's) token types: reprsim.nets.gpt2_as_bert.TYPE_VOCAB_SIZE


def pretrain_facts(spec: Mapping, vocab_size: int) -> dict:
    """A pretrained GPT-2's facts before it exists, from its spec (GPT2Config defaults: 768 wide, 12 blocks, MLP
    4x wide; n_positions = context) and its tokenizer's `vocab_size`: token and position embeddings; per block
    attention 4d² + 4d, MLP 2·d·inner + inner + d and two LayerNorms 4d; a final LayerNorm; the LM head is tied.
    A masked LM has a mask token more; the BERT of the same sizes (blocks bert) has the same blocks, token
    type embeddings and an embedding LayerNorm, and a head of a d × d transform, a LayerNorm and an output
    bias (its weights tied)."""
    config = {GPT2_ALIASES.get(key, key): value for key, value in (spec.get("config") or {}).items()}
    width, layers = config.get("n_embd", 768), config.get("n_layer", 12)
    inner = config.get("n_inner") or 4 * width
    positions = config.get("n_positions") or spec["context"]
    block = 4 * width * width + 4 * width + 2 * width * inner + inner + width + 4 * width
    if spec.get("objective") == "masked":
        vocab_size += 1  # the mask token, which the byte-level BPEs lack (an upper bound for a tokenizer with one)
    if spec.get("blocks") == "bert":
        embeddings = (vocab_size + positions + MASKED_TYPES) * width + 2 * width
        n_parameters = embeddings + layers * block + width * width + 3 * width + vocab_size
    else:
        n_parameters = (vocab_size + positions) * width + layers * block + 2 * width
    return {"n_parameters": n_parameters, "n_layers": layers, "hidden_size": width, "vocab_size": vocab_size}


def pretrain_mem_mb(model: Mapping, spec: Mapping, attempt: int) -> int:
    """Training state (4 copies), the activations kept for backward, and the logits over the vocabulary (a few
    float32 copies of batch_size x context x vocab_size)."""
    logits = 3 * 4 * spec["batch_size"] * spec["context"] * model["vocab_size"] / 1e6
    return int((2500 + weights_mb(model, 4) + activations_mb(model, spec["batch_size"], spec["context"], 12) + logits)
               * attempt)


def pretrain_seconds(model: Mapping, spec: Mapping, n_validation: int) -> float:
    """Training steps of batch_size blocks of context tokens (6 FLOPs per parameter per token) and an evaluation
    pass over the validation split (its rows at most context tokens each: an upper bound) for the final model and
    for each checkpoint. A checkpoint's own job copies files: a light job."""
    tokens = spec["steps"] * spec["batch_size"] * spec["context"]
    evaluation = n_validation * spec["context"] * (1 + len(spec.get("checkpoints") or []))
    return model["n_parameters"] * (6 * tokens + 2 * evaluation) / MODEL_FLOPS



# ----------------------------------------------------------------- truncation and skip
def evaluation_mem_mb(model: Mapping, rows: int, head_train: int, max_length: int, batch_size: int,
                      attempt: int) -> int:
    """Truncation and skip: the fine-tuned model (and for truncation heads, its base), one batch of
    activations, and every layer's head inputs of the rows the heads train (`head_train`) and score
    on (`rows`, the evaluation split)."""
    head_inputs = 2 * 4 * (model["n_layers"] + 1) * (rows + head_train) * model["hidden_size"] / 1e6
    return int((2000 + weights_mb(model, 2) + activations_mb(model, batch_size, max_length, 3) + head_inputs)
               * attempt)


def truncation_seconds(model: Mapping, rows: int, head_train: int, max_length: int) -> float:
    """Forward passes over the evaluation rows; with heads, also TUNED and TUNEDORIG features."""
    passes = rows + 2 * (rows + head_train) if head_train else rows
    return 2 * model["n_parameters"] * passes * max_length / MODEL_FLOPS



def skip_seconds(model: Mapping, rows: int, max_length: int) -> float:
    """A forward pass over the evaluation rows per skipped span of blocks (and one with none skipped)."""
    spans = 1 + model["n_layers"] * (model["n_layers"] + 1) // 2
    return 2 * model["n_parameters"] * rows * spans * max_length / MODEL_FLOPS



# ----------------------------------------------------------------- compare
def pair_sizes(a: Mapping, b: Mapping, split: str) -> tuple[int, int, list[int]]:
    """(rows in the stores, rows compared, summed layer widths of a and of b) from two stores' attributes."""
    compared = a["split_sizes"].get(split, 0)
    widths = [(s["n_layers"] + 1) * s["hidden_size"] for s in (a, b)]
    return max(a["n_examples"], b["n_examples"]), compared, widths


def compare_mem_mb(a: Mapping, b: Mapping, split: str, attempt: int, gram_budget_gb: float = 0.0,
                   compared: int | None = None, conditioned: bool = False) -> int:
    """Both models' pooled rows in float64 (a few copies) and a few n x n matrices of the compared rows (the split's,
    or `compared`: words at word level); a measure built on n x n matrices (Gram-form CKA, mutual k-NN) may fill
    similarity.max_memory_gb (`gram_budget_gb`, 0 when none is configured). With a measure on `conditioned`
    features (an artefact control), the job holds one conditioned copy of both stacks and its own sides beside
    the stored features' (reprsim.metrics.pair_engine: one conditioning at a time): a copy of the rows and of the n x n
    matrices more."""
    rows, split_rows_, widths = pair_sizes(a, b, split)
    compared = split_rows_ if compared is None else compared
    # what they may fill: the budget, or less where every layer's Grams (and a working copy each) fit in it
    every_layer = 2 * 8 * compared ** 2 * (a["n_layers"] + b["n_layers"] + 2) / 1e6
    grams = max(4 * 8 * compared ** 2 / 1e6, min(gram_budget_gb * 1073.7, every_layer))
    copies, sides = (4, 2) if conditioned else (3, 1)
    return int((2000 + copies * 8 * rows * sum(widths) / 1e6 + sides * grams) * attempt)



# ----------------------------------------------------------------- align
def aligner_passes(align: Mapping) -> int:
    """Passes over the fit rows, summed over the configured aligners: a trained network's epochs
    (100 when not given), a few for the closed-form ones."""
    return sum(spec.get("params", {}).get("epochs", 100) if spec["aligner"] in ("inn", "mlp") else 3
               for spec in align.get("aligners", {}).values())


def align_mem_mb(a: Mapping, b: Mapping | None, split: str, attempt: int) -> int:
    """Aligners and injection: both models' pooled rows, like a pair job. `b` None (SYNTHETIC):
    synthetic recovery, store `a` mapped onto itself."""
    if b is SYNTHETIC:
        return int((2000 + 3 * 8 * a["n_examples"] * 2 * a["hidden_size"] / 1e6) * attempt)
    return compare_mem_mb(a, b, split, attempt)


def align_seconds(a: Mapping, b: Mapping | None, align: Mapping) -> float:
    """Every aligner fit on every aligned layer pair, a dense network's cost per pass (both
    directions). `b` None (SYNTHETIC): synthetic recovery, one fit per map seed and layer of `a`."""
    if b is SYNTHETIC:
        stores = [a, a]
        synthetic = align["synthetic"]
        layer_pairs = len(synthetic.get("map_seeds", [0])) * len(synthetic.get("layers", [-1]))
    else:
        stores = [a, b]
        depths = [s["n_layers"] + 1 for s in stores]
        layer_pairs = depths[0] * depths[1] if align.get("layers") == "all" else max(depths)
    rows = max(s["n_examples"] for s in stores)
    width = sum(s["hidden_size"] for s in stores)
    flops = 2 * 6 * rows * width ** 2 * layer_pairs * aligner_passes(align)
    return flops / MODEL_FLOPS



# ----------------------------------------------------------------- stitching
def stitch_mem_mb(bottom: Mapping, top: Mapping, batch_size: int, length: int, attempt: int) -> int:
    """Both models (frozen: weights only), the bottom model's stream of one batch at every layer, and the
    top model's activations kept for the backward pass through it."""
    return int((2500 + weights_mb(bottom, 1) + weights_mb(top, 1) + activations_mb(bottom, batch_size, length, 2)
                + activations_mb(top, batch_size, length, 12)) * attempt)


def stitch_seconds(bottom: Mapping, top: Mapping, maps: int, steps: int, batch_size: int, length: int,
                   evaluation_rows: int) -> float:
    """Each training step: the bottom model's forward pass, then forward and backward through the top model
    (at most all of it) per map; the evaluation: the same forward passes over the evaluation rows."""
    train = steps * batch_size * length * (2 * bottom["n_parameters"] + maps * 6 * top["n_parameters"])
    evaluation = evaluation_rows * length * 2 * (bottom["n_parameters"] + (maps + 1) * top["n_parameters"])
    return (train + evaluation) / MODEL_FLOPS



# ----------------------------------------------------------------- token-level CKA
def token_tokens(a: Mapping, b: Mapping, split: str, max_length: int, max_tokens: int | None) -> int:
    """Tokens a token-level job reads: at most max_length per compared row (an upper bound: the stores'
    attributes do not count tokens), at most max_tokens."""
    rows = min(a["split_sizes"].get(split, 0), b["split_sizes"].get(split, 0))
    return min(rows * max_length, max_tokens or rows * max_length)


def token_cka_mem_mb(a: Mapping, b: Mapping, batch_size: int, shifts: int, attempt: int) -> int:
    """One batch's Gram terms (L, m, m) in float64 for A, B and a shifted B, with working copies (about 5 in
    all), the zarr chunks each reader keeps (64 MB; 2 + shifts readers), and 2 GB for the rest."""
    layers = max(s["n_layers"] + 1 for s in (a, b))
    grams = 5 * layers * batch_size ** 2 * 8 / 1e6
    return int((2000 + grams + (2 + shifts) * 67) * attempt)


def token_cka_seconds(a: Mapping, b: Mapping, tokens: int, batch_size: int, shifts: int) -> float:
    """Per batch of m tokens: every layer's Gram matrix on both sides (2·m²·d each), then the unbiased HSIC
    of every layer pair for B as it is and for each shift (2·m² each)."""
    depths = [s["n_layers"] + 1 for s in (a, b)]
    grams = sum(depth * 2 * batch_size ** 2 * s["hidden_size"] for depth, s in zip(depths, (a, b)))
    pairs = depths[0] * depths[1] * 2 * batch_size ** 2 * (1 + shifts)
    return tokens / batch_size * (grams + pairs) / CORE_FLOPS

"""What a stitched model is trained on and scored by: a fine-tuned classifier's task (cross-entropy on
the train split; accuracy and Matthews correlation on the evaluation split) or a causal language
model's next-token prediction (cross-entropy in nats per token on held-out text, packed in blocks).

Each objective keeps per-row statistics of an evaluation (the predicted class of each row; each
block's mean token loss), so that a score can be recomputed on any subset of rows (half-sample
intervals) and against broken correspondences (chance level):

- classification: the metric of the predictions against the labels permuted (the mean over seeded
  permutations: predictions that carry no information about their own row);
- language modelling: the expected cross-entropy when every position's prediction is scored on a
  target drawn from the targets of all positions, -Σ_v q(v) · mean_i log p_i(v), q the targets'
  frequencies (the exact mean over re-pairings of positions and targets).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from reprsim.io.datasets import load_split
from reprsim.nets.classifiers import classification_scores, encode_rows, length_order, token_lengths
from reprsim.nets.language_models import text_blocks, texts_of
from reprsim.nets.training import endless_batches

OBJECTIVES = ("classification", "language_modeling")
HIGHER_IS_BETTER = {"accuracy": True, "matthews_correlation": True, "cross_entropy": False}


HELDOUT_SEED = 7  # the held-out rows of the training split: one seeded draw, the same for every map and seed


def heldout_rows(total: int, heldout: int) -> np.ndarray:
    """Sorted positions of the held-out rows of a training split of `total` rows: `heldout` of them, at most a tenth
    of the split, drawn once (HELDOUT_SEED). The learned maps never train on them, and a map ends at its start
    unless training lowered its loss there."""
    count = min(int(heldout), total // 10)
    return np.sort(np.random.default_rng(HELDOUT_SEED).choice(total, size=count, replace=False))


def training_batches(lengths: np.ndarray, batch_size: int, rng: np.random.Generator):
    """Row-index batches, forever: each epoch a seeded shuffle, grouped by length (little padding)."""
    if len(lengths) < batch_size:
        raise ValueError(f"the training split has {len(lengths)} rows, fewer than stitching.batch_size {batch_size}")
    return endless_batches(lengths, batch_size, rng, group_by_length=True)


class Classification:
    """A fine-tuned sequence classifier's task on a prepared dataset."""

    metrics = ("accuracy", "matthews_correlation")

    def __init__(self, dataset_dir: str | Path, tokenizers: tuple, split: str, max_length: int, device,
                 eval_batch_size: int = 64, max_examples: int | None = None, train_split: str = "train",
                 heldout: int = 0):
        self.tokenizer, self.device, self.max_length = tokenizers[-1], device, int(max_length)
        train = load_split(dataset_dir, train_split)
        held = heldout_rows(len(train), heldout)
        kept = np.setdiff1d(np.arange(len(train)), held)
        self.train, heldout_frame = train.iloc[kept], train.iloc[held]
        self.train_lengths = token_lengths(self.tokenizer, self.train, self.max_length)
        self.heldout_batches = []
        if len(heldout_frame):
            ordered = heldout_frame.iloc[length_order(self.tokenizer, heldout_frame, self.max_length)]
            self.heldout_batches = [
                encode_rows(self.tokenizer, ordered, np.arange(s, min(s + eval_batch_size, len(ordered))),
                            self.max_length, self.device) for s in range(0, len(ordered), eval_batch_size)]
        frame = load_split(dataset_dir, split)
        if max_examples is not None and len(frame) > max_examples:
            frame = frame.iloc[:max_examples]
        # scored in order of length (little padding); every score is a function of the set of rows
        self.eval = frame.iloc[length_order(self.tokenizer, frame, self.max_length)]
        self.labels = self.eval["label"].to_numpy()
        self.eval_batches = self._eval_batches(self.tokenizer, eval_batch_size)
        same_tokens(tokenizers, [b["input_ids"] for b in self.eval_batches],
                    lambda tokenizer: [b["input_ids"] for b in self._eval_batches(tokenizer, eval_batch_size)])

    def _eval_batches(self, tokenizer, batch_size: int) -> list[dict]:
        return [encode_rows(tokenizer, self.eval, np.arange(start, min(start + batch_size, len(self.eval))),
                            self.max_length, self.device) for start in range(0, len(self.eval), batch_size)]

    @property
    def n(self) -> int:
        return len(self.eval)

    def train_batches(self, batch_size: int, rng: np.random.Generator):
        for indices in training_batches(self.train_lengths, batch_size, rng):
            yield encode_rows(self.tokenizer, self.train, indices, self.max_length, self.device)

    def loss(self, output, batch) -> torch.Tensor:
        return F.cross_entropy(output.logits.float(), batch["labels"])

    def row_stats(self, output, batch) -> dict[str, np.ndarray]:
        return {"prediction": output.logits.argmax(-1).cpu().numpy()}

    def scores(self, stats: dict[str, np.ndarray], rows: np.ndarray | None = None) -> dict[str, float]:
        predictions, labels = stats["prediction"], self.labels
        if rows is not None:
            predictions, labels = predictions[rows], labels[rows]
        return classification_scores(predictions, labels)

    def chance(self, stats: dict[str, np.ndarray], permutations: int, seed: int) -> dict[str, float]:
        rng = np.random.default_rng(seed)
        draws = [classification_scores(stats["prediction"], self.labels[rng.permutation(self.n)])
                 for _ in range(permutations)]
        return {metric: float(np.mean([draw[metric] for draw in draws])) for metric in self.metrics}


class LanguageModeling:
    """Next-token prediction on a prepared dataset's text, packed into blocks of `context` tokens."""

    metrics = ("cross_entropy",)

    def __init__(self, dataset_dir: str | Path, tokenizers: tuple, split: str, context: int, device,
                 eval_batch_size: int = 16, max_examples: int | None = None, train_split: str = "train",
                 heldout: int = 0):
        self.device, self.eval_batch_size = device, eval_batch_size
        tokenizer = tokenizers[-1]
        train = text_blocks(tokenizer, texts_of(dataset_dir, train_split), context)
        held = torch.as_tensor(heldout_rows(len(train), heldout), dtype=torch.long)
        kept = torch.as_tensor(np.setdiff1d(np.arange(len(train)), held.numpy()), dtype=torch.long)
        self.train = train[kept]
        self.heldout_batches = [self._batch(train[held[s:s + eval_batch_size]])
                                for s in range(0, len(held), eval_batch_size)]
        texts = texts_of(dataset_dir, split)
        self.eval = text_blocks(tokenizer, texts, context)
        if max_examples is not None and len(self.eval) > max_examples:
            self.eval = self.eval[:max_examples]
        same_tokens(tokenizers, [self.eval], lambda t: [text_blocks(t, texts, context)[:len(self.eval)]])
        self.vocab = len(tokenizer)
        self.eval_batches = [self._batch(self.eval[s:s + eval_batch_size]) for s in range(0, len(self.eval), eval_batch_size)]
        targets = self.eval[:, 1:].reshape(-1)
        self.target_frequency = torch.bincount(targets, minlength=self.vocab).double() / targets.numel()

    @property
    def n(self) -> int:
        return len(self.eval)

    def _batch(self, blocks: torch.Tensor) -> dict:
        return {"input_ids": blocks.to(self.device), "attention_mask": torch.ones_like(blocks, device=self.device)}

    def train_batches(self, batch_size: int, rng: np.random.Generator):
        for indices in training_batches(np.full(len(self.train), self.train.shape[1]), batch_size, rng):
            yield self._batch(self.train[torch.as_tensor(indices)])

    @staticmethod
    def _token_losses(output, batch) -> torch.Tensor:
        logits = output.logits[:, :-1].float()
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch["input_ids"][:, 1:].reshape(-1),
                               reduction="none").view(logits.shape[:2])

    def loss(self, output, batch) -> torch.Tensor:
        return self._token_losses(output, batch).mean()

    def row_stats(self, output, batch) -> dict[str, np.ndarray]:
        log_probs = torch.log_softmax(output.logits[:, :-1].double(), dim=-1)
        return {"block_loss": self._token_losses(output, batch).double().mean(dim=1).cpu().numpy(),
                # summed over positions: the chance level needs only Σ_i log p_i(v) per vocabulary entry v
                "log_prob_sum": log_probs.sum(dim=(0, 1)).cpu().numpy()[None, :]}

    def scores(self, stats: dict[str, np.ndarray], rows: np.ndarray | None = None) -> dict[str, float]:
        losses = stats["block_loss"] if rows is None else stats["block_loss"][rows]
        return {"cross_entropy": float(losses.mean())}

    def chance(self, stats: dict[str, np.ndarray], permutations: int, seed: int) -> dict[str, float]:
        positions = self.eval[:, 1:].numel()
        mean_log_prob = stats["log_prob_sum"].sum(axis=0) / positions
        return {"cross_entropy": float(-(self.target_frequency.numpy() * mean_log_prob).sum())}


def same_tokens(tokenizers: tuple, encoded: list[torch.Tensor], encode) -> None:
    """Stitching passes a stream position by position: refuse models whose tokenizers split the
    evaluation text differently."""
    if len(tokenizers) < 2 or tokenizers[0] is tokenizers[1]:
        return
    other = encode(tokenizers[0])
    if len(other) != len(encoded) or any(a.shape != b.shape or not torch.equal(a.cpu(), b.cpu())
                                         for a, b in zip(other, encoded)):
        raise ValueError("the two models tokenise the evaluation text differently; stitching feeds one model's stream "
                         "to the other position by position, so it needs one tokenizer (compare such models with "
                         "the similarity measures at word level instead)")

"""Language modelling on a prepared dataset's text: the texts of a split, packed into blocks of `context`
tokens; the next-token cross-entropy of a causal LM over such blocks; and masked language modelling's
masking (Devlin et al. 2019) and cross-entropy over the masked positions.

Packing follows GPT-2's and TransformerLens's `chunk_and_tokenize`: each text is tokenised without the
tokenizer's own special tokens, followed by the tokenizer's end-of-text token (where it has one), all
texts concatenated in order and cut into full blocks (the remainder dropped), so no position is padding
and every block's tokens but the first are predicted. The pretrain source of the models stage trains on
these blocks; the stitching stage scores stitched language models on them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from reprsim.io.datasets import load_split


def texts_of(dataset_dir: str | Path, split: str = "train") -> list[str]:
    """The texts of a prepared dataset's `split`, row by row: each row's text, then its text_pair when it has one."""
    frame = load_split(dataset_dir, split)
    pairs = frame["text_pair"].tolist() if "text_pair" in frame else [None] * len(frame)
    texts = []
    for text, pair in zip(frame["text"].tolist(), pairs):
        texts += [t for t in (text, pair) if isinstance(t, str)]
    return texts


def text_blocks(tokenizer, texts: list[str], context: int) -> torch.LongTensor:
    """`texts` tokenised (no special tokens of the tokenizer's template), each followed by the tokenizer's
    eos token when it has one, concatenated and cut into (n_blocks, context) full blocks; the remainder is
    dropped. ValueError when the texts do not fill one block."""
    if isinstance(context, bool) or int(context) != context or context < 2:
        raise ValueError(f"context must be an integer ≥ 2 (a block predicts its tokens after the first); got {context!r}")
    context = int(context)
    texts = list(texts)
    if not texts:
        raise ValueError(f"no texts to pack into blocks of {context} tokens")
    ids = tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]
    eos = tokenizer.eos_token_id
    pieces = [np.asarray(row, dtype=np.int64) for row in ids]
    if eos is not None:
        end = np.array([eos], dtype=np.int64)
        pieces = [piece for row in pieces for piece in (row, end)]
    flat = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)
    n_blocks = len(flat) // context
    if n_blocks == 0:
        raise ValueError(f"{len(texts)} text(s) make {len(flat)} tokens, not even one block of context = {context} "
                         "tokens: use more text or a smaller context")
    return torch.from_numpy(flat[: n_blocks * context].reshape(n_blocks, context).copy())


def lm_cross_entropy(model, blocks: torch.LongTensor, batch_size: int, device) -> tuple[float, int]:
    """Mean next-token cross-entropy (nats per predicted token) of causal LM `model` over `blocks`
    (n_blocks, context), and the number of predicted tokens, n_blocks * (context - 1). Runs in inference
    mode, the model in eval mode (its training flag is restored after)."""
    if blocks.ndim != 2 or blocks.shape[0] == 0 or blocks.shape[1] < 2:
        raise ValueError(f"blocks must be (n_blocks ≥ 1, context ≥ 2) token ids; got shape {tuple(blocks.shape)}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be ≥ 1; got {batch_size}")
    def summed(start: int, stop: int) -> torch.Tensor:
        batch = blocks[start:stop].to(device)
        logits = model(input_ids=batch, use_cache=False).logits[:, :-1].float()
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1), reduction="sum")

    count = int(blocks.shape[0] * (blocks.shape[1] - 1))
    return _evaluated_sum(model, len(blocks), batch_size, summed) / count, count


def _evaluated_sum(model, rows: int, batch_size: int, summed) -> float:
    """The sum over batches of `rows` of `summed(start, stop)` (a loss summed over the batch), in float64, in
    inference mode with the model in eval mode (its training flag restored after)."""
    training = model.training
    model.eval()
    total = torch.zeros((), dtype=torch.float64)
    try:
        with torch.inference_mode():
            for start in range(0, rows, batch_size):
                total += summed(start, start + batch_size).double().cpu()
    finally:
        model.train(training)
    return float(total)


def unigram_cross_entropy(train_blocks: torch.LongTensor, blocks: torch.LongTensor, vocab_size: int,
                          targets: torch.LongTensor | None = None) -> float:
    """Cross-entropy (nats per token) of the predicted tokens of `blocks` (all but each block's first; or the
    tokens `targets`, such as a masked LM's masked ones) under the unigram frequencies of the tokens of
    `train_blocks`, add-one smoothed over `vocab_size` tokens: the loss of a model that learnt token
    frequencies and nothing of context (the chance reference)."""
    counts = torch.bincount(train_blocks.reshape(-1), minlength=vocab_size).double()
    probabilities = (counts + 1) / (counts.sum() + vocab_size)
    targets = blocks[:, 1:].reshape(-1) if targets is None else targets.reshape(-1)
    return float(-torch.log(probabilities[targets]).mean())


# ----------------------------------------------------------------- masked language modelling
IGNORED = -100  # the label of a position not scored (torch's cross_entropy ignore_index, transformers' too)
MASK = "<mask>"


def add_mask_token(tokenizer) -> str | None:
    """Give `tokenizer` a mask token when it has none (the byte-level BPEs of reprsim.nets.tokenizers have BOS,
    EOS and PAD only): <mask>, or <mask_1>, ... where the vocabulary holds that string, so text tokenises as
    before and the vocabulary gains one symbol. Returns the token added; None when it had one."""
    if tokenizer.mask_token is not None:
        return None
    vocabulary, name, n = tokenizer.get_vocab(), MASK, 0
    while name in vocabulary:
        n += 1
        name = f"<mask_{n}>"
    tokenizer.add_special_tokens({"mask_token": name})
    return name


def mask_tokens(ids: torch.LongTensor, probability: float, mask_id: int, special_ids, vocab_size: int,
                generator: torch.Generator) -> tuple[torch.LongTensor, torch.LongTensor]:
    """BERT's masking (Devlin et al. 2019, §3.1) of token ids `ids` (any shape, on the CPU, as `generator`):
    each token not in `special_ids` is selected with `probability`; of the selected, 80% become `mask_id`,
    10% a token drawn uniformly from the non-special ids below `vocab_size`, 10% stay. Returns (inputs,
    labels): labels hold the original id at selected positions and IGNORED elsewhere. Pure: the same
    generator state gives the same masks, and the draws do not depend on the ids' values."""
    if not 0 < probability <= 1:
        raise ValueError(f"mask probability must lie in (0, 1]; got {probability!r}")
    special = torch.as_tensor(sorted({int(i) for i in special_ids}), dtype=torch.long)
    replacements = torch.arange(vocab_size)[~torch.isin(torch.arange(vocab_size), special)]
    if len(replacements) == 0:
        raise ValueError(f"a vocabulary of {vocab_size} tokens, all special, has no token to mask")
    selected = (torch.rand(ids.shape, generator=generator) < probability) & ~torch.isin(ids, special)
    action = torch.rand(ids.shape, generator=generator)
    drawn = replacements[torch.randint(len(replacements), ids.shape, generator=generator)]
    inputs = ids.clone()
    inputs[selected & (action < 0.8)] = mask_id
    randomised = selected & (action >= 0.8) & (action < 0.9)
    inputs[randomised] = drawn[randomised]
    labels = torch.where(selected, ids, torch.full_like(ids, IGNORED))
    return inputs, labels


def masked_lm_loss(logits: torch.Tensor, labels: torch.LongTensor) -> torch.Tensor:
    """Mean cross-entropy of `logits` (..., vocab) over the positions `labels` selects (IGNORED elsewhere); 0,
    with zero gradient, when it selects none (a batch with no token drawn), where a plain mean would be NaN."""
    total = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1),
                            ignore_index=IGNORED, reduction="sum")
    return total / labels.ne(IGNORED).sum().clamp(min=1)


def masked_lm_cross_entropy(model, inputs: torch.LongTensor, labels: torch.LongTensor, batch_size: int,
                            device) -> tuple[float, int]:
    """Mean cross-entropy (nats per masked token) of masked LM `model` over the selected positions of the masked
    blocks (`inputs`, `labels` from :func:`mask_tokens`), and their number. Runs in inference mode, the model in
    eval mode (its training flag is restored after)."""
    count = int(labels.ne(IGNORED).sum())
    if inputs.ndim != 2 or inputs.shape != labels.shape or count == 0:
        raise ValueError(f"inputs and labels must be (n_blocks, context) with a masked position; got shapes "
                         f"{tuple(inputs.shape)}, {tuple(labels.shape)} and {count} masked")
    def summed(start: int, stop: int) -> torch.Tensor:
        logits = model(input_ids=inputs[start:stop].to(device)).logits.float()
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels[start:stop].to(device).reshape(-1),
                               ignore_index=IGNORED, reduction="sum")

    return _evaluated_sum(model, len(inputs), batch_size, summed) / count, count

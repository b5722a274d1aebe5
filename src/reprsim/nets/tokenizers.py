"""A tokenizer trained offline on a dataset's own text, so that a configuration can compare models
whose tokenizers differ (MiniLM's WordPiece against a byte-level BPE) without a model hub.

Byte-level BPE (Radford et al. 2019, as GPT-2 and RoBERTa use it) through Hugging Face `tokenizers`:
every string is encodable (no unknown token), and character offsets map each token onto the
data-defined words of `reprsim.text.words`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

BOS, EOS, PAD = "<s>", "</s>", "<pad>"


def train_byte_bpe(texts: Sequence[str], vocab_size: int, *, seed: int = 0, max_texts: int | None = None,
                   min_frequency: int = 2) -> PreTrainedTokenizerFast:
    """A byte-level BPE with at most `vocab_size` tokens (the 256 byte symbols and 3 specials
    included) learnt from `texts`, wrapped for transformers (save_pretrained, padding, offsets).

    Training is deterministic given its texts; `seed` draws the `max_texts` it learns from when
    there are more. A single sequence is `<s> text </s>`, a pair `<s> a </s> b </s>`; `<pad>` pads.
    """
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    specials = [BOS, EOS, PAD]
    if vocab_size < len(alphabet) + len(specials) + 1:
        raise ValueError(f"vocab_size {vocab_size} leaves no merges: a byte-level BPE needs more than "
                         f"{len(alphabet) + len(specials)} tokens (256 bytes and {len(specials)} specials)")
    texts = [t for t in texts if isinstance(t, str) and t.strip()]
    if not texts:
        raise ValueError("no text to train the tokenizer on")
    if max_texts is not None and len(texts) > max_texts:
        keep = np.sort(np.random.default_rng(seed).choice(len(texts), max_texts, replace=False))
        texts = [texts[i] for i in keep]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=specials,
                                  initial_alphabet=alphabet, show_progress=False)
    bpe.train_from_iterator(texts, trainer)
    bos, eos = bpe.token_to_id(BOS), bpe.token_to_id(EOS)
    bpe.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A {EOS}", pair=f"{BOS} $A {EOS} $B:1 {EOS}:1", special_tokens=[(BOS, bos), (EOS, eos)])
    return PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token=BOS, eos_token=EOS, pad_token=PAD,
                                   padding_side="right")

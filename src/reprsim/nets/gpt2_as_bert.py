"""A GPT-2 config translated into the BERT config of a masked language model of the same sizes.

A pretrained model's `config` names GPT2Config fields whatever its `objective`, so that a causal LM and a
masked LM that differ only in objective have the same width, depth, heads, MLP width, dropout and LayerNorm
epsilon by construction. The masked one is a BERT (BertForMaskedLM) because masked language modelling needs
bidirectional attention: a masked token is predicted from both sides. Torch-free: the config check refuses
what cannot be translated before any job runs, and the models stage builds from the same translation.
"""

from __future__ import annotations

from collections.abc import Mapping

GPT2_ALIASES = {"hidden_size": "n_embd", "num_hidden_layers": "n_layer", "num_attention_heads": "n_head",
                "max_position_embeddings": "n_positions"}  # GPT2Config.attribute_map
# GPT2Config field -> the BertConfig field that plays its part
AS_BERT = {
    "n_embd": "hidden_size", "n_layer": "num_hidden_layers", "n_head": "num_attention_heads",
    "n_inner": "intermediate_size", "n_positions": "max_position_embeddings", "activation_function": "hidden_act",
    "resid_pdrop": "hidden_dropout_prob", "attn_pdrop": "attention_probs_dropout_prob",
    "layer_norm_epsilon": "layer_norm_eps", "initializer_range": "initializer_range",
}
# GPT2Config's defaults, given explicitly: BertConfig's differ (MLP 3072 whatever the width, epsilon 1e-12)
GPT2_DEFAULTS = {"n_embd": 768, "n_layer": 12, "n_head": 12, "n_inner": None, "activation_function": "gelu_new",
                 "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1, "layer_norm_epsilon": 1e-5,
                 "initializer_range": 0.02}
# BERT's own: a fine-tuning on text pairs may pass token type 1 for the second text
TYPE_VOCAB_SIZE = 2


def untranslatable(gpt2: Mapping) -> list[tuple[str, str]]:
    """(key, why) for each key of the GPT2Config fields `gpt2` (aliases allowed) that a BERT cannot have."""
    problems = []
    for key, value in gpt2.items():
        field = GPT2_ALIASES.get(key, key)
        if field == "embd_pdrop":
            residual = gpt2.get("resid_pdrop", GPT2_DEFAULTS["resid_pdrop"])
            if value != residual:
                problems.append((key, f"a BERT drops out its embeddings with the residual dropout, resid_pdrop "
                                      f"({residual}); give embd_pdrop = resid_pdrop, or leave it out"))
        elif field not in AS_BERT:
            problems.append((key, "a masked LM (a BERT) has no such field; it translates "
                                  + ", ".join(sorted([*AS_BERT, "embd_pdrop"]))))
    return problems


def bert_fields(gpt2: Mapping) -> dict:
    """The BertConfig fields of the masked LM the same size as the GPT-2 that `gpt2` (GPT2Config fields, aliases
    allowed) describes: GPT-2's defaults where `gpt2` is silent, the MLP 4 × n_embd wide unless n_inner says.
    ValueError naming the first key that has no BERT counterpart."""
    for key, why in untranslatable(gpt2):
        raise ValueError(f"config.{key}: {why}")
    values = {**GPT2_DEFAULTS, **{GPT2_ALIASES.get(key, key): value for key, value in gpt2.items()}}
    if values["n_inner"] is None:
        values["n_inner"] = 4 * values["n_embd"]
    fields = {AS_BERT[field]: value for field, value in values.items() if field in AS_BERT}
    return {**fields, "type_vocab_size": TYPE_VOCAB_SIZE}

"""GPT-2 blocks that attend both ways: the causal LM's own architecture for a masked language model, so that an
objective level of a universality study changes the objective and nothing else.

transformers builds a GPT-2's attention mask from `config.is_causal` (False: a bidirectional mask, padding still
masked), but each attention module also carries its own `is_causal` flag, which PyTorch's SDPA kernel obeys when
no mask is materialised; the module flags are not saved. So a bidirectional model records `is_causal: false` in
its config.json and every load sets the module flags again from it (:func:`restore_attention`, called by
:mod:`reprsim.nets.loading`).
"""

from __future__ import annotations

BIDIRECTIONAL = {"is_causal": False}  # the config field a bidirectional GPT-2 saves


def is_bidirectional(config) -> bool:
    """Whether a model's config says it attends both ways (built with :data:`BIDIRECTIONAL` among its config fields)."""
    return getattr(config, "is_causal", True) is False


def restore_attention(model):
    """Set every attention module's `is_causal` flag from the model's config (after a load: the flags are not
    saved); a causal model is left as it is. Returns the model."""
    if is_bidirectional(model.config):
        for module in model.modules():
            if hasattr(module, "is_causal"):
                module.is_causal = False
    return model

"""Activations of any PyTorch model by module name: :func:`activations` runs the model over inputs a user holds and
returns one float32 matrix per named module, pooled as the workflow's extract stage pools (reprsim.nets.pooling).

Two kinds of input:

- a transformers model with its tokenizer and a list of strings: tokenised as the extract stage tokenises (special
  tokens, truncation at ``max_length``, right padding), so on the same rows and batches the mean, cls, last and
  per-token rows of the embedding output and every block equal the activation store's;
- any ``torch.nn.Module`` with an iterable of batches: a tensor (``model(batch)``), a tuple of tensors
  (``model(*batch)``) or a dict of tensors (``model(**batch)``, whose ``"attention_mask"``, (batch, tokens), 1 at real
  tokens, is the padding mask the poolings follow).

Each named module is read by a forward hook, pooled inside the hook (so the token-level outputs of the hooked modules
are never held beyond the per-token rows returned) and the hooks are removed afterwards, also on an error.

Reached as ``reprsim.activations`` (the function). The module is not named ``reprsim/activations.py``: importing a
submodule sets the package's attribute of its name to the module, so a lazily re-exported function of the same name
would be replaced by the module after its first use.
"""

from __future__ import annotations

import difflib
import sys
import time
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from reprsim.nets.pooling import POOLINGS, pool, token_rows

PER_TOKEN = "tokens"
POOLING_NAMES = (*POOLINGS, PER_TOKEN)
DTYPES = ("float32", "float16")  # the activation store's dtypes (extraction.dtype)


class ActivationsError(ValueError):
    """Inputs, layers or settings reprsim.activations cannot use; the message names the argument and the fix."""


class Activations(dict):
    """Layer name -> float32 (or float16) array, in the order of the layers asked for: (n_examples, d) for the
    poolings mean, cls and last (and for a module whose output has no token axis), (n_tokens, d) for ``tokens``.

    A dict, so ``result["encoder.layer.3"]``, ``list(result)`` and ``list(result.values())`` (a layer stack for
    ``reprsim.compare``) work as on any dict. Attributes: ``pooling``; ``n_examples``; for ``tokens``, ``example``
    and ``position`` (int64, one per row: the example's index in the inputs and the token's index among that
    example's real tokens; the rows are example-major), None otherwise."""

    def __init__(self, arrays: Mapping[str, np.ndarray], *, pooling: str, n_examples: int,
                 example: np.ndarray | None = None, position: np.ndarray | None = None):
        super().__init__(arrays)
        self.pooling, self.n_examples, self.example, self.position = pooling, n_examples, example, position

    def stack(self) -> np.ndarray:
        """The arrays stacked into (layers, rows, d); the layers must have one width."""
        widths = {name: array.shape[1:] for name, array in self.items()}
        if len(set(widths.values())) > 1:
            raise ActivationsError(f"the layers differ in width ({widths}); stack those of one width, or pass the "
                                   "list of matrices list(result.values()) to reprsim.compare")
        return np.stack(list(self.values()))

    def __repr__(self) -> str:
        shapes = ", ".join(f"{name!r}: {array.shape}" for name, array in self.items())
        return f"Activations(pooling={self.pooling!r}, n_examples={self.n_examples}, {{{shapes}}})"


def activations(model: nn.Module, inputs, layers: str | Sequence[str] | None = None, *, tokenizer=None,
                pooling: str = "mean", batch_size: int = 32, max_length: int = 128,
                device: str | torch.device | None = None, dtype: str = "float32",
                progress: bool = False) -> Activations:
    """Run `model` over `inputs` and return each named module's output, pooled, as an :class:`Activations`
    (a dict: module name -> array).

    ``inputs``: a list of strings, with the model's ``tokenizer`` (tokenised in batches of ``batch_size``,
    truncated at ``max_length`` tokens, special tokens included, capped at the model's position limit, right
    padded; only input_ids and attention_mask are passed, as the extract stage does); or an iterable of batches,
    each a tensor, a tuple of tensors or a dict of tensors passed as keyword arguments whose ``"attention_mask"``
    (batch, tokens) marks the real tokens (a single tensor or dict is one batch).

    ``layers``: names from ``model.named_modules()``, or one name. None (a transformers model only): the modules
    whose outputs ``output_hidden_states=True`` returns, in its order: the embedding output (BERT's
    ``embeddings``, GPT-2's ``drop``) and each block's (``encoder.layer.i``, ``h.i``), except that where the
    model ends in a final norm its last entry is that norm's output (GPT-2's ``ln_f``), as in the activation
    store. A module returning a tuple (or a transformers ModelOutput) is read at its first element.

    ``pooling``: over the token axis of a (batch, tokens, d) output, padding excluded: ``mean`` (over the real
    tokens), ``cls`` (the first real token), ``last`` (the last real token), or ``tokens`` (every real token's row;
    the result's ``example`` and ``position`` say whose). An output (batch, d) has no token axis and is returned
    as it is (``tokens`` is refused for it).

    ``device``: None runs where the model's parameters are; cpu, cuda, auto or a torch.device moves the model
    there (``model.to``). The model is left in eval mode; the passes run under ``torch.no_grad``. ``dtype``:
    float32 or float16, the arrays' dtype (the poolings are computed in float32, as the store's). ``progress``
    prints the batches done to stderr (the first, then at most one line a second, and the total).
    """
    if pooling not in POOLING_NAMES:
        close = difflib.get_close_matches(str(pooling), POOLING_NAMES, n=1)
        raise ActivationsError(f"pooling must be one of {', '.join(POOLING_NAMES)}; got {pooling!r}"
                               + (f" (did you mean {close[0]!r}?)" if close else ""))
    if dtype not in DTYPES:
        raise ActivationsError(f"dtype must be one of {', '.join(DTYPES)}; got {dtype!r}")
    for argument, value in (("batch_size", batch_size), ("max_length", max_length)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ActivationsError(f"{argument} must be an integer ≥ 1; got {value!r}")
    if not isinstance(model, nn.Module):
        raise ActivationsError(f"model must be a torch.nn.Module; got {type(model).__name__}")

    target = _device(model, device)
    if device is not None:
        model.to(target)
    model.eval()
    texts = _texts(inputs, tokenizer)
    if texts is not None:
        batches, n_examples = _text_batches(model, tokenizer, texts, batch_size, max_length, target), len(texts)
    else:
        batches, n_examples = _user_batches(inputs, target), None
    batches = iter(batches)
    try:
        first = next(batches)
    except StopIteration:
        raise ActivationsError("inputs holds no batch") from None
    names = _layer_names(model, layers, first)
    return _run(model, names, _chain(first, batches), pooling, dtype, progress, n_examples)


# ------------------------------------------------------------------ inputs


def _device(model: nn.Module, device) -> torch.device:
    if device is None:
        parameter = next(model.parameters(), None)
        return parameter.device if parameter is not None else torch.device("cpu")
    if isinstance(device, torch.device):
        return device
    from reprsim.io.device import resolve_device

    try:
        return resolve_device(device)
    except ValueError as error:
        raise ActivationsError(str(error)) from error


def _texts(inputs, tokenizer) -> list[str] | None:
    """The strings to tokenise (None for batches), checked against the tokenizer's presence."""
    if isinstance(inputs, str):
        raise ActivationsError("inputs is one string; pass a list of strings (inputs=[text])")
    if tokenizer is None:
        if isinstance(inputs, Sequence) and len(inputs) > 0 and isinstance(inputs[0], str):
            raise ActivationsError("inputs are strings, so the model's tokenizer is needed: pass tokenizer= (e.g. "
                                   "transformers.AutoTokenizer.from_pretrained(<the model's directory or name>)), or "
                                   "pass batches of token ids instead of strings")
        return None
    if isinstance(inputs, (torch.Tensor, Mapping)) or not isinstance(inputs, Iterable):
        raise ActivationsError(f"a tokenizer was given, so inputs must be a list of strings; got "
                               f"{type(inputs).__name__} (batches of tensors are passed without a tokenizer)")
    texts = list(inputs)
    if not texts:
        raise ActivationsError("inputs holds no text")
    wrong = [i for i, text in enumerate(texts) if not isinstance(text, str)]
    if wrong:
        raise ActivationsError(f"a tokenizer was given, so inputs must be strings; item {wrong[0]} is a "
                               f"{type(texts[wrong[0]]).__name__} ({len(wrong)} of {len(texts)} are not strings; "
                               "batches of tensors are passed without a tokenizer)")
    return texts


def _text_batches(model, tokenizer, texts: list[str], batch_size: int, max_length: int, device: torch.device):
    """{input_ids, attention_mask} of consecutive batches, as reprsim.stages.extract tokenises and pads: the token
    ids of each text with special tokens, truncated at max_length (capped at the model's position limit), right
    padded with the pad token (GPT-2's eos, which has none)."""
    config = getattr(model, "config", None)
    limit = getattr(config, "max_position_embeddings", None) or max_length
    max_length = min(max_length, limit if limit > 0 else max_length)  # XLNet's -1: no limit
    ids = tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]
    empty = [i for i, row in enumerate(ids) if len(row) == 0]
    if empty:
        raise ActivationsError(f"text {empty[0]} tokenised to zero tokens ({len(empty)} such texts)")
    pad_id = next((i for i in (tokenizer.pad_token_id, tokenizer.eos_token_id) if i is not None), 0)
    # what a config may switch on that would hold every layer's states or keys and values beside the hooks' rows
    quiet = {flag: False for flag in ("output_hidden_states", "output_attentions", "use_cache")
             if getattr(config, flag, False) is True}
    for start in range(0, len(ids), batch_size):
        rows = ids[start:start + batch_size]
        lengths = np.array([len(row) for row in rows])
        input_ids = np.full((len(rows), int(lengths.max())), pad_id, dtype=np.int64)
        for i, row in enumerate(rows):
            input_ids[i, :len(row)] = row
        mask = (np.arange(input_ids.shape[1])[None, :] < lengths[:, None]).astype(np.int64)
        kwargs = {"input_ids": torch.from_numpy(input_ids).to(device),
                  "attention_mask": torch.from_numpy(mask).to(device), **quiet}
        yield (), kwargs, kwargs["attention_mask"]


def _user_batches(inputs, device: torch.device):
    """(args, kwargs, mask or None) of each batch a user gives."""
    if isinstance(inputs, (torch.Tensor, Mapping)):
        inputs = [inputs]
    if not isinstance(inputs, Iterable):
        raise ActivationsError(f"inputs must be a list of strings (with tokenizer=) or an iterable of batches "
                               f"(tensors, tuples of tensors or dicts of tensors); got {type(inputs).__name__}")
    for index, batch in enumerate(inputs):
        if isinstance(batch, torch.Tensor):
            yield (batch.to(device),), {}, None
        elif isinstance(batch, Mapping):
            kwargs = {key: value.to(device) if isinstance(value, torch.Tensor) else value
                      for key, value in batch.items()}
            mask = kwargs.get("attention_mask")
            if mask is not None and (not isinstance(mask, torch.Tensor) or mask.dim() != 2):
                raise ActivationsError(f"batch {index}: attention_mask must be a (batch, tokens) tensor; got "
                                       f"{getattr(mask, 'shape', type(mask).__name__)}")
            yield (), kwargs, mask
        elif isinstance(batch, (tuple, list)) and all(isinstance(item, torch.Tensor) for item in batch):
            yield tuple(item.to(device) for item in batch), {}, None
        else:
            raise ActivationsError(f"batch {index} is a {type(batch).__name__}; a batch is a tensor, a tuple of "
                                   "tensors or a dict of tensors (its 'attention_mask' the padding mask); strings need "
                                   "tokenizer= and a list of strings as inputs")


def _chain(first, rest):
    yield first
    yield from rest


# ------------------------------------------------------------------ layers


def _layer_names(model: nn.Module, layers, first_batch) -> list[str]:
    modules = dict(model.named_modules())
    if layers is None:
        return _hidden_state_modules(model, modules, first_batch)
    names = [layers] if isinstance(layers, str) else list(layers)
    if not names:
        raise ActivationsError("layers is empty; name at least one module (see model.named_modules())")
    wrong = [name for name in names if not isinstance(name, str)]
    if wrong:
        raise ActivationsError(f"layers are module names (strings); got {wrong[0]!r}")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ActivationsError(f"layers names {', '.join(map(repr, repeated))} more than once; name each module once")
    for name in names:
        if name not in modules:
            raise ActivationsError(f"no module named {name!r} in {type(model).__name__}; "
                                   + _suggest(name, [n for n in modules if n]))
    return names


def _suggest(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=5, cutoff=0.5)
    close += [n for n in known if n.endswith("." + name) and n not in close][:5 - len(close)]
    if close:
        return "close names: " + ", ".join(close)
    return f"its modules include {', '.join(known[:8])}{', ...' if len(known) > 8 else ''} (model.named_modules())"


def _first_tensor(output):
    """A module's output as a tensor: itself, a tuple's (list's) first element, a ModelOutput's first value."""
    if isinstance(output, (tuple, list)):
        output = output[0] if len(output) else None
    elif isinstance(output, Mapping):
        output = next(iter(output.values()), None)
    return output if isinstance(output, torch.Tensor) else None


def _hidden_state_modules(model: nn.Module, modules: dict[str, nn.Module], first_batch) -> list[str]:
    """The modules whose outputs are the model's hidden_states (output_hidden_states=True), found on one forward
    pass by identity: each hidden state is the very tensor some module returned (or a view of it of the same shape:
    GPT-2's last, ln_f's output viewed). Among the modules that returned it, a block (an element of a ModuleList),
    else the outermost; modules that return a ModelOutput are not candidates (the model itself, BERT's encoder)."""
    if getattr(model, "config", None) is None:
        raise ActivationsError(f"layers=None chooses the hidden states of a transformers model, and "
                               f"{type(model).__name__} is not one; name its modules, e.g. layers="
                               f"{[n for n in modules if n][:3]} (model.named_modules())")
    args, kwargs = _one_example(*first_batch)  # one is enough to see which module returns what
    returned: dict[str, torch.Tensor] = {}

    def record(name):
        def hook(module, hook_args, output):
            if isinstance(output, (torch.Tensor, tuple, list)) and _first_tensor(output) is not None:
                returned.setdefault(name, _first_tensor(output))
        return hook

    handles = [module.register_forward_hook(record(name)) for name, module in modules.items() if name]
    try:
        with torch.no_grad():
            output = model(*args, **{**kwargs, "output_hidden_states": True})
    finally:
        for handle in handles:
            handle.remove()
    hidden = getattr(output, "hidden_states", None)
    if not hidden:
        raise ActivationsError(f"{type(model).__name__} returns no hidden_states with output_hidden_states=True; "
                               "name the modules to read: layers=[...] (model.named_modules())")
    blocks = {id(child) for module in modules.values() if isinstance(module, nn.ModuleList) for child in module}
    names = []
    for index, state in enumerate(hidden):
        found = [name for name, tensor in returned.items() if _same(tensor, state)]
        if not found:
            raise ActivationsError(f"hidden_states[{index}] of {type(model).__name__} is no module's output (it is "
                                   "computed between modules); name the modules to read: layers=[...]")
        in_blocks = [name for name in found if id(modules[name]) in blocks]
        names.append(in_blocks[0] if in_blocks else min(found, key=lambda n: (n.count("."), len(n))))
    return names


def _one_example(args, kwargs, mask):
    """A batch's first example: every tensor whose first axis is the batch's, cut to its first row."""
    tensors = [t for t in (*args, *kwargs.values()) if isinstance(t, torch.Tensor) and t.dim() > 0]
    size = mask.shape[0] if mask is not None else (tensors[0].shape[0] if tensors else None)

    def first(value):
        return value[:1] if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape[0] == size else value

    return tuple(first(a) for a in args), {key: first(value) for key, value in kwargs.items()}


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors are the same values in the same memory (one tensor, or views alike)."""
    return a is b or (a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride()
                      and a.device == b.device and a.data_ptr() == b.data_ptr())


# ------------------------------------------------------------------ the passes


class _Layer:
    """One hooked module's rows: pooled inside its forward hook, so its token-level output is not kept."""

    def __init__(self, name: str, pooling: str, dtype: str):
        self.name, self.pooling, self.dtype = name, pooling, dtype
        self.chunks: list[np.ndarray] = []
        self.calls = 0
        self.mask: torch.Tensor | None = None  # this batch's attention mask; None: every token is real
        self.shape: tuple[int, ...] = ()  # this batch's output's (batch,) or (batch, tokens)

    def hook(self, module, args, output) -> None:
        self.calls += 1
        if self.calls > 1:
            return
        tensor = _first_tensor(output)
        if tensor is None:
            raise ActivationsError(f"module {self.name!r} returned {type(output).__name__}, not a tensor (nor a tuple "
                                   "whose first element is one); hook one of its submodules or the module after it")
        mask = self.mask
        if mask is not None and mask.device != tensor.device:
            mask = mask.to(tensor.device)
        if tensor.dim() == 2:
            if self.pooling == PER_TOKEN:
                raise ActivationsError(f"module {self.name!r} returns {tuple(tensor.shape)} (batch, features): no "
                                       "token axis for pooling='tokens'")
            if mask is not None and tensor.shape[0] != mask.shape[0]:
                raise ActivationsError(f"module {self.name!r} returns {tuple(tensor.shape)}, but the batch holds "
                                       f"{mask.shape[0]} examples")
            rows = tensor.float().clone()  # not a view: a later in-place operation (ReLU(inplace=True)) would change it
        elif tensor.dim() == 3:
            if mask is None:
                mask = torch.ones(tensor.shape[:2], dtype=torch.int64, device=tensor.device)
            elif tuple(tensor.shape[:2]) != tuple(mask.shape):
                raise ActivationsError(f"module {self.name!r} returns {tuple(tensor.shape)}, whose (batch, tokens) "
                                       f"differ from the attention mask's {tuple(mask.shape)}; hook a module that "
                                       "keeps the input's tokens")
            if self.pooling == PER_TOKEN:
                rows = token_rows(tensor, mask)[0]
            else:
                rows = pool([tensor], mask, (self.pooling,))[self.pooling][0]
        else:
            raise ActivationsError(f"module {self.name!r} returns {tuple(tensor.shape)}; reprsim.activations reads "
                                   "(batch, tokens, features) or (batch, features) outputs")
        self.shape = tuple(tensor.shape[:tensor.dim() - 1])
        self.chunks.append(rows.detach().to("cpu").numpy().astype(self.dtype, copy=False))


def _run(model, names: list[str], batches, pooling: str, dtype: str, progress: bool,
         n_examples: int | None) -> Activations:
    modules = dict(model.named_modules())
    layers = [_Layer(name, pooling, dtype) for name in names]
    handles = [modules[layer.name].register_forward_hook(layer.hook) for layer in layers]
    examples, positions, done = [], [], 0
    started = last_print = time.perf_counter()
    try:
        with torch.no_grad():
            for index, (args, kwargs, mask) in enumerate(batches):
                if mask is not None and (mask.sum(dim=1) == 0).any():
                    raise ActivationsError(f"batch {index}: example {int((mask.sum(dim=1) == 0).nonzero()[0, 0])} has "
                                           "no real token (its attention_mask row is all 0)")
                for layer in layers:
                    layer.mask, layer.calls = mask, 0
                model(*args, **kwargs)
                _check_calls(layers, index)
                shapes = {layer.shape for layer in layers} if mask is None else {tuple(mask.shape)}
                sizes = {shape[0] for shape in shapes}
                if len(sizes) > 1:
                    raise ActivationsError(f"batch {index}: the layers' outputs differ in batch size "
                                           f"({ {layer.name: layer.shape for layer in layers} })")
                if pooling == PER_TOKEN:
                    if len(shapes) > 1:
                        raise ActivationsError(f"batch {index}: the layers' outputs differ in tokens "
                                               f"({ {layer.name: layer.shape for layer in layers} }); per-token rows "
                                               "need the same tokens in every layer")
                    real = mask.bool() if mask is not None else torch.ones(next(iter(shapes)), dtype=torch.bool)
                    example, column = real.nonzero(as_tuple=True)
                    examples.append((example + done).cpu().numpy())
                    positions.append((real.cumsum(dim=1) - 1)[example, column].cpu().numpy())
                done += sizes.pop()
                now = time.perf_counter()
                if progress and (index == 0 or now - last_print >= 1.0):
                    total = f" of {n_examples}" if n_examples is not None else ""
                    print(f"activations: batch {index + 1}, {done}{total} examples, {now - started:.1f} s",
                          file=sys.stderr, flush=True)
                    last_print = now
    finally:
        for handle in handles:
            handle.remove()
        for layer in layers:
            layer.mask = None
    if progress:
        print(f"activations: done: {index + 1} batches, {done} examples, {time.perf_counter() - started:.1f} s",
              file=sys.stderr, flush=True)
    arrays = {layer.name: np.concatenate(layer.chunks) for layer in layers}
    if pooling == PER_TOKEN:
        return Activations(arrays, pooling=pooling, n_examples=done, example=np.concatenate(examples).astype(np.int64),
                           position=np.concatenate(positions).astype(np.int64))
    return Activations(arrays, pooling=pooling, n_examples=done)


def _check_calls(layers: list[_Layer], index: int) -> None:
    for layer in layers:
        if layer.calls == 0:
            raise ActivationsError(f"module {layer.name!r} did not run in the forward pass (batch {index}); name a "
                                   "module the model's forward calls")
        if layer.calls > 1:
            raise ActivationsError(f"module {layer.name!r} ran {layer.calls} times in one forward pass (batch "
                                   f"{index}), so its output is not one per example; read a module that runs once")

"""Pairing the layers of two models of possibly different depth (layer 0 = embeddings)."""

from __future__ import annotations


def matching_layer(layer: int, depth_from: int, depth_to: int) -> int:
    """The layer at the same relative depth in a model with `depth_to` blocks."""
    return int(round(layer * depth_to / depth_from)) if depth_from else 0


def matching_weights(layer: int, depth_from: int, depth_to: int) -> list[tuple[int, float]]:
    """The layers at the same relative depth in a model with `depth_to` blocks, with weights summing to 1: the one
    layer where layer·depth_to/depth_from is whole, else the two around it, weighted by nearness (linear
    interpolation). No ties, unlike rounding: reference layer 1 of 4 meets a 2-block model's embeddings and first
    block half each, not whichever round-half-to-even picks."""
    if not depth_from:
        return [(0, 1.0)]
    below, rest = divmod(layer * depth_to, depth_from)
    if rest == 0:
        return [(below, 1.0)]
    weight = rest / depth_from
    return [(below, 1.0 - weight), (below + 1, weight)]


def reference_pairs(depth_bottom: int, depth_top: int) -> list[tuple[int, int]]:
    """(bottom layer, top layer) for every top layer 0..depth_top, from the bottom's layer at the same relative
    depth or the two around it (:func:`matching_weights`): the layers a study meets, as stitching places them."""
    return [(l, m) for m in range(depth_top + 1) for l, _ in matching_weights(m, depth_top, depth_bottom)]


def layer_pairs(depth_a: int, depth_b: int, layers: str) -> list[tuple[int, int]]:
    """(layer_a, layer_b) to align: each layer of the shallower model with the same relative depth, or all."""
    if layers == "all":
        return [(a, b) for a in range(depth_a + 1) for b in range(depth_b + 1)]
    if depth_a <= depth_b:
        return [(a, matching_layer(a, depth_a, depth_b)) for a in range(depth_a + 1)]
    return [(matching_layer(b, depth_b, depth_a), b) for b in range(depth_b + 1)]


def model_depths(pairs) -> dict[str, int]:
    """Each model's number of blocks in a pair table (columns model_a, layer_a, model_b, layer_b):
    its deepest layer, with layer 0 the embeddings."""
    deepest: dict[str, int] = {}
    for side in ("a", "b"):
        for model, layer in pairs.groupby(f"model_{side}")[f"layer_{side}"].max().items():
            deepest[model] = max(deepest.get(model, 0), int(layer))
    return deepest

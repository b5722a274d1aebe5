"""Feature conditioning before a measure: an artefact control, per configured measure (`conditioning:`).

What a conditioning is, torch-free (the configuration check, the senses and the study read it); what each does
to rows: reprsim.metrics.conditioners.

A few units of large magnitude can carry a measure (Timkey & van Schijndel 2021, "rogue dimensions"; Nguyen,
Raghu & Kornblith 2021 on a dominant component of pooled states). Each conditioning transforms one layer's rows
(n × d, the rows the measure is computed on) before the measure sees them; both models of a pair are conditioned
alike, each with its own statistics:

- ``none``: the rows as stored;
- ``standardise``: every unit centred and divided by its standard deviation over the rows (1/n; a constant unit
  is only centred), so no unit outweighs another by scale;
- ``clip``: every value clamped to ±t, where t is the `quantile` (default 0.95) of |values| within each row,
  averaged over the rows: Huh et al. 2024's outlier clamp in their mutual-k-NN code (``remove_outliers``,
  its default, non-exact threshold);
- ``remove_top_pcs``: the rows centred and their top `components` (default 1) principal directions projected out.

A conditioning keeps only the symmetries it commutes with: standardise and clip commute with permuting units (and
clip with scaling all of them alike), not with a rotation; removing principal directions commutes with rotations,
not with general invertible maps. So a conditioned measure can be invariant to no more than that
(:data:`KEEPS`; reprsim.design.senses uses it).
"""

from __future__ import annotations

METHODS = ("none", "standardise", "clip", "remove_top_pcs")
DEFAULTS = {"clip": {"quantile": 0.95}, "remove_top_pcs": {"components": 1}}

# the largest invariance group a conditioned measure can keep (reprsim.design.senses' nested senses)
KEEPS = {"none": "linear", "standardise": "units", "clip": "units", "remove_top_pcs": "geometry"}


def parse(spec) -> dict:
    """A configured conditioning (None, a method name, or {method, ...its setting}) as {method, setting...}, its
    defaults filled in. A ValueError names what is wrong."""
    given = spec
    if spec is None:
        spec = "none"
    if isinstance(spec, str):
        spec = {"method": spec}
    if not isinstance(spec, dict) or spec.get("method") not in METHODS:
        raise ValueError(f"conditioning {given!r}: expected one of {', '.join(METHODS)}, or "
                         "{method: clip, quantile: q} / {method: remove_top_pcs, components: k}")
    method = spec["method"]
    allowed = DEFAULTS.get(method, {})
    unknown = sorted(set(spec) - {"method"} - set(allowed))
    if unknown:
        raise ValueError(f"conditioning {method}: unknown setting {', '.join(unknown)} "
                         f"(it takes {', '.join(allowed) or 'none'})")
    parsed = {"method": method, **allowed, **{k: v for k, v in spec.items() if k != "method"}}
    if method == "clip" and not 0 < float(parsed["quantile"]) <= 1:
        raise ValueError(f"conditioning clip: quantile {parsed['quantile']!r} is not in (0, 1]")
    if method == "remove_top_pcs" and (not isinstance(parsed["components"], int) or parsed["components"] < 1):
        raise ValueError(f"conditioning remove_top_pcs: components {parsed['components']!r} is not a positive integer")
    return parsed


def of(spec: dict) -> dict:
    """The parsed conditioning of a configured measure ({measure, params, conditioning, ...})."""
    return parse(spec.get("conditioning"))


def is_none(spec: dict) -> bool:
    """Whether a configured measure sees the rows as stored."""
    return of(spec)["method"] == "none"


def describe(conditioning: dict) -> str:
    """A short name: 'none', 'standardise', 'clip q=0.95', 'remove_top_pcs k=1'."""
    method = conditioning["method"]
    if method == "clip":
        return f"clip q={conditioning['quantile']:g}"
    if method == "remove_top_pcs":
        return f"remove_top_pcs k={conditioning['components']}"
    return method

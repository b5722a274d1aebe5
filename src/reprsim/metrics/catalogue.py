"""The measure registry as a reader sees it: `reprsim measures` (a text table) and the user guide's measures
reference, docs/measures.md (Markdown, `reprsim measures --markdown`; MkDocs generates the page from it at build
time, docs/hooks/reference.py, so it cannot be stale). The measures of activations first, by family; the measures of
attention maps (family "attention") in a section of their own, with their own invariances. Torch-free."""

from __future__ import annotations

import math

from reprsim.measure_registry import (ATTENTION_INVARIANCES, ATTENTION_MEASURES, FAMILIES, INVARIANCES, LEFT_OUT,
                                     MEASURES, Measure, measured_costs)


def _number(value: float) -> str:
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    if abs(value - math.pi / 2) < 1e-12:
        return "π/2"
    if abs(value - math.log(2)) < 1e-12:
        return "ln 2"
    return f"{value:g}"


def _params(spec: Measure) -> str:
    return ", ".join(f"{k}={v}" for k, v in spec.params.items()) or "–"


def _seconds(name: str, costs: dict) -> str:
    entry = costs.get("measures", {}).get(name)
    return "–" if entry is None else f"{entry['default_seconds']:.1f}"


def ordered() -> list[Measure]:
    """The measures of activations (what reprsim.compare and `similarity.measures` take), by family, then name."""
    return sorted(MEASURES.values(), key=lambda m: (FAMILIES.index(m.family), m.name))


def attention_ordered() -> list[Measure]:
    """The measures of attention maps (`similarity.attention`), head-level first, in the registry's order."""
    return sorted(ATTENTION_MEASURES.values(), key=lambda m: not m.head_level)


def rows(specs: list[Measure] | None = None) -> list[dict]:
    """One dict per measure (default: the activation measures): the columns of the table, an invariance column per
    key of the measures' vocabulary."""
    costs = measured_costs()
    out = []
    for spec in ordered() if specs is None else specs:
        declared = spec.declared()
        out.append({
            "measure": spec.name, "family": spec.family, "kind": spec.kind,
            "range": f"[{_number(spec.range[0])}, {_number(spec.range[1])}]",
            "identical": _number(spec.identical), "symmetric": "yes" if spec.symmetric else "no",
            **{key: ("✔" if key in declared else "✘") for key in spec.vocabulary},
            "rows": "yes" if spec.correspondence else "no", "needs": spec.rows,
            "n/d": "–" if spec.rows_per_dimension is None else f"> {spec.rows_per_dimension:g}", "params": _params(spec),
            "cost": spec.cost, "seconds": _seconds(spec.name, costs), "reference": spec.reference,
        })
    return out


def _aligned(columns: list[str], table_rows: list[dict]) -> list[str]:
    table = [columns] + [[row[c] for c in columns] for row in table_rows]
    widths = [max(len(str(line[i])) for line in table) for i in range(len(columns))]
    return ["  ".join(str(cell).ljust(width) for cell, width in zip(line, widths)).rstrip() for line in table]


def text_table() -> str:
    columns = ["measure", "family", "kind", "range", "symmetric", *INVARIANCES, "rows", "n/d", "needs", "seconds"]
    lines = _aligned(columns, rows())
    legend = ("invariances (of one argument): " + "; ".join(f"{k} {v}" for k, v in INVARIANCES.items())
              + ".\nrows: uses the row correspondence (no: compares each cloud's statistic; its permutation null is "
              "its value). seconds: value + null + interval of one default-shape pair job (benchmarks/measure_costs.py)."
              f"\n{len(MEASURES)} measures; `reprsim measures --markdown` adds params, cost and references.")
    attention = _aligned(["measure", "kind", "range", "symmetric", *ATTENTION_INVARIANCES, "needs"],
                         rows(attention_ordered()))
    attention_legend = (f"{len(ATTENTION_MEASURES)} measures of attention maps (similarity.attention; not "
                        "similarity.measures or reprsim.compare). Invariances of one side's maps: "
                        + "; ".join(f"{k} {v}" for k, v in ATTENTION_INVARIANCES.items()) + ".")
    return "\n".join(lines) + "\n\n" + legend + "\n\n" + "\n".join(attention) + "\n\n" + attention_legend


def _aliases_section() -> list[str]:
    """The alias table (reprsim.measure_aliases) as the reference's section "Names from other libraries"."""
    from reprsim.measure_aliases import table

    def params(value: dict) -> str:
        return ", ".join(f"{k}={v}" for k, v in value.items()) or "–"

    out = ["## Names from other libraries", "",
           "`reprsim.compare` and the configuration's `measures:` section accept these names as well as the registry's "
           "(`reprsim.aliases()` gives the same table). A name means the measure at the parameters it fixes; "
           "`{k}` in a name is a parameter given in it (`mutual_knn-topk=5`). similarity-repository's IDs are also "
           "accepted with their `measure/<repository>/` prefix, and names regardless of case. A *note* says where "
           "that library's own code computes another number under the name.", "",
           "| name | measure | params | whose | note |", "|---|---|---|---|---|"]
    out += [f"| `{row['name']}` | `{row['measure']}` | {params(row['params'])} | {row['source']} | "
            f"{row['note'] or '–'} |" for row in table()]
    return out + [""]


def _attention_section() -> list[str]:
    """The measures of attention maps: their declarations, with the attention invariances as columns."""
    header = ["measure", "configured as", "kind", "range", "identical", "symmetric", *ATTENTION_INVARIANCES, "params"]
    specs = attention_ordered()
    out = ["## attention", "",
           f"{len(specs)} measures of attention maps (Wu et al. 2020; [Numerical conventions](numerics.md) §7a): one "
           "layer's maps over a corpus, one (heads, t, t) array per sentence whose rows are distributions over the "
           "sentence's words. Only `similarity.attention` computes them, for every attention layer pair of its model "
           "pairs (`measure:` takes the name under *configured as*; the registry's name is the label the shipped "
           "configurations give them); `similarity.measures` and `reprsim.compare` do not accept them. The head-level "
           "measures are attnsim: every head of one side against every head of the other, then the mean over one "
           "side's heads of its best match (a->b and b->a rows); the distributed ones are the activation measure on "
           "distributed(A), one row per word pair of every sentence and one column per head. Each declaration is "
           "checked by `tests/unit/test_attention_registry.py`. Invariances are of one side's maps: "
           + "; ".join(f"**{k}** {v}" for k, v in ATTENTION_INVARIANCES.items()) + ". Rows: every one uses the "
           "sentence correspondence (its permutation null re-pairs sentences of equal length).", "",
           "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for spec, row in zip(specs, rows(specs)):
        row = {**row, "configured as": f"`{spec.config_name}`"}
        out.append("| " + " | ".join(f"`{row[c]}`" if c == "measure" else str(row[c]).replace("|", "\\|")
                                     for c in header) + " |")
    out.append("")
    for spec in specs:
        note = f" {spec.notes[0].upper()}{spec.notes[1:]}." if spec.notes else ""
        out.append(f"- `{spec.name}` ({spec.label}): {spec.reference}. Needs {spec.rows}. Cost {spec.cost}.{note}")
    return out + [""]


def markdown() -> str:
    """docs/measures.md, the guide's measures reference (links are relative to docs/)."""
    costs = measured_costs()
    out = ["<!-- generated at build time by `reprsim measures --markdown`; edit src/reprsim/measure_registry.py -->",
           "# Measures reference", "",
           f"reprsim computes {len(MEASURES)} measures of activations, each for every layer pair with its permutation "
           "null (the "
           "chance level), its half-sample interval and its row count ([Numerical conventions](numerics.md)). "
           "[Layer similarity](analyses/similarity.md) says how to use them; this page is generated from the "
           "registry when the guide is built. Each declares the "
           "properties below in `reprsim.measure_registry`; `tests/unit/test_measure_registry.py` checks every "
           "declaration on random inputs: each declared invariance holds, each undeclared one fails on some input, "
           "identical inputs give the stated value, values stay in range, the permutation null of independent "
           "inputs centres on their value.", "",
           "Invariances are of one argument at a time: " + "; ".join(f"**{k}** {v}" for k, v in INVARIANCES.items())
           + ". An asymmetric measure declares those that hold on both sides. *Rows*: whether the measure uses the "
           "correspondence between the two sides' rows (the statistics measures compare a summary of each point "
           "cloud: permuting rows changes nothing, so their permutation null equals the value and they are never "
           "\"beyond chance\"; read them as descriptive differences). *n/d*: the rows per dimension the measure needs "
           "at least (it raises below; – : any n). The measures of attention maps have a section of their own "
           "([attention](#attention)).", ""]
    header = ["measure", "kind", "range", "identical", "symmetric", *INVARIANCES, "rows", "n/d", "needs", "params",
              "seconds"]
    for family in FAMILIES:
        members = [row for row in rows() if row["family"] == family]
        if not members:
            continue
        out += [f"## {family}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        out += ["| " + " | ".join(f"`{row[c]}`" if c == "measure" else str(row[c]).replace("|", "\\|")
                                  for c in header) + " |" for row in members]
        out.append("")
        for spec in (MEASURES[row["measure"]] for row in members):
            note = f" {spec.notes[0].upper()}{spec.notes[1:]}." if spec.notes else ""
            square = " Works on n × n matrices: memory grows with n²." if spec.n_by_n else ""
            out.append(f"- `{spec.name}` ({spec.label}): {spec.reference}. Cost {spec.cost}.{square}{note}")
        out.append("")
    out += _attention_section()
    if costs:
        shape = costs.get("shape", {})
        out += ["## Cost", "",
                f"*seconds*: value, permutation null ({shape.get('permutations')} draws) and half-sample interval "
                f"({shape.get('resamples')} replicates) of one pair job at the default's shape (n = {shape.get('n')} "
                f"rows, d = {shape.get('d')}, {shape.get('layers')} × {shape.get('layers')} layers), one CPU thread, "
                f"measured by `benchmarks/measure_costs.py` ({costs.get('machine', 'this machine')}). "
                "[What the measures cost](analyses/similarity.md#what-the-measures-cost) extrapolates them to the "
                "MultiBERTs study's shape.", ""]
    out += _aliases_section()
    out += ["## Left out", ""]
    out += [f"- **{name}**: {why}." for name, why in LEFT_OUT.items()]
    return "\n".join(out) + "\n"

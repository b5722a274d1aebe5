"""The measure registry as a reader sees it: `reprsim measures` (a text table) and the user guide's measures
reference, docs/measures.md (Markdown, `reprsim measures --markdown`; MkDocs generates the page from it at build
time, docs/hooks/reference.py, so it cannot be stale). Torch-free."""

from __future__ import annotations

import math

from reprsim.measure_registry import FAMILIES, INVARIANCES, LEFT_OUT, MEASURES, Measure, measured_costs


def _number(value: float) -> str:
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    if abs(value - math.pi / 2) < 1e-12:
        return "π/2"
    return f"{value:g}"


def _params(spec: Measure) -> str:
    return ", ".join(f"{k}={v}" for k, v in spec.params.items()) or "–"


def _seconds(name: str, costs: dict) -> str:
    entry = costs.get("measures", {}).get(name)
    return "–" if entry is None else f"{entry['default_seconds']:.1f}"


def ordered() -> list[Measure]:
    return sorted(MEASURES.values(), key=lambda m: (FAMILIES.index(m.family), m.name))


def rows() -> list[dict]:
    """One dict per measure: the columns of the table."""
    costs = measured_costs()
    out = []
    for spec in ordered():
        declared = spec.declared()
        out.append({
            "measure": spec.name, "family": spec.family, "kind": spec.kind,
            "range": f"[{_number(spec.range[0])}, {_number(spec.range[1])}]",
            "identical": _number(spec.identical), "symmetric": "yes" if spec.symmetric else "no",
            **{key: ("✔" if key in declared else "✘") for key in INVARIANCES},
            "rows": "yes" if spec.correspondence else "no", "needs": spec.rows,
            "n/d": "–" if spec.rows_per_dimension is None else f"> {spec.rows_per_dimension:g}", "params": _params(spec),
            "cost": spec.cost, "seconds": _seconds(spec.name, costs), "reference": spec.reference,
        })
    return out


def text_table() -> str:
    columns = ["measure", "family", "kind", "range", "symmetric", *INVARIANCES, "rows", "n/d", "needs", "seconds"]
    table = [columns] + [[row[c] for c in columns] for row in rows()]
    widths = [max(len(str(line[i])) for line in table) for i in range(len(columns))]
    lines = ["  ".join(str(cell).ljust(width) for cell, width in zip(line, widths)).rstrip() for line in table]
    legend = ("invariances (of one argument): " + "; ".join(f"{k} {v}" for k, v in INVARIANCES.items())
              + ".\nrows: uses the row correspondence (no: compares each cloud's statistic; its permutation null is "
              "its value). seconds: value + null + interval of one default-shape pair job (benchmarks/measure_costs.py)."
              f"\n{len(MEASURES)} measures; `reprsim measures --markdown` adds params, cost and references.")
    return "\n".join(lines) + "\n\n" + legend


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


def markdown() -> str:
    """docs/measures.md, the guide's measures reference (links are relative to docs/)."""
    costs = measured_costs()
    out = ["<!-- generated at build time by `reprsim measures --markdown`; edit src/reprsim/measure_registry.py -->",
           "# Measures reference", "",
           f"reprsim computes {len(MEASURES)} measures, each for every layer pair with its permutation null (the "
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
           "at least (it raises below; – : any n).", ""]
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

"""The user guide's generated reference pages: the configuration reference (every key of schema.yaml with its
type, default and description) and the measures reference (the measure registry, :mod:`reprsim.metrics.catalogue`).

MkDocs makes both at build time (docs/hooks/reference.py), so they cannot drift from the schema or the registry;
tests/unit/test_docs_reference.py checks that every schema key and every registered measure is on its page.
Torch-free; nothing in the workflow imports it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from reprsim.schema import SCHEMA_PATH, load_schema

CONFIGURATION_PAGE = "configuration.md"
MEASURES_PAGE = "measures.md"

# additionalProperties keys are written as a placeholder: the user's own name (datasets, models) or label
LABELLED = {"measures", "aligners"}


@dataclass
class Key:
    """One configuration key: its dotted path (NAME / LABEL where the user picks the key), what it holds, its
    default (None: none), its description, whether it is required, and the `source:`/`measure:`/`aligner:`
    values under which it exists ("" = always). `pointers`: the schema nodes (JSON pointers) that declare it."""

    path: str
    type: str
    default: str | None
    description: str
    required: bool = False
    when: list[str] = field(default_factory=list)
    pointers: list[str] = field(default_factory=list)

    def signature(self) -> tuple:
        return self.path, self.type, self.default, self.description, self.required


@dataclass
class Variant:
    """A conditional branch's own description, e.g. `datasets.NAME` with `source: hf`."""

    path: str
    when: str
    description: str


def _words(text: str | None) -> str:
    return re.sub(r"\s+", " ", text or "").strip()


def _flow(value: Any) -> str:
    """A default as YAML flow style, the way a config file would write it."""
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return yaml.safe_dump(value, default_flow_style=True, width=math.inf, allow_unicode=True, sort_keys=False).strip() \
        .removesuffix("\n...").removesuffix("...").strip()


class _Walker:
    def __init__(self, schema: dict):
        self.schema = schema
        self.keys: dict[tuple, Key] = {}        # signature -> key (merged over conditions)
        self.by_path: dict[str, list[Key]] = {}
        self.variants: list[Variant] = []
        self.conditions: dict[str, list[str]] = {}   # path -> the conditions of its branches (source: hf, ...)

    # -- schema helpers ------------------------------------------------------------------------------------
    def resolve(self, node: dict, pointer: str) -> tuple[dict, str]:
        """A node with its $ref followed (the node's own keywords win over the target's); and the pointer whose
        `properties` it has."""
        seen = 0
        while isinstance(node, dict) and "$ref" in node:
            ref = node["$ref"]
            if not ref.startswith("#/"):
                raise ValueError(f"schema.yaml: only local $refs are supported, found {ref!r}")
            target: Any = self.schema
            for part in ref[2:].split("/"):
                target = target[part]
            own = {k: v for k, v in node.items() if k != "$ref"}
            node, pointer = {**target, **own}, ref[1:]
            seen += 1
            if seen > 20:
                raise ValueError(f"schema.yaml: $ref cycle at {ref!r}")
        return node, pointer

    def type_of(self, node: dict, pointer: str = "") -> str:
        node, _ = self.resolve(node, pointer)
        if "const" in node:
            return f"`{_flow(node['const'])}`"
        if "enum" in node:
            return "one of " + ", ".join(f"`{_flow(v)}`" for v in node["enum"])
        if "anyOf" in node or "oneOf" in node:
            return " or ".join(self.type_of(option) for option in node.get("anyOf", node.get("oneOf")))
        types = node.get("type")
        if types is None:
            return "any"
        types = [types] if isinstance(types, str) else list(types)
        words = []
        for kind in types:
            if kind == "array":
                items = node.get("items")
                words.append("list" + (f" of {self.type_of(items)}" if isinstance(items, dict) and items else ""))
            elif kind == "object":
                words.append("mapping")
            elif kind == "string" and node.get("pattern") and "number" in types:
                words.append("`" + node["pattern"].strip("^$") + "`")   # shortcut_rate: a number or "majority"
            else:
                words.append({"integer": "integer", "number": "number", "string": "string", "boolean": "boolean",
                              "null": "`null`"}.get(kind, kind))
        text = " or ".join(words)
        bounds = []
        for keyword, sign in (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"), ("exclusiveMaximum", "<")):
            if keyword in node:
                bounds.append(f"{sign} {_flow(node[keyword])}")
        if bounds:
            text += " (" + ", ".join(bounds) + ")"
        if "minItems" in node and "array" in types:
            text += f", at least {node['minItems']} item{'s' if node['minItems'] != 1 else ''}"
        if "pattern" in node and "string" in types and "number" not in types:
            text += f" matching `{node['pattern']}`"
        return text

    @staticmethod
    def condition(test: dict) -> str | None:
        """`source: hf` for an if that tests one property's const; None for other tests (a type)."""
        props = test.get("properties", {})
        consts = [(k, v["const"]) for k, v in props.items() if isinstance(v, dict) and "const" in v]
        if len(consts) == 1:
            key, value = consts[0]
            return f"{key}: {value}"
        return None

    # -- the walk --------------------------------------------------------------------------------------------
    def add(self, key: Key) -> None:
        signature = key.signature()
        if signature in self.keys:
            known = self.keys[signature]
            known.when = known.when + [w for w in key.when if w not in known.when]
            known.pointers += [p for p in key.pointers if p not in known.pointers]
            return
        self.keys[signature] = key
        self.by_path.setdefault(key.path, []).append(key)

    def walk(self, node: dict, pointer: str, path: str, when: str) -> None:
        node, pointer = self.resolve(node, pointer)
        required = set(node.get("required", []))
        for name, sub in node.get("properties", {}).items():
            sub_pointer = f"{pointer}/properties/{name}"
            sub_path = f"{path}.{name}" if path else name
            if isinstance(sub, dict) and not sub:
                # `source: {}`: a branch allows the key its parent declares; nothing new to say
                for known in self.by_path.get(sub_path, []):
                    known.pointers.append(sub_pointer)
                continue
            refinement = bool(when) and set(sub) == {"$ref"} and any(
                not known.when for known in self.by_path.get(sub_path, []))
            if refinement:
                # a conditional branch narrows a key declared unconditionally (measures.LABEL.params per measure)
                for known in self.by_path[sub_path]:
                    known.pointers.append(sub_pointer)
            else:
                resolved, _ = self.resolve(sub, sub_pointer)
                self.add(Key(path=sub_path, type=self.type_of(sub), default=_flow(resolved["default"])
                             if "default" in resolved else None, description=_words(resolved.get("description")),
                             required=name in required, when=[when] if when else [], pointers=[sub_pointer]))
            self.walk(sub, sub_pointer, sub_path, when)
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            placeholder = "LABEL" if path.rsplit(".", 1)[-1] in LABELLED else "NAME"
            names = node.get("propertyNames")
            named = _words(self.resolve(names, "")[0].get("description")) if isinstance(names, dict) else ""
            resolved, _ = self.resolve(extra, f"{pointer}/additionalProperties")
            sub_path = f"{path}.{placeholder}"
            description = (f"{placeholder}: {named}" if named else _words(resolved.get("description"))
                           or f"{placeholder}: a {placeholder.lower()} of your choice")
            self.add(Key(path=sub_path, type=self.type_of(extra), default=None, description=description,
                         when=[when] if when else []))
            self.walk(extra, f"{pointer}/additionalProperties", sub_path, when)
        items = node.get("items")
        if isinstance(items, dict) and items.get("properties"):
            self.walk(items, f"{pointer}/items", f"{path}[]", when)
        for index, option in enumerate(node.get("allOf", [])):
            self.branch(option, f"{pointer}/allOf/{index}", path, when)
        for alternatives in ("anyOf", "oneOf"):  # a key given as a name or as a mapping: the mapping's keys
            for index, option in enumerate(node.get(alternatives, [])):
                if isinstance(option, dict) and option.get("properties"):
                    self.walk(option, f"{pointer}/{alternatives}/{index}", path, when)
        if "if" in node and "then" in node:
            self.branch(node, pointer, path, when)

    def branch(self, option: dict, pointer: str, path: str, when: str) -> None:
        if "then" not in option:
            self.walk(option, pointer, path, when)
            return
        inner = self.condition(option.get("if", {})) or when
        if inner != when and inner not in self.conditions.setdefault(path, []):
            self.conditions[path].append(inner)
        then, then_pointer = self.resolve(option["then"], f"{pointer}/then")
        if then.get("description") and inner != when:
            self.variants.append(Variant(path=path, when=inner, description=_words(then["description"])))
        self.walk(option["then"], f"{pointer}/then", path, inner)


def _walked(schema_path: str | Path) -> _Walker:
    walker = _Walker(load_schema(schema_path))
    walker.walk(walker.schema, "", "", "")
    # a key every branch of its mapping declares alike exists whatever the branch: no condition to show
    for key in walker.keys.values():
        for scope, conditions in walker.conditions.items():
            if key.path.startswith(scope + ".") and sorted(key.when) == sorted(conditions):
                key.when = []
    return walker


def config_keys(schema_path: str | Path = SCHEMA_PATH) -> list[Key]:
    """Every key of the configuration schema, recursively (through $refs and each source's, measure's and
    aligner's branch), in the schema's order; a key that several branches declare alike is one Key whose
    `when` lists the branches (empty: every branch, or no branch at all)."""
    return list(_walked(schema_path).keys.values())


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;") if text else "–"


def _code_cell(text: str) -> str:
    # inside backticks Markdown keeps < and > as they are; a pipe still ends the cell
    return f"`{text.replace('|', '&#124;')}`" if "`" not in text else _cell(text)


def _when(key: Key) -> str:
    if not key.when:
        return ""
    names = [w.split(": ", 1) for w in key.when]
    if len({n[0] for n in names}) == 1:
        return f"*with `{names[0][0]}: {', '.join(n[1] for n in names)}`* "
    return "*with " + "; ".join(f"`{w}`" for w in key.when) + "* "


SECTION_INTRO = {
    "": "Keys at the top of the file.",
}


def configuration_reference(schema_path: str | Path = SCHEMA_PATH) -> str:
    """The configuration reference page (Markdown): one table per top-level section."""
    schema = load_schema(schema_path)
    walker = _walked(schema_path)
    keys, variants = list(walker.keys.values()), walker.variants
    sections: dict[str, list[Key]] = {}
    for key in keys:
        top = key.path.split(".", 1)[0].split("[", 1)[0]
        is_scalar_top = "." not in key.path and not schema["properties"][top].get("properties") \
            and not isinstance(schema["properties"][top].get("additionalProperties"), dict)
        sections.setdefault("" if is_scalar_top else top, []).append(key)
    out = [
        "<!-- generated at build time from src/reprsim/schema.yaml (reprsim.guide.docs_reference, docs/hooks/reference.py)"
        " -->",
        "# Configuration reference",
        "",
        f"Every key of a reprsim configuration ({len(keys)} in all), generated from the schema that validates it, "
        "`src/reprsim/schema.yaml`, when this guide is built. Unknown keys are errors, so a typo fails before any "
        "job runs; cross-references (a fine-tuned model's base and dataset, a borrowed tokenizer, the models a "
        "pair names) are checked too.",
        "",
        "How to read it: a key path is dotted from the top of the file; `NAME` stands for a name you choose "
        "(a dataset or model: letters, digits, `-`, `_`, `.`; `__` is reserved) and `LABEL` for a measure's or "
        "aligner's label. *with `source: hf`* marks a key that exists only for that kind of dataset or model "
        "(or only for that measure or aligner). *Default* is what the schema fills in when the key is left out "
        "(– : nothing is filled in; the library's default, where there is one, is in the description). "
        "Check a file without running anything: `reprsim validate my.yaml`. "
        "[Your own experiment](experiment.md) shows these keys in use.",
        "",
    ]
    # a key's rows stay together and under their parent: sort by the first appearance of each prefix of the path
    first: dict[str, int] = {}
    for index, key in enumerate(keys):
        parts = key.path.split(".")
        for depth in range(1, len(parts) + 1):
            first.setdefault(".".join(parts[:depth]), index)
    for members in sections.values():
        members.sort(key=lambda k: [first[".".join(k.path.split(".")[:d])] for d in range(1, k.path.count(".") + 2)])
    order = [""] + [k for k in schema["properties"] if k in sections and k != ""]
    for section in order:
        members = sections.get(section)
        if not members:
            continue
        title = "Top level" if section == "" else f"`{section}`"
        out += [f"## {title}", ""]
        intro = _words(schema["properties"][section].get("description")) if section else ""
        if intro:
            out += [intro[0].upper() + intro[1:] + ("" if intro.endswith(".") else "."), ""]
        elif not section:
            out += [SECTION_INTRO[""], ""]
        mine = [v for v in variants if v.path.split(".", 1)[0] == section]
        if mine:
            out += [f"- `{v.path}` with `{v.when}`: {v.description}" for v in mine] + [""]
        out += ['<div class="keys" markdown>', "", "| key | type | default | description |", "|---|---|---|---|"]
        for key in members:
            default = "required" if key.required else ("–" if key.default is None else _code_cell(key.default))
            described = "the section (above)" if key.path == section and intro else key.description
            out.append(f"| `{key.path}` | {_cell(key.type) if '`' not in key.type else key.type.replace('|', '&#124;')} "
                       f"| {default} | {_when(key)}{_cell(described) if described else ''} |")
        out += ["", "</div>", ""]
    return "\n".join(out)


def _keep_names_whole(markdown: str) -> str:
    """Each table inside a `keys` block, whose first column (a name) the guide's stylesheet never breaks."""
    out, inside = [], False
    for line in markdown.split("\n"):
        table = line.startswith("|")
        if table and not inside:
            out += ['<div class="keys" markdown>', ""]
        elif inside and not table:
            out += ["", "</div>"]
        inside = table
        out.append(line)
    return "\n".join(out + (["", "</div>"] if inside else []))


def measures_reference() -> str:
    """The measures reference page (Markdown): `reprsim measures --markdown`."""
    from reprsim.metrics import catalogue

    return _keep_names_whole(catalogue.markdown())


def generated_pages() -> dict[str, str]:
    """The guide's generated pages by their path under docs/."""
    return {CONFIGURATION_PAGE: configuration_reference(), MEASURES_PAGE: measures_reference()}

"""The user guide's generated reference pages (reprsim.guide.docs_reference; MkDocs builds them with
docs/hooks/reference.py): every key of schema.yaml is on the configuration reference with a type and a
description, every registered measure is on the measures reference; and the README stays a front page."""

from __future__ import annotations

import re
from pathlib import Path

from reprsim.guide.docs_reference import (CONFIGURATION_PAGE, MEASURES_PAGE, config_keys, configuration_reference,
                                    generated_pages, measures_reference)
from reprsim.measure_registry import FAMILIES, MEASURES
from reprsim.schema import SCHEMA_PATH, load_yaml

ROOT = Path(__file__).resolve().parents[2]


def declared_keys(schema: dict) -> set[str]:
    """Every key the schema declares, counted on the schema file itself: the JSON pointer of each entry of each
    `properties` mapping, at any depth, except the tests of `if:` (conditions, not keys), the placeholders `{}`
    that let a branch accept a key its parent declares, and definitions that no $ref reaches (YAML anchors copy
    them where they are used)."""
    refs: set[str] = set()
    keys: set[str] = set()

    def walk(node, pointer: str) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("$ref"), str):
                refs.add(node["$ref"].removeprefix("#"))
            for name, value in node.items():
                if name == "if":
                    continue
                if name == "properties" and isinstance(value, dict):
                    keys.update(f"{pointer}/properties/{key}" for key, sub in value.items() if sub != {})
                walk(value, f"{pointer}/{name}")
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, f"{pointer}/{index}")

    walk(schema, "")
    return {key for key in keys
            if not key.startswith("/$defs/") or any(key.startswith(ref + "/") for ref in refs)}


def test_every_schema_key_is_in_the_configuration_reference():
    declared = declared_keys(load_yaml(SCHEMA_PATH))
    keys = config_keys()
    reached = {pointer for key in keys for pointer in key.pointers}
    assert len(declared) > 250, len(declared)   # the count, so that a walk that finds nothing cannot pass
    assert sorted(declared - reached) == [], "schema keys missing from the configuration reference"
    page = configuration_reference()
    assert f"({len(keys)} in all)" in page
    missing = [key.path for key in keys if f"| `{key.path}` |" not in page]
    assert missing == []


def test_every_key_has_a_type_and_a_description():
    """The reference is only as good as the schema's descriptions: a new key needs one."""
    keys = config_keys()
    assert [key.path for key in keys if not key.type] == []
    assert [key.path for key in keys if not key.description] == []


def test_conditional_keys_name_their_branch():
    by_path = {}
    for key in config_keys():
        by_path.setdefault(key.path, []).append(key)
    (hf_id,) = by_path["datasets.NAME.id"]
    assert hf_id.when == ["source: hf"] and hf_id.required
    (estimator,) = by_path["measures.LABEL.params.estimator"]
    assert estimator.when == ["measure: cka"]
    # declared alike under every source: no condition
    (seed,) = by_path["datasets.NAME.seed"]
    assert seed.when == [] and seed.default == "0"
    (batch,) = by_path["extraction.batch_size"]
    assert batch.type == "integer (≥ 1)" and batch.default == "32"


def test_every_registered_measure_is_in_the_measures_reference():
    page = measures_reference()
    assert [name for name in MEASURES if f"| `{name}` |" not in page] == []
    assert [family for family in FAMILIES
            if any(m.family == family for m in MEASURES.values()) and f"## {family}\n" not in page] == []


def test_generated_pages_are_not_files_in_docs():
    """They are made when the guide is built (the hook refuses a file of the same name), so they cannot be stale."""
    assert set(generated_pages()) == {CONFIGURATION_PAGE, MEASURES_PAGE}
    assert [page for page in generated_pages() if (ROOT / "docs" / page).exists()] == []


def test_the_readme_is_a_front_page_that_links_into_the_guide():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    assert "./bootstrap.sh test" in readme and "./bootstrap.sh run" in readme
    assert "./bootstrap.sh test" in (ROOT / ".ci" / "run").read_text()
    # the guide's home page is the README (docs/hooks/reference.py): its relative links must point into docs/
    targets = re.findall(r"\]\((?![a-z][a-z0-9+.-]*:|#)([^)\s#]+)", readme)
    assert targets and [t for t in targets if not t.startswith("docs/") or not (ROOT / t).is_file()] == []


def test_ci_builds_the_guide_strictly():
    assert "mkdocs\" build --strict" in (ROOT / ".ci" / "run").read_text()

"""The schema's problems in words: the key, what was found and what is allowed (for an unknown key the closest
allowed name)."""

from __future__ import annotations

import difflib
from collections.abc import Iterator

import jsonschema
from jsonschema import validators

REMOTE_CODE = ("reprsim never executes remote code (a model's or dataset's own Python files from the hub); "
               "use an architecture transformers ships: a hub or local model of that architecture, or source: init")
BOUNDS = {"minimum": "≥", "maximum": "≤", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}


def _key(path) -> str:
    parts = [str(p) for p in path]
    return ".".join(parts) if parts else "(top level)"


def _unknown_key(key: str, name: str, allowed) -> str:
    """An unknown `name` at dotted path `key`, with the closest allowed name and the allowed ones."""
    if name == "trust_remote_code":
        return f"key '{key}' is refused: {REMOTE_CODE}"
    close = difflib.get_close_matches(str(name), [str(a) for a in allowed], n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"key '{key}' is unknown{hint}; allowed keys there: {', '.join(map(str, allowed)) or 'none'}"


def _text_number_hint(value) -> str:
    """A hint when YAML read a number as text: quoted, or 1e-3 (an exponent without a decimal point)."""
    if not isinstance(value, str):
        return ""
    try:
        float(value)
    except ValueError:
        return ""
    return " (YAML read it as text: drop any quotes, and give an exponent a decimal point, 1.0e-3 not 1e-3)"


def _explain(error: jsonschema.ValidationError) -> str:
    """One sentence per schema violation: the key, what was found, what is allowed."""
    key = _key(error.absolute_path)
    if error.validator == "enum":
        allowed = ", ".join(repr(v) for v in error.validator_value)
        return f"key '{key}' is {error.instance!r}; allowed values: {allowed}"
    if error.validator == "type":
        expected = error.validator_value
        expected = " or ".join(expected) if isinstance(expected, list) else expected
        return (
            f"key '{key}' must be of type {expected}; got {error.instance!r} "
            f"({type(error.instance).__name__}){_text_number_hint(error.instance)}"
        )
    if error.validator == "required":
        return f"{key}: {error.message}"
    if error.validator == "pattern" and error.absolute_path == error.relative_path:
        return f"key '{key}': {error.message}"
    if error.validator in BOUNDS:
        return f"key '{key}' is {error.instance!r}; must be {BOUNDS[error.validator]} {error.validator_value}"
    return f"key '{key}': {error.message}"


def _schema_errors(config: dict, schema: dict) -> Iterator[str]:
    validator_class = validators.validator_for(schema)
    validator = validator_class(schema)
    for error in sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path))):
        # if/then branches report through their leaves; the container error adds nothing
        if error.validator in {"allOf", "if"}:
            continue
        if error.validator == "additionalProperties":
            allowed = sorted(error.schema.get("properties", {}))
            for extra in sorted(set(error.instance) - set(allowed), key=str):
                yield _unknown_key(_key([*error.absolute_path, extra]), extra, allowed)
            continue
        if error.validator == "propertyNames":
            yield (
                f"name {error.instance!r} under '{_key(error.absolute_path)}' is not allowed: "
                "use letters, digits, '-', '_' and '.', starting with a letter or digit"
            )
            continue
        yield _explain(error)

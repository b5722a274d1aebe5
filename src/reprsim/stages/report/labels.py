"""How the report's figures and pages name things: one place for both, free of matplotlib (the page job draws
nothing, and importing the figures module would cost it half a second of start-up)."""

from __future__ import annotations


def representation_text(representation: str) -> str:
    """How a figure or page names a representation: 'mean pooling', 'word level', 'attention'."""
    return {"word": "word level", "attention": "attention", "token": "token level"}.get(
        representation, f"{representation} pooling")


# The universality study's verdicts (reprsim.stages.universality.shares.VERDICTS; the report imports no stage), each
# with its colour on the factor × depth figure and the page: Paul Tol's "light" scheme, distinct under the common
# colour-vision deficiencies and light enough for black text on every cell. Undefined cells stay white (hatched on
# the figure).
UNIVERSALITY_VERDICTS = {
    "as similar as seeds": "#44BB99",
    "more similar than seeds": "#77AADD",
    "less similar": "#EEDD88",
    "no more similar than the floor": "#EE8866",
    "less similar than the floor": "#CC6677",
    "inconclusive": "#DDDDDD",
    "undefined": "#FFFFFF",
}
# what each verdict says of u's interval against the margin δ (shares.verdict), for the legends
UNIVERSALITY_VERDICT_RULES = {
    "as similar as seeds": "interval within [1 − δ, 1 + δ]",
    "more similar than seeds": "interval above 1 + δ",
    "less similar": "interval within (δ, 1 − δ)",
    "no more similar than the floor": "interval within [−δ, δ]",
    "less similar than the floor": "interval below −δ",
    "inconclusive": "interval crosses δ, 1 − δ or 1 + δ",
    "undefined": "seeds not clearly above the floor",
}

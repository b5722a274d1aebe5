"""How the report's figures and pages name things: one place for both, free of matplotlib (the page job draws
nothing, and importing the figures module would cost it half a second of start-up)."""

from __future__ import annotations

from reprsim.tables.universality import VERDICTS


def representation_text(representation: str) -> str:
    """How a figure or page names a representation: 'mean pooling', 'word level', 'attention'."""
    return {"word": "word level", "attention": "attention", "token": "token level"}.get(
        representation, f"{representation} pooling")


# The universality study's verdicts (reprsim.tables.universality.VERDICTS), each with its colour on the factor × depth
# figure and the page: Paul Tol's "light" scheme, distinct under the common colour-vision deficiencies and light
# enough for black text on every cell. Undefined cells stay white (hatched on the figure).
UNIVERSALITY_VERDICTS = dict(zip(VERDICTS, ("#44BB99", "#77AADD", "#EEDD88", "#EE8866", "#CC6677", "#DDDDDD",
                                            "#FFFFFF")))

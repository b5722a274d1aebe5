"""How the report's figures and pages name things: one place for both, free of matplotlib (the page job draws
nothing, and importing the figures module would cost it half a second of start-up)."""

from __future__ import annotations


def representation_text(representation: str) -> str:
    """How a figure or page names a representation: 'mean pooling', 'word level', 'attention'."""
    return {"word": "word level", "attention": "attention", "token": "token level"}.get(
        representation, f"{representation} pooling")

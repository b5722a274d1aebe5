"""Stage models: materialise models (hub, local directory, installed package, random init)."""

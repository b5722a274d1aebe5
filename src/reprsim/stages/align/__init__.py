"""Stage align: aligners between two models' layers, synthetic recovery, layer injection."""

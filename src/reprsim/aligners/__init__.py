"""Aligners: maps from one representation space onto another (docs/numerics.md, Aligners; Ren et al. 2023).

`make(name, **params)` builds one of ALIGNERS (linear, cca, svcca, pwcca, inn, mlp), whose
parameters and defaults are PARAMETERS[name]; each has `fit(X, Y, X_val, Y_val)`,
`transform(X)`, `score(X, Y)` (= `relative_error(Y, transform(X))`), `meta` after fitting, and
`inverse(Y)` unless it is the non-bijective mlp. `align_pair` and `synthetic_recovery` fit
them on train rows, select on validation rows and score held-out rows.
"""

from reprsim.aligners.evaluate import align_pair
from reprsim.aligners.linear import LinearAligner, mean_l2, relative_error
from reprsim.aligners.registry import ALIGNERS, PARAMETERS, make
from reprsim.aligners.synthetic import random_coupling_map, synthetic_recovery

__all__ = ["ALIGNERS", "PARAMETERS", "LinearAligner", "align_pair", "make", "mean_l2",
           "random_coupling_map", "relative_error", "synthetic_recovery"]

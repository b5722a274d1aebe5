"""Stage findings: the seed papers' claims tested on whatever models and tables a configuration has.

Each claim is a small function from the tables of the other stages to one row per dataset and
representation: a statistic, its interval and a verdict that comes only from where the interval
lies against the claim's reference (docs/numerics.md, Findings). A claim whose models or tables
the configuration does not produce gets the verdict "not applicable" and says why.
"""

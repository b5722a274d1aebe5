"""The universality study's vocabulary (results/tables/universality*.parquet): its depth groups, its verdicts with the
rule each states, and how its factors are named. The study (reprsim.stages.universality) writes these names, the
report and the guide's recorded run read them."""

from __future__ import annotations

# the `depth` column's groups: the lower, middle and upper third of the reference's layers by relative depth l/L
# (the embeddings, layer 0, in the lower third); every other depth row is one layer ("layer l")
THIRDS = ("lower third", "middle third", "upper third")

# verdict -> what it says of u's interval against the margin δ (reprsim.stages.universality.shares.verdict)
VERDICT_RULES = {
    "as similar as seeds": "interval within [1 − δ, 1 + δ]",
    "more similar than seeds": "interval above 1 + δ",
    "less similar": "interval within (δ, 1 − δ)",
    "no more similar than the floor": "interval within [−δ, δ]",
    "less similar than the floor": "interval below −δ",
    "inconclusive": "interval crosses δ, 1 − δ or 1 + δ",
    "undefined": "seeds not clearly above the floor",
}
VERDICTS = tuple(VERDICT_RULES)

# a factor as a figure or a table names it ("training data: wikitext"); a factor missing here is its own name
FACTOR_LABELS = {"training_time": "training time", "data": "training data", "placebo": "seed placebo",
                 "dimension": "dimension placebo"}
# a factor as the statement's sentences name what a level changes ("Changing training data to ...")
FACTOR_PHRASES = {"width": "width", "depth": "depth", "data": "training data", "objective": "objective",
                  "training_time": "training time", "placebo": "nothing (the seed placebo)",
                  "dimension": "dimension alone (the dimension placebo)"}

"""Stage stitch: model stitching (Bansal et al. 2021; Brown et al. 2023), one job per bottom -> top model pair."""

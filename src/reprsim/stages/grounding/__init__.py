"""Stage grounding: which measure to believe (Ding et al. 2021; ReSi): each measure scored on tests of sensitivity and specificity."""

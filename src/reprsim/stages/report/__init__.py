"""Stage report: figures and the HTML report, from the tidy tables the other stages write."""

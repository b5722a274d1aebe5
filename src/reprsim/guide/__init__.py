"""The user guide's machinery: the generated reference pages and the recorded run whose figures the guide quotes."""

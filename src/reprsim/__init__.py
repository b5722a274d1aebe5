"""reprsim: in what sense do differently trained language models learn similar representations?

The public face from Python is two functions, loaded on first use so that ``import reprsim`` imports neither torch
nor pandas:

    reprsim.compare(X, Y, measures=..., permutations=..., resamples=..., seed=..., device=...)
        every measure between two matrices or layer stacks, each value with its chance level, p, interval and n
        (the workflow's pair table, computed by the same engine)
    reprsim.measures()
        the registry as a table: every measure with its declared properties
    reprsim.aliases()
        the names reprsim also accepts for them (the configurations' labels, similarity-repository's IDs, peers')

Everything else (stages, metrics, io, ...) is the workflow's and may change between versions; docs/architecture.md
says what is public.
"""

__version__ = "0.1.0"
__all__ = ["__version__", "activations", "aliases", "best_matches", "compare", "compare_many", "measures", "plot_layers",
           "plot_models"]
# a function's module is named apart from it: importing reprsim.<module> sets the package attribute of that name
_PUBLIC = {"activations": "reprsim.model_activations", "aliases": "reprsim.python_api", "best_matches": "reprsim.python_api", "compare": "reprsim.python_api",
           "compare_many": "reprsim.python_api", "measures": "reprsim.python_api", "plot_layers": "reprsim.plots",
           "plot_models": "reprsim.plots"}


def __getattr__(name: str):
    if name in _PUBLIC:
        # importlib, not an import statement: reprsim.workflow.codedeps follows import statements into every rule's
        # code inputs, and no rule runs the public API (editing it must rerun nothing)
        import importlib

        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'reprsim' has no attribute {name!r}")

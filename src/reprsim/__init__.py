"""reprsim: in what sense do differently trained language models learn similar representations?

The doors from Python, loaded on first use so that ``import reprsim`` imports neither torch nor pandas:

    reprsim.compare(X, Y, measures=..., permutations=..., resamples=..., seed=..., device=...)
        every measure between two matrices or layer stacks, each value with its chance level, p, interval and n
        (the workflow's pair table, computed by the same engine)
    reprsim.compare_many(models, measures, ...)     every pair of many models, each model's terms prepared once
    reprsim.best_matches(table)                      each layer's best match, corrected for the choice
    reprsim.activations(model, inputs, layers, ...)  any PyTorch module's activations by name, pooled
    reprsim.plot_layers(table, ...), reprsim.plot_models(table, ...)   the report's similarity figures
    reprsim.measures(), reprsim.aliases()            the measure registry as a table, and the names it also accepts

The package root holds the doors (python_api, cli), the configuration (config, schema) and the measure registry
(measure_registry, measure_aliases); everything else lives in packages named for what they hold: metrics (the
measures and their engine), inference (intervals, chance levels, best matches), aligners, nets (models and
activations), design (a study's design as configured), tables (what stages exchange), text, io, plotting, stages
(one package per DAG stage), workflow (the rules' helpers) and guide (the user guide's machinery).
docs/architecture.md says what is public and where a newcomer starts.
"""

__version__ = "0.1.0"
__all__ = ["__version__", "activations", "aliases", "best_matches", "compare", "compare_many", "measures", "plot_layers",
           "plot_models"]
# a function's module is named apart from it: importing reprsim.<module> sets the package attribute of that name
_PUBLIC = {"activations": "reprsim.nets.activations", "aliases": "reprsim.python_api",
           "best_matches": "reprsim.python_api", "compare": "reprsim.python_api", "compare_many": "reprsim.python_api",
           "measures": "reprsim.python_api", "plot_layers": "reprsim.plotting.plots",
           "plot_models": "reprsim.plotting.plots"}


def __getattr__(name: str):
    if name in _PUBLIC:
        # importlib, not an import statement: reprsim.workflow.codedeps follows import statements into every rule's
        # code inputs, and no rule runs the public API (editing it must rerun nothing)
        import importlib

        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'reprsim' has no attribute {name!r}")

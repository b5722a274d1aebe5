"""Static code dependencies of workflow scripts: what a rule declares as its code input."""

from conftest import REPO
from reprsim.codedeps import code_dependencies


def deps(script):
    return {str(p).replace(str(REPO) + "/", "") for p in code_dependencies(REPO / "scripts" / f"{script}.py", REPO / "src")}


def test_transitive_imports_and_package_inits():
    found = deps("compare_pair")
    assert {"scripts/compare_pair.py", "src/reprsim/compare.py", "src/reprsim/metrics/cka.py",
            "src/reprsim/align/linear.py", "src/reprsim/store.py", "src/reprsim/__init__.py",
            "src/reprsim/metrics/__init__.py", "src/reprsim/align/__init__.py"} <= found


def test_unrelated_modules_are_not_dependencies():
    # comparing stores needs neither the model code nor the extraction code
    assert not {"src/reprsim/models.py", "src/reprsim/extract.py", "src/reprsim/finetune.py"} & deps("compare_pair")
    figures = deps("plot_figures")
    assert {"src/reprsim/plots.py", "src/reprsim/aggregate.py", "src/reprsim/metrics/distance.py"} <= figures
    assert not {"src/reprsim/models.py", "src/reprsim/extract.py", "src/reprsim/compare.py"} & figures


def test_every_script_resolves():
    for script in (REPO / "scripts").glob("*.py"):
        assert str(script) in {str(p) for p in code_dependencies(script, REPO / "src")}

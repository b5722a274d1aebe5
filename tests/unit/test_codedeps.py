"""Static code dependencies of workflow scripts: what a rule declares as its code input."""

from conftest import REPO

from reprsim.workflow.codedeps import code_dependencies


def deps(script):
    return {str(p).replace(str(REPO) + "/", "") for p in code_dependencies(REPO / "scripts" / f"{script}.py", REPO / "src")}


def test_transitive_imports_and_package_inits():
    found = deps("compare_pair")
    assert {"scripts/compare_pair.py", "src/reprsim/stages/compare/pairs.py", "src/reprsim/metrics/cka.py",
            "src/reprsim/io/store.py", "src/reprsim/__init__.py", "src/reprsim/stages/__init__.py",
            "src/reprsim/stages/compare/__init__.py", "src/reprsim/metrics/__init__.py"} <= found


def test_unrelated_modules_are_not_dependencies():
    # comparing stores needs neither the model code nor the extraction code
    compare = deps("compare_pair")
    assert not {p for p in compare if "/stages/" in p and "/stages/compare/" not in p and not p.endswith("stages/__init__.py")}
    assert not {p for p in compare if "/aligners/" in p or "/nets/" in p}  # no maps, no models in a pair job
    figures = deps("plot_figure")
    assert "src/reprsim/stages/report/figures/__init__.py" in figures
    # a figure draws a table: no measure code, no other stage
    assert not {p for p in figures if "/metrics/" in p or ("/stages/" in p and "/stages/report/" not in p
                                                           and not p.endswith("stages/__init__.py"))}


def test_every_script_resolves():
    for script in (REPO / "scripts").glob("*.py"):
        assert str(script) in {str(p) for p in code_dependencies(script, REPO / "src")}

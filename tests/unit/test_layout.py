"""The package layout's rule: a stage imports the libraries, never another stage; the libraries
import no stage; the workflow helpers the rules load whenever the DAG is built stay torch-free."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "reprsim"
STAGES = sorted(p.name for p in (SRC / "stages").iterdir() if (p / "__init__.py").is_file())


def imported(path: Path) -> set[str]:
    """Every module a file imports, at any depth of the file (function-level imports too)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def stage_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if parts[:2] == ["reprsim", "stages"] and len(parts) > 2 else None


def test_the_stages_are_the_dag_stages():
    assert STAGES == ["align", "compare", "data", "extract", "findings", "finetune", "grounding", "models", "report", "stitch", "universality"]


def test_no_stage_imports_another_stage():
    crossings = []
    for stage in STAGES:
        for path in (SRC / "stages" / stage).rglob("*.py"):
            crossings += [f"{path.relative_to(SRC)} imports {m}" for m in imported(path)
                          if stage_of(m) not in (None, stage)]
    assert crossings == []


def test_libraries_import_no_stage():
    # the command line (cli.py) is an entry point, like scripts/: it may call a stage (reprsim plan counts a
    # local dataset's rows with the data stage's reader); nothing imports it
    libraries = [p for p in SRC.rglob("*.py") if "stages" not in p.relative_to(SRC).parts and p.name != "cli.py"]
    offending = [f"{p.relative_to(SRC)} imports {m}" for p in libraries for m in imported(p) if stage_of(m)]
    assert offending == []


def test_workflow_helpers_are_torch_free():
    for path in (SRC / "workflow").rglob("*.py"):
        heavy = {m for m in imported(path) if m.split(".")[0] in ("torch", "transformers", "numpy", "zarr")}
        assert not heavy, f"{path.name} imports {heavy}: the rules load it whenever the DAG is built"


def test_the_report_stage_reads_tables_only():
    """Figures and the report draw tidy tables: no measure code, so an edit of a measure reruns no figure."""
    for path in (SRC / "stages" / "report").rglob("*.py"):
        assert not {m for m in imported(path) if m.startswith("reprsim.metrics")}, path.name


def test_the_schema_ships_inside_the_package():
    from reprsim.config import SCHEMA_PATH

    assert SCHEMA_PATH.is_file() and SCHEMA_PATH.parent == SRC


def test_a_built_wheel_carries_the_schema_the_captions_and_the_templates(tmp_path):
    """`reprsim validate` and the report read these files from the installed package, so a
    non-editable install (pip install .) must carry them."""
    import subprocess
    import sys
    import zipfile

    repo = SRC.parents[1]
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path), str(repo)], check=True, capture_output=True)
    wheel, = tmp_path.glob("reprsim-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "reprsim/schema.yaml" in names
    captions = {p.name for p in (SRC / "stages" / "report" / "captions").glob("*.rst")}
    assert captions and {f"reprsim/stages/report/captions/{c}" for c in captions} <= names
    templates = {f"reprsim/{p.relative_to(SRC).as_posix()}" for p in (SRC / "stages" / "report" / "templates").rglob("*")
                 if p.is_file() and "__pycache__" not in p.parts}
    assert templates and templates <= names, sorted(templates - names)


def test_the_measure_registry_is_torch_free():
    """The config check, the CLI, `reprsim plan` and the report read it: it names the measures' functions as strings
    and imports nothing beyond the standard library."""
    assert {m.split(".")[0] for m in imported(SRC / "measure_registry.py")} <= {
        "__future__", "functools", "importlib", "json", "math", "collections", "dataclasses", "pathlib"}


# the packages stages exchange through (tables/), a study's design (design/) and the statistics of results
# (inference/) are read by the report: they must not bring measure code into its jobs
SHARED_BY_THE_REPORT = ("tables", "design", "inference", "text", "plotting")


def test_what_the_report_reads_imports_no_measure_code_and_no_stage():
    offending = [f"{path.relative_to(SRC)} imports {m}" for package in SHARED_BY_THE_REPORT
                 for path in (SRC / package).rglob("*.py") for m in imported(path)
                 if m.startswith("reprsim.metrics") or stage_of(m)]
    assert offending == []


def test_the_report_and_figure_jobs_run_no_measure_code():
    """Transitively, as the rules declare their code inputs (reprsim.workflow.codedeps): an edit of a measure, of
    the pair engine or of the measure api reruns no figure and no page."""
    from reprsim.workflow.codedeps import code_dependencies

    scripts = SRC.parents[1] / "scripts"
    for script in ("build_report.py", "plot_figure.py"):
        deps = code_dependencies((scripts / script).resolve(), SRC.parent.resolve())
        assert not [p for p in deps if "/reprsim/metrics/" in p], script


def test_package_inits_hold_no_code_the_workflow_would_follow():
    """A package's __init__ runs whenever one of its modules is imported, so every rule importing one module would
    gain the code inputs of what the __init__ imports: the new packages' __init__ are a docstring, and metrics'
    loads its api with importlib (which codedeps does not follow)."""
    for package in (*SHARED_BY_THE_REPORT, "guide", "metrics", "nets", "stages"):
        assert not [m for m in imported(SRC / package / "__init__.py") if m.startswith("reprsim")], package


def test_the_workflow_imports_the_measure_api_by_its_module():
    """`from reprsim.metrics import compute` works for a user (reprsim.metrics loads its api on first use), but
    codedeps would not see that the importing job runs reprsim/metrics/api.py: the package and the workflow's
    scripts name the module."""
    import reprsim.metrics as metrics

    lazy = set(metrics.__all__)
    scripts = SRC.parents[1] / "scripts"
    offending = [f"{path} imports {name} from reprsim.metrics" for path in [*SRC.rglob("*.py"), *scripts.glob("*.py")]
                 for node in ast.walk(ast.parse(path.read_text()))
                 if isinstance(node, ast.ImportFrom) and node.module == "reprsim.metrics"
                 for name in (alias.name for alias in node.names) if name in lazy]
    assert offending == []


def test_the_shared_packages_are_torch_free():
    """The configuration check (design, config_checks), the report's jobs (tables, inference, plotting) and the guide
    read them: they import neither torch nor transformers."""
    for package in ("design", "tables", "inference", "plotting", "config_checks", "guide"):
        for path in (SRC / package).rglob("*.py"):
            heavy = {m for m in imported(path) if m.split(".")[0] in ("torch", "transformers")}
            assert not heavy, f"{path.relative_to(SRC)} imports {heavy}"

#!/usr/bin/env bash
# Set up a local virtual environment (.venv) and run reprsim in it.
#   ./bootstrap.sh setup                   only set up .venv (what run and test do first)
#   ./bootstrap.sh run  [snakemake args]   the default experiment -> results/report/index.html
#   ./bootstrap.sh test                    the fast test tier: tests/unit and tests/stage
#   ./bootstrap.sh test [pytest args]      pytest with these arguments, e.g. tests/workflow tests/cluster
#                                          (without a test path: the fast tier with them, e.g. -k cka)
# PyTorch: an existing installation (CPU or CUDA) is reused; where none is present torch==2.13.0
# is installed from the default package index (on Linux, PyPI serves a CUDA build) or from
# REPRSIM_TORCH_INDEX, e.g. https://download.pytorch.org/whl/cpu for the CPU build or .../cu126 for CUDA.
set -euo pipefail
cd "$(dirname "$0")"

python=${PYTHON:-python3}
venv=${REPRSIM_VENV:-.venv}
torch_version=2.13.0

if [ ! -x "$venv/bin/python" ]; then
    if "$python" -c "import torch" 2>/dev/null; then
        echo "bootstrap: reusing the PyTorch already installed for $python"
        "$python" -m venv --system-site-packages "$venv"
    else
        "$python" -m venv "$venv"
    fi
fi
py="$venv/bin/python"

if ! "$py" -c "import torch" 2>/dev/null; then
    echo "bootstrap: installing PyTorch $torch_version from ${REPRSIM_TORCH_INDEX:-your default package index} (on Linux PyPI serves a CUDA build; REPRSIM_TORCH_INDEX=https://download.pytorch.org/whl/cpu gives the CPU one)"
    "$py" -m pip install --quiet "torch==$torch_version" ${REPRSIM_TORCH_INDEX:+--index-url "$REPRSIM_TORCH_INDEX"}
fi

# Reinstall the package only when its declared dependencies changed.
stamp="$venv/.reprsim-installed"
wanted=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$wanted" ]; then
    echo "bootstrap: installing reprsim and its dependencies into $venv"
    "$py" -m pip install --quiet -e ".[test]"
    echo "$wanted" > "$stamp"
fi

export TOKENIZERS_PARALLELISM=false
command=${1:-}
shift || true
case "$command" in
    setup) ;;
    run)  exec "$venv/bin/snakemake" --cores "${CORES:-all}" "$@" ;;
    test) # no test path among the arguments (e.g. `-k cka`): the fast tier, filtered by them
          named=no
          for arg in "$@"; do [ -e "${arg%%::*}" ] && named=yes; done
          [ "$named" = yes ] || set -- tests/unit tests/stage --durations=15 "$@"
          HF_HUB_OFFLINE=1 exec "$py" -m pytest "$@" ;;
    *)    echo "usage: ./bootstrap.sh setup|run|test [args...]" >&2; exit 2 ;;
esac

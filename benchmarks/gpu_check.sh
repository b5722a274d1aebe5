#!/usr/bin/env bash
# The GPU check (benchmarks/gpu_check.py): run it once when a CUDA machine is at hand, and put the
# figures it prints in the guide (docs/benchmarks.md, "On a GPU") beside the CPU ones.
#   benchmarks/gpu_check.sh --pack-minilm                here first, where MiniLM's package is: its float16 copy
#                                                        (benchmarks/.minilm-float16) for a machine without it
#   benchmarks/gpu_check.sh [--out DIR] [--minutes 9.5]  on a machine with a CUDA GPU (≤ 10 minutes on one H100)
#   benchmarks/gpu_check.sh --dry                        every step at tiny sizes on the CPU
# Python: $PYTHON, else the project's .venv, else python3; reprsim from src/ when it is not installed.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
python=${PYTHON:-}
if [ -z "$python" ]; then
    if [ -x "$repo/.venv/bin/python" ]; then python="$repo/.venv/bin/python"; else python=python3; fi
fi
"$python" -c "import reprsim" 2>/dev/null || export PYTHONPATH="$repo/src${PYTHONPATH:+:$PYTHONPATH}"
export TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
exec "$python" "$repo/benchmarks/gpu_check.py" "$@"

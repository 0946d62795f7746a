#!/usr/bin/env bash
# `make gpu-kit-rehearse`: the GPU machine's calls, here, on the CPU. A fresh Python 3.12 environment holds only
# what the GPU machine holds (gpu-machine.txt), the kit is received load by load and installed the way the GPU
# machine installs it (pip --no-index --no-deps --target), and the proof runs end to end: its GPU steps say
# "no GPU", every other step must pass.
set -euo pipefail
cd "$(dirname "$0")/../.."
HERE=.gpu-kit/rehearse
rm -rf "$HERE"
mkdir -p "$HERE"

python312=""
for candidate in "$(command -v python3.12 || true)" /root/.pyenv/versions/3.12*/bin/python3 /usr/bin/python3.12; do
    if [ -n "$candidate" ] && [ -x "$candidate" ]; then python312=$candidate; fi
done
if [ -z "$python312" ]; then
    echo "no Python 3.12 here: the rehearsal needs the GPU machine's Python version (its wheels are cp312)"
    exit 2
fi
echo "rehearsing with $("$python312" --version) ($python312)"
uv venv --quiet --python "$python312" "$HERE/venv"
# The GPU machine's own packages that the proof uses (torch 2.11 with CUDA 13, numpy, onnxruntime …) and pip.
uv pip install --quiet --python "$HERE/venv/bin/python" -r benchmarks/gpu_kit/gpu-machine.txt pip

export SCRIBA_GPU_KIT="$PWD/$HERE/kit" SCRIBA_GPU_PYTHON="$PWD/$HERE/venv/bin/python"
for load in .gpu-kit/load-*; do
    bash benchmarks/gpu_kit/device.sh receive "$load"
done
status=0
OUT="$PWD/$HERE/report" bash benchmarks/gpu_kit/device.sh run || status=$?
"$HERE/venv/bin/python" - "$HERE/report/report.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
bad = {name: step for name, step in report["steps"].items() if step["status"] not in ("ok", "no GPU")}
for name, step in report["steps"].items():
    print(f"  {name:<12} {step['status']:<8} {step.get('seconds', '')} s")
if bad:
    for name, step in bad.items():
        print(f"REHEARSAL FAILED at {name}: {step.get('detail')}\n{step.get('trace', '')}")
    sys.exit(1)
print("rehearsal passed: the kit installs and every step runs (GPU steps: no GPU here)")
PY
exit $status

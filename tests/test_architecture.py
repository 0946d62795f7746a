"""Layering rules that keep the engine usable without Qt (import-linter contracts in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]


def test_import_contracts_hold() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run([str(lint_imports)], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 kept, 0 broken" in result.stdout


def test_importing_the_engine_loads_no_heavy_library() -> None:
    code = (
        "import sys, app.cli, app.core.pipeline, app.core.export, app.core.jobs, app.core.worker, app.core.settings;"
        "names = ('torch', 'faster_whisper', 'pyannote.audio', 'ctranslate2', 'PySide6');"
        "heavy = [m for m in names if m in sys.modules];"
        "print(','.join(heavy))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""

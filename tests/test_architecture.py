"""Layering rules that keep the engine usable without Qt (import-linter contracts in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit  # `make test-fast`: no model, no spawned scriba, no servers

ROOT = Path(__file__).parents[1]


def test_import_contracts_hold() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run([str(lint_imports)], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "5 kept, 0 broken" in result.stdout


def test_importing_the_engine_loads_no_heavy_library() -> None:
    code = (
        "import sys, app.cli.main, app.core.engine.pipeline, app.core.transcript.save, app.core.queue.jobs,"
        " app.core.queue.worker, app.core.config.settings, app.core.dictation.session, app.cloud.offload.run;"
        "names = ('torch', 'faster_whisper', 'pyannote.audio', 'ctranslate2', 'PySide6');"
        "heavy = [m for m in names if m in sys.modules];"
        "print(','.join(heavy))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


def test_every_package_under_app_goes_into_the_wheel() -> None:
    """pyproject lists the packages by hand (resources/ is installed as app.resources); a sub-package missing
    from that list would silently drop out of the wheel and the frozen bundle."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {".".join(init.parent.relative_to(ROOT).parts) for init in (ROOT / "app").rglob("__init__.py")} | {
        "app.resources"
    }
    assert on_disk - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
    assert listed - on_disk == set(), "these are listed in pyproject.toml but no longer exist"

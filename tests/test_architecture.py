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
    assert "6 kept, 0 broken" in result.stdout


def test_importing_the_engine_loads_no_heavy_library() -> None:
    code = (
        "import sys, app.cli.main, app.core.engine.pipeline, app.core.transcript.save, app.core.queue.jobs,"
        " app.core.queue.worker, app.core.config.settings, app.core.dictation.live, app.cloud.offload.run;"
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


STRUCTURE = ROOT / ".ci" / "check_structure.py"


def _structure(package: Path, allowed: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(STRUCTURE), "--package", str(package), "--allowed", str(allowed), *extra],
        capture_output=True,
        text=True,
    )


def test_structure_holds_for_app() -> None:
    """`make structure`: no module of app/ over 800 lines, no import circle (type-only imports too), beyond
    .ci/structure_allowed.txt."""
    result = subprocess.run(
        [sys.executable, str(STRUCTURE), "--type-checking"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_structure_finds_circles_however_imported(tmp_path: Path) -> None:
    """A circle closed by a function-level import or a relative one counts; one closed only under
    TYPE_CHECKING does not (unless asked for); each circle names the file and line of every import in it."""
    package = tmp_path / "pkg"
    _write(
        package,
        {
            "__init__.py": "",
            "a.py": "import pkg.b\n",
            "b.py": "def load() -> None:\n    from pkg import a\n",
            "sub/__init__.py": "",
            "sub/e.py": "from . import f\n",
            "sub/f.py": "X = 1\n\n\nfrom .e import f as again\n",
            "c.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from pkg.d import Y\n",
            "d.py": "from pkg.c import TYPE_CHECKING\n",
            "alone.py": "import os\nimport pkg\n",
        },
    )
    result = _structure(package, tmp_path / "none.txt")
    assert result.returncode == 1
    circles = sorted(line for line in result.stdout.splitlines() if line.startswith("import circle"))
    assert circles == [
        "import circle pkg.a -> pkg.b -> pkg.a",
        "import circle pkg.sub.e -> pkg.sub.f -> pkg.sub.e",
    ]
    assert "pkg/b.py:2 imports pkg.a" in result.stdout
    assert "pkg/sub/f.py:4 imports pkg.sub.e" in result.stdout

    with_types = _structure(package, tmp_path / "none.txt", "--type-checking")
    assert "import circle pkg.c -> pkg.d -> pkg.c" in with_types.stdout


def test_structure_limits_module_length(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    _write(package, {"__init__.py": "", "fits.py": "x = 1\n" * 800, "long.py": "x = 1\n" * 801})
    result = _structure(package, tmp_path / "none.txt")
    assert result.returncode == 1
    assert result.stdout.splitlines() == ["pkg/long.py has 801 lines (at most 800): split it by what its parts do"]


def test_structure_allow_list_only_shrinks(tmp_path: Path) -> None:
    """An allowed edge or long module passes; an entry that no longer applies, or has no reason, fails."""
    package = tmp_path / "pkg"
    _write(
        package,
        {
            "__init__.py": "",
            "a.py": "import pkg.b\n",
            "b.py": "import pkg.a\n",
            "c.py": "import pkg.a\n",
            "long.py": "x = 1\n" * 801,
        },
    )
    allowed = tmp_path / "allowed.txt"
    allowed.write_text("# comment\n\npkg.b -> pkg.a  # b needs a for now\npkg/long.py  # split next week\n")
    assert _structure(package, allowed).returncode == 0

    allowed.write_text(
        "pkg.b -> pkg.a  # b needs a for now\n"
        "pkg.c -> pkg.a  # a real import, but on no circle\n"
        "pkg.a -> pkg.c  # no such import\n"
        "pkg/fits.py  # not over the limit\n"
        "pkg.a -> pkg.b\n"
    )
    result = _structure(package, allowed)
    assert result.returncode == 1
    problems = result.stdout.splitlines()
    assert "allowed.txt: 'pkg.c -> pkg.a' no longer closes an import circle: remove its entry" in problems
    assert "allowed.txt: 'pkg.a -> pkg.c' no longer closes an import circle: remove its entry" in problems
    assert "allowed.txt: pkg/fits.py is no longer over 800 lines: remove its entry" in problems
    assert any(line.startswith("allowed.txt:5: write") for line in problems)
    assert "pkg/long.py has 801 lines (at most 800): split it by what its parts do" in problems

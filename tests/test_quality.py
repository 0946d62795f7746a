"""Ruff (lint + format) and mypy on the engine: a violation fails the suite, as in review."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]
BIN = Path(sys.executable).parent


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True)


def test_ruff_lint_and_format() -> None:
    lint = run(str(BIN / "ruff"), "check", "app", "tests", "benchmarks")
    assert lint.returncode == 0, lint.stdout
    formatting = run(str(BIN / "ruff"), "format", "--check", "app", "tests", "benchmarks")
    assert formatting.returncode == 0, formatting.stdout


def test_mypy_on_core() -> None:
    result = run(str(BIN / "mypy"))
    assert result.returncode == 0, result.stdout

"""A torchaudio whose compiled library does not load into torch (what `pip install -U torchaudio` does to a
pinned torch): the doctor and a transcription say which versions clash and what to install, and a job without
speakers still transcribes.

The broken torchaudio is the real package, shadowed first on PYTHONPATH, with its compiled libraries replaced
by bytes that are not a shared library, so torch's own loader fails as it does on a real mismatch.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from app.core.doctor import BROKEN
from tests.test_cli import scriba

ROOT = Path(__file__).parents[4]
TORCH = importlib.metadata.version("torch").split("+")[0]


def shadowed_torchaudio(where: Path, claimed_version: str) -> Path:
    """A copy of the installed torchaudio that cannot load its library, claiming ``claimed_version``."""
    spec = importlib.util.find_spec("torchaudio")
    assert spec is not None and spec.origin is not None
    package = Path(spec.origin).parent
    shadow = where / "shadow"
    shutil.copytree(package, shadow / "torchaudio", ignore=shutil.ignore_patterns("__pycache__"))
    libraries = list((shadow / "torchaudio" / "lib").glob("*.so"))
    assert libraries, "torchaudio ships no compiled library to break"
    for library in libraries:
        library.write_bytes(b"not a shared library\n" * 64)
    distribution = importlib.metadata.distribution("torchaudio")
    info = shadow / f"torchaudio-{claimed_version}.dist-info"
    info.mkdir()
    metadata = distribution.read_text("METADATA") or ""
    lines = [f"Version: {claimed_version}" if line.startswith("Version:") else line for line in metadata.splitlines()]
    (info / "METADATA").write_text("\n".join(lines) + "\n")
    return shadow


def environment(shadow: Path) -> dict[str, str]:
    return {"PYTHONPATH": f"{shadow}:{ROOT}"}


def test_a_torchaudio_for_another_torch_is_named_with_the_command_that_fixes_it(tmp_path: Path) -> None:
    shadow = shadowed_torchaudio(tmp_path, "2.10.0")
    result = scriba("doctor", "--json", env=environment(shadow))
    assert result.returncode == BROKEN, result.stderr
    report = json.loads(result.stdout)
    verdict = report["verdict"]
    assert verdict.startswith("FAILED: speakers cannot be found: torchaudio 2.10.0 does not match torch " + TORCH)
    assert f"pip install torchaudio=={TORCH}" in verdict
    assert "Transcription alone works (tiny.en ran on cpu" in verdict
    assert report["speaker_libraries"].startswith("torchaudio 2.10.0 does not match")


def test_the_same_version_that_will_not_load_asks_for_the_pair_again(tmp_path: Path) -> None:
    shadow = shadowed_torchaudio(tmp_path, TORCH)
    result = scriba("doctor", "--json", env=environment(shadow))
    assert result.returncode == BROKEN, result.stderr
    verdict = json.loads(result.stdout)["verdict"]
    assert f"torchaudio {TORCH}'s compiled library cannot load into torch {TORCH}" in verdict
    assert f"pip install --force-reinstall torch=={TORCH} torchaudio=={TORCH}" in verdict


def test_a_transcription_with_speakers_says_what_to_install_and_one_without_them_is_written(
    tmp_path: Path, sample_dir: Path
) -> None:
    shadow = shadowed_torchaudio(tmp_path, "2.10.0")
    out = tmp_path / "out"
    call = sample_dir / "sample.wav"
    common = ("-o", str(out), "-f", "txt", "-q")
    failed = scriba("transcribe", str(call), *common, env=environment(shadow))
    assert failed.returncode != 0
    errors = [line for line in failed.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, failed.stderr
    assert "sample.wav" in errors[0]
    assert f"torchaudio 2.10.0 does not match torch {TORCH}" in errors[0]
    assert f"pip install torchaudio=={TORCH}" in errors[0]
    assert "Traceback" not in failed.stderr
    assert not out.exists() or not list(out.iterdir())

    words_only = scriba("transcribe", str(call), *common, "--no-diarize", env=environment(shadow))
    assert words_only.returncode == 0, words_only.stderr
    assert "chicago" in (out / "sample.txt").read_text().lower()


def test_the_suite_stops_at_once_with_the_reason_instead_of_failing_test_after_test(tmp_path: Path) -> None:
    shadow = shadowed_torchaudio(tmp_path, "2.10.0")
    # Any test that is not in the unit subset: this one, run in a child pytest over the broken torchaudio.
    selected = f"{Path(__file__).relative_to(ROOT)}::test_the_same_version_that_will_not_load_asks_for_the_pair_again"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", selected],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **environment(shadow)},
    )
    assert result.returncode == 3, result.stdout + result.stderr
    assert "the test environment cannot find speakers: torchaudio 2.10.0 does not match torch" in result.stdout
    assert "passed" not in result.stdout and "failed" not in result.stdout

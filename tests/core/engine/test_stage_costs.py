"""The progress bar's stages sized by what they cost, so the ETA computed from it holds over a long job."""

from __future__ import annotations

import pytest

from app.core.engine.stage_costs import STAGES, StageCosts, job_fraction, model_cost, stage_layout

pytestmark = pytest.mark.unit  # `make test-fast`: no model, no spawned scriba, no servers


def test_first_job_uses_estimates_scaled_by_model_and_device() -> None:
    costs = StageCosts()
    tiny_cpu = costs.rates("tiny.en", "cpu", "embedded", "cpu")
    large_cpu = costs.rates("large-v3", "cpu", "embedded", "cpu")
    large_gpu = costs.rates("large-v3", "cuda", "embedded", "cuda")
    assert large_cpu["transcribe"] == pytest.approx(tiny_cpu["transcribe"] * model_cost("large-v3"))
    assert large_gpu["transcribe"] < large_cpu["transcribe"] / 10
    # On a CPU with tiny.en, finding speakers is a large share of the job, not the fixed 19 % it used to be.
    _, shares = stage_layout(tiny_cpu)
    assert shares["diarize"] > 0.25
    assert costs.rates("tiny.en", "cpu", None, "cpu")["diarize"] == 0.0


def test_measured_rates_replace_estimates_for_the_same_set_up_only() -> None:
    costs = StageCosts()
    timings = {"decode": 1.0, "transcribe": 30.0, "diarize": 60.0, "merge": 1.0, "total": 92.0}
    costs.record(timings, 600.0, "tiny.en", "cpu", "embedded", "cpu")
    offsets, shares = stage_layout(costs.rates("tiny.en", "cpu", "embedded", "cpu"))
    assert shares["diarize"] == pytest.approx(60 / 92)
    assert shares["transcribe"] == pytest.approx(30 / 92)
    assert [offsets[stage] for stage in STAGES] == sorted(offsets.values())
    assert offsets["merge"] + shares["merge"] == pytest.approx(1.0)
    # Another model is still estimated; a job too short to say much is not recorded.
    assert costs.rates("small.en", "cpu", "embedded", "cpu")["transcribe"] != pytest.approx(30 / 600)
    costs.record({**timings, "diarize": 1.0}, 10.0, "tiny.en", "cpu", "embedded", "cpu")
    assert stage_layout(costs.rates("tiny.en", "cpu", "embedded", "cpu"))[1]["diarize"] == pytest.approx(60 / 92)


def test_stages_run_side_by_side_are_measured_apart_from_stages_run_one_after_the_other() -> None:
    """Beside the transcription the diarizer has part of the cores, so its rate is another one: a job run one way
    must not set the progress pace of a job run the other way."""
    costs = StageCosts()
    costs.record({"transcribe": 30.0, "diarize": 50.0}, 600.0, "tiny.en", "cpu", "embedded", "cpu", alongside=True)
    assert costs.rates("tiny.en", "cpu", "embedded", "cpu", alongside=True)["diarize"] == pytest.approx(50 / 600)
    assert costs.rates("tiny.en", "cpu", "embedded", "cpu")["diarize"] != pytest.approx(50 / 600)


def test_a_finished_job_reads_exactly_one_whatever_the_shares_sum_to() -> None:
    # Rates whose shares, summed in floats, end one ulp short of 1.0 (CI saw a job end at 0.9999999999999999).
    rates = {
        "decode": 0.9014274576114836,
        "transcribe": 0.30589983033553536,
        "diarize": 0.127229304967304,
        "merge": 0.0,
    }
    offsets, shares = stage_layout(rates)
    assert offsets["merge"] + shares["merge"] < 1.0  # the trap is really there
    fractions = [job_fraction(offsets, shares, stage, f) for stage in STAGES for f in (0.0, 0.5, 1.0)]
    assert fractions == sorted(fractions)
    assert fractions[-1] == 1.0
    assert job_fraction(offsets, shares, "transcribe", 2.0) == job_fraction(offsets, shares, "transcribe", 1.0)

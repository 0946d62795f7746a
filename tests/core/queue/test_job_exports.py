"""A queue job's exports (app/core/queue/exports.py): by hand, and refreshed after an edit in Scriba's editor."""

from __future__ import annotations

from pathlib import Path

from app.core.queue.exports import export_job, refresh_exports
from app.core.queue.jobs import JobOptions, JobStore
from tests.core.transcript.test_export import make_transcript


def _done_job(tmp_path: Path) -> tuple[JobStore, int]:
    store = JobStore(tmp_path / "data")
    source = tmp_path / "talk.wav"
    source.write_bytes(b"RIFF")
    job = store.add(source, JobOptions())
    store.claim(job.id, "test")
    store.finish(job.id, make_transcript())
    return store, job.id


def test_an_edit_reaches_every_exported_format_including_qda_text(tmp_path: Path) -> None:
    """The refresh read a file's format from its last suffix: talk.qda.txt counted as txt, so a QDA export
    was never written again after an edit."""
    store, job_id = _done_job(tmp_path)
    out = tmp_path / "out"
    exported = export_job(store, job_id, out, ("txt", "qda"))
    store.set_exported(job_id, list(exported.written))
    store.save_transcript(job_id, make_transcript().rename_speaker("SPEAKER_01", "Dr. Okafor"))

    refreshed = refresh_exports(store, job_id)
    assert refreshed is not None and not refreshed.renamed and not refreshed.failed
    assert sorted(path.name for path in out.iterdir()) == ["talk.qda.txt", "talk.txt"]
    assert "Dr. Okafor" in (out / "talk.txt").read_text()
    assert "] Dr. Okafor: Fine, <thanks>" in (out / "talk.qda.txt").read_text()
    assert [Path(path).name for path in store.get(job_id).exported] == ["talk.txt", "talk.qda.txt"]


def test_a_refresh_keeps_an_export_edited_by_hand_and_writes_beside_it(tmp_path: Path) -> None:
    store, job_id = _done_job(tmp_path)
    out = tmp_path / "out"
    store.set_exported(job_id, list(export_job(store, job_id, out, ("txt", "srt")).written))
    by_hand = (out / "talk.srt").read_text() + "\n(checked by the editor)\n"
    (out / "talk.srt").write_text(by_hand)
    store.save_transcript(job_id, make_transcript().rename_speaker("SPEAKER_01", "Dr. Okafor"))

    refreshed = refresh_exports(store, job_id)
    assert refreshed is not None and refreshed.renamed
    assert (out / "talk.srt").read_text() == by_hand
    assert "Dr. Okafor" in (out / "talk-2.srt").read_text() and "Dr. Okafor" in (out / "talk-2.txt").read_text()
    assert f"talk.* in {out} were not written by Scriba as they are now (edited by hand?)" in refreshed.summary()
    assert [Path(path).name for path in store.get(job_id).exported] == ["talk-2.txt", "talk-2.srt"]

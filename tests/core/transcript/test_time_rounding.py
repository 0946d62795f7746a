"""One rounding of times to the second everywhere: the window's paragraph times, the queue's lengths (both
``times.clock``) and the exports' [HH:MM:SS] agree, at the half seconds where rounding and flooring part."""

from __future__ import annotations

import re

import pytest

from app.core.transcript import formats, times
from app.core.transcript.document import Segment, Transcript

pytestmark = pytest.mark.unit  # `make test-fast`: no model, no spawned scriba, no servers

# start (s) -> what a person reads for it: down to the second, after the millisecond a subtitle writes.
EXPECTED = {
    59.5: ("0:59", "00:00:59"),
    59.9: ("0:59", "00:00:59"),
    59.9996: ("1:00", "00:01:00"),  # a subtitle writes 00:01:00.000: the second shown must not contradict it
    3599.5: ("59:59", "00:59:59"),
    3600.4: ("1:00:00", "01:00:00"),
    7322.5: ("2:02:02", "02:02:02"),
}


def one_paragraph_each(starts: list[float]) -> Transcript:
    segments = tuple(Segment(start, start + 0.3, f"word{index}", (), f"S{index}") for index, start in enumerate(starts))
    return Transcript(
        source="/tmp/x.wav",
        duration=starts[-1] + 1,
        language="en",
        model="tiny.en",
        device="cpu",
        compute_type="int8",
        segments=segments,
        diarization=None,
        speakers=tuple(segment.speaker for segment in segments if segment.speaker),
        timings={"total": 1.0},
    )


def test_the_window_and_every_export_show_the_same_second() -> None:
    starts = sorted(EXPECTED)
    transcript = one_paragraph_each(starts)
    txt = formats.to_txt(transcript)
    shown_in_txt = dict(zip(starts, re.findall(r"^\[(\d\d:\d\d:\d\d)\]", txt, flags=re.MULTILINE), strict=True))
    md = formats.to_md(transcript)
    shown_in_md = dict(zip(starts, re.findall(r"^`(\d\d:\d\d:\d\d)`", md, flags=re.MULTILINE), strict=True))
    for start, (window, export) in EXPECTED.items():
        assert times.clock(start) == window, start  # what the editor's margin and the timeline's tooltip show
        assert shown_in_txt[start] == export, start
        assert shown_in_md[start] == export, start


@pytest.mark.parametrize(
    ("seconds", "words"),
    [(59.5, "59 s"), (59.9996, "1 min 00 s"), (3599.5, "59 min 59 s"), (3659.5, "1 h 00 min")],
)
def test_a_duration_in_words_rounds_as_the_clock_does(seconds: float, words: str) -> None:
    assert times.format_duration(seconds) == words

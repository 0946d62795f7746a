"""Times and durations as people read and write them: a subtitle's timestamp, a clock (4:05) for a place or a
length in a recording, a duration in words (13 min 26 s) for an estimate, and a time typed by a person."""

from __future__ import annotations


def whole_seconds(seconds: float) -> int:
    """The one rounding of a time to the second, for every place that shows one (the window, the exports, the
    queue): to the millisecond, as subtitles write it, then down. So 59.5 s and 59.9 s are 0:59 everywhere (a
    paragraph is shown at or before the moment it starts), and 59.9996 s, which a subtitle writes as 00:01:00.000,
    is 1:00 everywhere too."""
    return max(0, round(seconds * 1000)) // 1000


def timestamp(seconds: float, separator: str) -> str:
    """HH:MM:SS<sep>mmm, hours unbounded (a 100-hour recording stays readable)."""
    millis = max(0, round(seconds * 1000))
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs, millis = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{separator}{millis:03d}"


def timestamp_seconds(seconds: float) -> str:
    """HH:MM:SS, the exports' paragraph time: ``timestamp`` without its milliseconds."""
    minutes, secs = divmod(whole_seconds(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}"


def clock(seconds: float) -> str:
    """A place or a length for people: 4:05, 1:02:03."""
    minutes, secs = divmod(whole_seconds(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02}:{secs:02}" if hours else f"{minutes}:{secs:02}"


def parse_time(text: str) -> float:
    """A time as people write it: ``90``, ``1:30``, ``1:02:03.5`` (seconds); ValueError when it is not one."""
    parts = text.strip().split(":")
    if len(parts) > 3 or any(part.strip() == "" for part in parts):
        raise ValueError(f"'{text}' is not a time: give seconds (90), M:SS (1:30) or H:MM:SS")
    seconds = 0.0
    for index, part in enumerate(parts):
        try:
            value = float(part)
        except ValueError:
            raise ValueError(f"'{text}' is not a time: give seconds (90), M:SS (1:30) or H:MM:SS") from None
        if value < 0 or (index > 0 and value >= 60):  # minutes and seconds after a colon stay under 60
            raise ValueError(f"'{text}' is not a time: give seconds (90), M:SS (1:30) or H:MM:SS")
        seconds = seconds * 60 + value
    return seconds


def format_duration(seconds: float) -> str:
    """A duration in words, for an estimate or a run: 42 s, 13 min 26 s, 1 h 02 min."""
    hours, rest = divmod(whole_seconds(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    if minutes:
        return f"{minutes} min {secs:02d} s"
    return f"{secs} s"

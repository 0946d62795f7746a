"""Typed errors, and the exit codes of `scriba`.

Every error a user can cause or meet derives from :class:`ScribaError` (the engine's, the queue's, the cloud
offload's) and carries a message written for the person who gave us the input: which file, what is wrong with
it and what to do. Callers (CLI, queue, GUI, remote worker) show ``str(error)`` as is and never parse it; the
CLI exits with the error's :attr:`ScribaError.exit_code`. Anything else that escapes is a bug: it goes to
``crash.log`` with its traceback.
"""

from __future__ import annotations

import signal
from enum import IntEnum
from pathlib import Path
from typing import ClassVar


class ExitCode(IntEnum):
    """What `scriba` exits with. Scripts test these numbers, so none ever changes its meaning."""

    OK = 0
    FAILED = 1  # the work failed, or Scriba refused it with a message that says why
    USAGE = 2  # the command line is wrong (argparse's own code for its errors)
    # A program stopped by a signal exits as a shell reports it: 128 + the signal's number.
    HANGUP = 129  # SIGHUP: the terminal went away
    INTERRUPTED = 130  # SIGINT: Ctrl-C
    BROKEN_PIPE = 141  # SIGPIPE: the reader of our output left (`scriba … | head`)
    TERMINATED = 143  # SIGTERM

    @classmethod
    def for_signal(cls, which: signal.Signals) -> ExitCode:
        """The code a shell gives a program stopped by ``which``."""
        return cls(128 + int(which))


class ScribaError(Exception):
    """Base class of every error Scriba reports to a user: one line, no traceback.

    ``cli_hint`` is the command that fixes it, for the command line: ``str()`` ends with it. The window shows
    :attr:`words` (the message without it) and offers a button for the error's kind instead (a download,
    Settings, API keys…): a command to type means nothing in a window."""

    exit_code: ClassVar[ExitCode] = ExitCode.FAILED
    cli_hint: str = ""

    def __str__(self) -> str:
        words = super().__str__()
        return f"{words} {self.cli_hint}" if self.cli_hint else words

    @property
    def words(self) -> str:
        """The message for the window: what is wrong and what to do, without the command line's hint."""
        return super().__str__()


class UsageError(ScribaError):
    """The command line asks for something that cannot be: a bad value, a missing argument."""

    exit_code = ExitCode.USAGE


class CancelledError(ScribaError):
    """The job was cancelled through its cancellation token."""

    def __init__(self) -> None:
        super().__init__("cancelled")


class MediaError(ScribaError):
    """An input file cannot be turned into audio samples."""

    def __init__(self, path: Path | str, problem: str, advice: str) -> None:
        self.path = Path(path)
        self.problem = problem
        self.advice = advice
        super().__init__(f"{self.path}: {problem}. {advice}")


class MediaFileMissingError(MediaError):
    def __init__(self, path: Path | str) -> None:
        super().__init__(path, "file not found", "Check the path; the file may have been moved or deleted.")


class EmptyMediaFileError(MediaError):
    def __init__(self, path: Path | str) -> None:
        super().__init__(path, "the file is empty (0 bytes)", "The copy or download may have failed; get it again.")


class NotAMediaFileError(MediaError):
    def __init__(self, path: Path | str, detail: str = "") -> None:
        problem = "not an audio or video file"
        if detail:
            problem += f" ({detail})"
        super().__init__(
            path, problem, "Give Scriba an audio or video file such as WAV, MP3, M4A, FLAC, OGG, MP4 or MKV."
        )


class NoAudioStreamError(MediaError):
    def __init__(self, path: Path | str) -> None:
        super().__init__(path, "the file has no audio track", "It may be a silent video; export it again with sound.")


class ZeroLengthAudioError(MediaError):
    def __init__(self, path: Path | str) -> None:
        super().__init__(
            path,
            "the audio track holds no samples (zero length)",
            "The recording may have failed; check it in a media player.",
        )


class ImplausibleAudioError(MediaError):
    """The container describes audio that cannot be real (a sample rate of 1 Hz): decoding it as described would
    turn kilobytes into hours of samples and gigabytes of memory."""

    def __init__(self, path: Path | str, detail: str) -> None:
        super().__init__(
            path,
            f"the audio track is not plausible ({detail})",
            "The file's header is damaged or it was written wrongly; convert or export it again.",
        )


class UnsupportedCodecError(MediaError):
    def __init__(self, path: Path | str, codec: str) -> None:
        super().__init__(
            path,
            f"the audio codec '{codec}' cannot be decoded",
            "Convert it to a common format first, e.g. `ffmpeg -i INPUT -ar 16000 -ac 1 OUTPUT.wav`.",
        )


class CorruptMediaError(MediaError):
    def __init__(self, path: Path | str, detail: str) -> None:
        super().__init__(
            path, f"decoding failed part-way ({detail})", "The file may be truncated or damaged; try another copy."
        )


class ModelError(ScribaError):
    """A speech model cannot be found, downloaded or loaded."""


class ModelNotFoundError(ModelError):
    pass


class ModelDownloadError(ModelError):
    pass


class DeviceError(ScribaError):
    """The requested compute device or compute type cannot be used."""


class DiarizationError(ScribaError):
    """Speaker diarization could not run."""

"""How a global hotkey drives dictation: the modes, declared once for the command, the panel and the settings.

- ``hold``: listening while the key is held; its release ends the utterance at once, and the final is typed.
- ``toggle``: a press starts listening, the next press stops it.
- ``continuous``: listening from the start, voice detection cuts the utterances; the hotkey pauses and resumes.
"""

from __future__ import annotations

from typing import Literal

DictationMode = Literal["hold", "toggle", "continuous"]

DEFAULT_MODE: DictationMode = "toggle"

# What each mode does, in the words the command's help and the panel's choice use.
MODES: dict[DictationMode, str] = {
    "hold": "Hold to talk",
    "toggle": "Press to start, press to stop",
    "continuous": "Always listening (the hotkey pauses)",
}

# Earlier names a settings file or a script may still use.
_ALIASES = {"push": "hold"}


def parse_mode(text: str | None) -> DictationMode:
    """A mode as written in a settings file or on the command line ("push" is the earlier name of "hold").
    ValueError naming the modes for anything else; None is the default mode."""
    if text is None:
        return DEFAULT_MODE
    name = _ALIASES.get(text.strip().lower(), text.strip().lower())
    if name not in MODES:
        raise ValueError(f"dictation mode {text!r}: choose one of {', '.join(MODES)}")
    return name

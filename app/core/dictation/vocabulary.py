"""The person's own words for dictation: replacements (what is heard -> what is typed: names, jargon, "at sign")
and a vocabulary that biases decoding toward their spellings. Both are plain text files in the config folder,
edited by hand or in the window:

``dictation-replacements.txt``, one rule a line, ``#`` starts a comment::

    at sign -> @
    cooper netties -> Kubernetes

``dictation-vocabulary.txt``, words and names separated by commas or lines (``#`` comments too).

A bad line is reported with the file and its line number, and the other lines still load."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from app.core.errors import ScribaError
from app.core.paths import config_dir

REPLACEMENTS_FILE = "dictation-replacements.txt"
VOCABULARY_FILE = "dictation-vocabulary.txt"
ARROW = "->"


class VocabularyError(ScribaError):
    """A replacements or vocabulary file that cannot be read at all; the message names it."""


@dataclass(frozen=True)
class Replacement:
    """``heard`` (a word or phrase, any case, whole words only) is typed as ``typed``."""

    heard: str
    typed: str

    @property
    def pattern(self) -> re.Pattern[str]:
        words = [re.escape(word) for word in self.heard.split()]
        # Whisper may put a comma between the words of a phrase ("at, sign").
        return re.compile(r"(?<!\w)" + r",?\s+".join(words) + r"(?!\w)", re.IGNORECASE)

    def apply(self, text: str) -> str:
        return self.pattern.sub(lambda _match: self.typed, text)


def default_replacements_path() -> Path:
    return config_dir() / REPLACEMENTS_FILE


def default_vocabulary_path() -> Path:
    return config_dir() / VOCABULARY_FILE


def _without_comment(line: str) -> str:
    return line.split("#", 1)[0].strip()


def parse_replacements(text: str, source: str) -> tuple[tuple[Replacement, ...], list[str]]:
    """The rules in ``text`` (longest heard phrase first, so "new york city" wins over "new york"), and a
    message for each bad line naming ``source`` and the line."""
    rules: dict[str, Replacement] = {}
    problems: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _without_comment(raw)
        if not line:
            continue
        where = f"{source}, line {number}"
        if ARROW not in line:
            problems.append(f"{where}: no '{ARROW}' in {line!r}; write it as: heard words {ARROW} typed text")
            continue
        heard, typed = (part.strip() for part in line.split(ARROW, 1))
        if not heard:
            problems.append(f"{where}: nothing before '{ARROW}' in {line!r}; write the words as they are heard")
            continue
        if ARROW in typed:
            problems.append(f"{where}: more than one '{ARROW}' in {line!r}; one rule a line")
            continue
        key = " ".join(heard.lower().split())
        if key in rules and rules[key].typed != typed:
            problems.append(f"{where}: {heard!r} was already given as {rules[key].typed!r}; this line wins")
        rules[key] = Replacement(" ".join(heard.split()), typed)
    ordered = sorted(rules.values(), key=lambda rule: -len(rule.heard.split()))
    return tuple(ordered), problems


def load_replacements(path: Path, *, missing_ok: bool) -> tuple[tuple[Replacement, ...], list[str]]:
    """The rules in the file at ``path`` and the problems of its bad lines. A missing file is no rules when
    ``missing_ok`` (the default file nobody made), else VocabularyError; an unreadable one is VocabularyError."""
    text = _read(path, missing_ok=missing_ok)
    return parse_replacements(text, str(path)) if text else ((), [])


def parse_vocabulary(text: str) -> tuple[str, ...]:
    """Words and phrases separated by commas or lines, each once, in their order."""
    seen: dict[str, str] = {}
    for raw in text.splitlines():
        for part in _without_comment(raw).split(","):
            word = " ".join(part.split())
            if word and word.lower() not in seen:
                seen[word.lower()] = word
    return tuple(seen.values())


def load_vocabulary(path: Path, *, missing_ok: bool) -> tuple[str, ...]:
    return parse_vocabulary(_read(path, missing_ok=missing_ok))


def _read(path: Path, *, missing_ok: bool) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError as error:
        if missing_ok:
            return ""
        raise VocabularyError(f"{path} does not exist: give the path of a text file") from error
    except UnicodeDecodeError as error:
        raise VocabularyError(f"{path} is not UTF-8 text ({error.reason} at byte {error.start})") from error
    except OSError as error:
        raise VocabularyError(f"cannot read {path}: {error.strerror or error}") from error


def hotwords(vocabulary: tuple[str, ...]) -> str | None:
    """The vocabulary as Whisper's hotwords (text it reads before each window); None when empty."""
    return ", ".join(vocabulary) or None

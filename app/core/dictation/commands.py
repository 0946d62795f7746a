"""Spoken punctuation and commands, replacements and numbers: what dictation's finals become before they are
typed. Qt-free; the window's panel and `scriba dictate` both use :class:`DictationEditor`.

The editor keeps the *document*: everything typed since it was made. Each final changes it (words appended, a
comma put where "comma" was said, the last final taken back by "scratch that") and :meth:`DictationEditor.apply`
returns the change as an :class:`Edit`: how many characters to take back at the cursor, then what to type.

A command is recognised only as a whole part of the utterance. Whisper writes its own punctuation and capitals
around the command words ("Hello, comma, how are you? Period."), so words are compared by their letters alone
(a hyphenated word is one word: "comma-separated" is not a comma). Words rarely meant literally ("comma",
"question mark", "new paragraph", "scratch that") act anywhere; words with ordinary meanings ("period", "colon",
"new line", "dash") act only at a boundary: the end of a final the speaker paused after, Whisper's own
punctuation after them, a pause in the word timings, or another command next to them; and never after an
article ("a period of time", "the colon"). "Undo" acts only when it is all the speaker said.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from app.core.dictation.vocabulary import Replacement
from app.core.transcript.document import Word

Action = Literal["mark", "newline", "open_quote", "close_quote", "dash", "scratch", "undo"]

# A gap this long between two words' timings is a pause: the speaker set the word apart as a command.
PAUSE_S = 0.3
_WHISPER_MARKS = ".,?!:;"
_SENTENCE_ENDS = ".?!"


@dataclass(frozen=True)
class Command:
    name: str  # what the face shows: [comma]
    phrases: tuple[str, ...]  # the spoken forms, lower case, one space between words
    action: Action
    text: str = ""  # what it types
    ordinary: bool = False  # also an everyday word: acts only at a boundary


@dataclass(frozen=True)
class CommandTable:
    """One language's commands, and the words before which an ordinary command word is the word itself."""

    language: str
    commands: tuple[Command, ...]
    determiners: frozenset[str]
    # Numbers said as words, for "numbers as digits": units (0-19), tens, and the scales.
    units: dict[str, int] = field(default_factory=dict)
    tens: dict[str, int] = field(default_factory=dict)
    scales: dict[str, int] = field(default_factory=dict)
    number_joiner: str = ""  # "one hundred and five"


_EN_UNITS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_EN_TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]

# Every language's table in one place; a language without one has no spoken commands (the face says so).
COMMAND_TABLES: dict[str, CommandTable] = {
    "en": CommandTable(
        language="en",
        commands=(
            Command("comma", ("comma",), "mark", ","),
            Command("period", ("period", "full stop"), "mark", ".", ordinary=True),
            Command("question mark", ("question mark",), "mark", "?"),
            Command("exclamation mark", ("exclamation mark", "exclamation point"), "mark", "!"),
            Command("colon", ("colon",), "mark", ":", ordinary=True),
            Command("semicolon", ("semicolon", "semi colon"), "mark", ";"),
            Command("new line", ("new line",), "newline", "\n", ordinary=True),
            Command("new paragraph", ("new paragraph",), "newline", "\n\n"),
            Command("open quote", ("open quote", "begin quote", "quote unquote"), "open_quote", '"'),
            Command("close quote", ("close quote", "end quote", "unquote"), "close_quote", '"'),
            Command("dash", ("dash",), "dash", "–", ordinary=True),
            Command("scratch that", ("scratch that", "delete that"), "scratch"),
            Command("undo", ("undo", "undo that"), "undo", ordinary=True),
        ),
        determiners=frozenset(
            [
                "a",
                "an",
                "the",
                "this",
                "that",
                "these",
                "those",
                "each",
                "every",
                "any",
                "some",
                "no",
                "one",
                "my",
                "your",
                "his",
                "her",
                "its",
                "our",
                "their",
                "long",
                "short",
                "whole",
                "same",
                "first",
                "last",
            ]
        ),
        units={word: value for value, word in enumerate(_EN_UNITS)},
        tens={word: 20 + 10 * index for index, word in enumerate(_EN_TENS)},
        scales={"hundred": 100, "thousand": 1000, "million": 1_000_000},
        number_joiner="and",
    ),
}


def command_table(language: str | None) -> CommandTable | None:
    """The commands for ``language`` ("en", "en-US"); None when there are none for it yet."""
    if not language:
        return None
    return COMMAND_TABLES.get(language.lower().split("-")[0].split("_")[0])


# --------------------------------------------------------------------------------------------------------------
# Words of a final


@dataclass(frozen=True)
class _Token:
    text: str  # as Whisper wrote it, without the space before: "Friday," "semi-colon."
    start: float | None = None
    end: float | None = None

    @property
    def key(self) -> str:
        """The letters alone, lower case: "Semi-colon." -> "semicolon"."""
        return re.sub(r"[\W_]+", "", self.text.lower())

    @property
    def trailing(self) -> str:
        """Whisper's punctuation after the word."""
        match = re.search(r"[^\w\"')\]]*$", self.text)
        return match.group(0) if match else ""


def _tokens(text: str, words: Sequence[Word]) -> list[_Token]:
    """The final's words; a piece Whisper wrote without a space before it ("-operated") joins the word before."""
    if not words:
        return [_Token(part) for part in text.split()]
    tokens: list[_Token] = []
    for word in words:
        piece = word.word
        if tokens and piece and not piece[0].isspace():
            last = tokens[-1]
            tokens[-1] = _Token(last.text + piece.strip(), last.start, word.end)
        elif piece.strip():
            tokens.append(_Token(piece.strip(), word.start, word.end))
    return tokens


# --------------------------------------------------------------------------------------------------------------
# The document and its history


@dataclass(frozen=True)
class Edit:
    """One final's change to the document: take back ``erase`` characters at the cursor, then type ``text``.
    ``actions`` name the commands it carried out ("[comma]", "⌫ scratch that"); ``shown`` is the final as the
    face shows it, each command's label where it was said."""

    erase: int
    text: str
    actions: tuple[str, ...] = ()
    shown: str = ""

    def to_json(self) -> dict[str, object]:
        return {"type": "edit", "erase": self.erase, "text": self.text, "actions": list(self.actions)}


@dataclass
class _Step:
    """One change at the end of the document: ``removed`` was taken off its end, then ``added`` put there."""

    kind: Literal["text", "command", "scratch"]
    removed: str
    added: str
    final: int  # which final it came from
    label: str = ""
    restores: list[_Step] = field(default_factory=list)  # a scratch's steps, put back by its undo


@dataclass(frozen=True)
class TextRules:
    """What the editor does to finals: spoken commands (with their language's table), numbers as digits, and
    replacements (heard -> typed)."""

    commands: bool = False
    numbers: bool = False
    replacements: tuple[Replacement, ...] = ()
    language: str | None = "en"

    @property
    def active(self) -> bool:
        return self.commands or self.numbers or bool(self.replacements)


class DictationEditor:
    """The document one dictation output has typed, changed final by final. Not thread-safe: one thread (the
    dictation worker's) applies the finals."""

    def __init__(self, rules: TextRules | None = None) -> None:
        self.rules = rules or TextRules()
        self._document = ""
        self._log: list[_Step] = []
        self._finals = 0
        self._capitalize_next = False  # a spoken sentence end: the next word starts a sentence
        self._lower_next = False  # Whisper's own sentence end next to a spoken comma was dropped
        self._glue_next = False  # after an opening quote: no space before the next word
        self._held: list[_Token] = []  # a final's last word that may begin a command the next final ends
        self._low = 0  # the shortest the document was during the final being applied

    @property
    def document(self) -> str:
        return self._document

    @property
    def holding(self) -> str:
        """The word held back for the next final ("" when none)."""
        return " ".join(token.text for token in self._held)

    def finish(self) -> Edit:
        """The dictation stopped: a word held back is typed as it stands (a command when it is one)."""
        if not self._held:
            return Edit(0, "")
        self._finals -= 1  # the held word belongs to the last final
        return self.apply("", at_pause=True)

    @property
    def table(self) -> CommandTable | None:
        return command_table(self.rules.language)

    def apply(self, text: str, words: Sequence[Word] = (), *, at_pause: bool = True) -> Edit:
        """The edit a final makes. ``words`` (with their times) mark pauses; ``at_pause``: the speaker paused
        after the final's last word (a final of plain text, without that knowledge, is taken as whole)."""
        before = self._document
        self._low = len(before)  # every change is at the end: the text before the lowest point stays
        self._finals += 1
        tokens = self._held + _tokens(text, words)
        self._held = []
        table = self.table if self.rules.commands else None
        if table is not None and not at_pause and tokens and _may_continue(table, tokens):
            # The speaker went on: Whisper's agreement may have cut "delete | that" or "period | new
            # paragraph" into two finals. The word waits for the next final (or finish()).
            self._held = [tokens.pop()]
        actions: list[str] = []
        shown: list[_Step | str] = []  # text steps (read at the end: a mark trims Whisper's comma off them)
        plain: list[_Token] = []
        index = 0
        previous_command = False
        while index < len(tokens):
            found = _match(table, tokens, index, at_pause, previous_command) if table is not None else None
            if found is None:
                plain.append(tokens[index])
                index += 1
                previous_command = False
                continue
            command, end = found
            if plain:
                shown.append(self._add_text(plain))
                plain = []
            label = self._run(command, tokens[end - 1])
            actions.append(label)
            shown.append(label.split(":")[0])  # the words a scratch took back are in the final itself
            index = end
            previous_command = True
        if plain:
            shown.append(self._add_text(plain))
        after = self._document
        common = self._low
        limit = min(len(before), len(after))
        while common < limit and before[common] == after[common]:
            common += 1
        parts = [part.added.strip() if isinstance(part, _Step) else part for part in shown]
        return Edit(len(before) - common, after[common:], tuple(actions), " ".join(part for part in parts if part))

    # ---- text

    def _add_text(self, tokens: list[_Token]) -> _Step | str:
        words = [token.text for token in tokens]
        table = self.table
        if self.rules.numbers and table is not None:
            words = _digits(words, table)
        text = " ".join(words)
        for replacement in self.rules.replacements:
            text = replacement.apply(text)
        text = re.sub(r"\s{2,}", " ", text).strip()
        if not text:
            return ""
        if self._capitalize_next:
            text = text[0].upper() + text[1:]
        elif self._lower_next and _title_word(text.split()[0]):
            text = text[0].lower() + text[1:]
        self._capitalize_next = self._lower_next = False
        document = self._document
        if document and not document[-1].isspace() and not self._glue_next:
            text = " " + text
        self._glue_next = False
        step = _Step("text", "", text, self._finals)
        self._push(step)
        return step

    # ---- commands

    def _run(self, command: Command, spoken: _Token) -> str:
        """Carry out ``command`` (``spoken``: its last word as Whisper wrote it); returns its label."""
        label = f"[{command.name}]"
        action = command.action
        if action == "scratch":
            return self._scratch(command)
        if action == "undo":
            return self._undo()
        removed = ""
        whisper_ended = any(mark in spoken.trailing for mark in _SENTENCE_ENDS)
        document = self._document
        glue = self._glue_next
        self._glue_next = False
        after_text = bool(self._log) and self._log[-1].kind == "text"
        if action == "mark" and after_text:
            # Whisper's own punctuation before the spoken mark goes ("Hello, comma" -> "Hello,").
            removed = document[len(document.rstrip(_WHISPER_MARKS)) :]
            whisper_ended = whisper_ended or any(mark in removed for mark in _SENTENCE_ENDS)
        elif action != "mark" and after_text and document.endswith(","):
            # Before a new line, a quote or a dash, Whisper's comma only marked the pause before the command.
            removed = ","
        if removed:
            # Taken off the text step itself: undoing the command then takes back only what was said.
            self._log[-1].added = self._log[-1].added[: len(self._log[-1].added) - len(removed)]
            document = self._document = document[: len(document) - len(removed)]
            self._low = min(self._low, len(document))
        if action == "open_quote":
            added = command.text if not document or document[-1].isspace() or glue else " " + command.text
            self._glue_next = True
        elif action == "dash":
            added = (" " if document and not document[-1].isspace() else "") + command.text
        else:  # a mark, a new line, a closing quote: right after the text
            added = command.text
        ends_sentence = command.text in _SENTENCE_ENDS or command.text == "\n\n"
        self._capitalize_next = ends_sentence
        self._lower_next = not ends_sentence and action in ("mark", "dash") and whisper_ended
        self._push(_Step("command", "", added, self._finals, label))
        return label

    def _scratch(self, command: Command) -> str:
        """Take back the last sentence (the last final's text and the start of its sentence in earlier ones);
        said within a final after words of it, those words (their last sentence) since the final's last command:
        a replay that runs utterances together makes one long final."""
        before = self._document
        top = self._log[-1] if self._log else None
        if top is not None and top.kind == "text" and top.final == self._finals:
            self._log.pop()
            self._revert(top)
            kept = _before_last_sentence(top.added)
            steps = [top]
            if kept:
                self._push(_Step("text", top.removed, kept, top.final))
                steps = [_Step("text", "", top.added[len(kept) :], top.final)]
        else:
            steps = self._take_back_sentence()
        if not steps:
            return f"⌫ {command.name}: nothing to take back"
        gone = before[len(self._document) :] if before.startswith(self._document) else ""
        self._log.append(_Step("scratch", gone, "", self._finals, f"⌫ {command.name}", restores=steps))
        # What is said next starts a sentence where the text now ends one (Whisper wrote it mid-sentence).
        rest = self._document.rstrip(" ")
        self._capitalize_next = not rest or rest[-1] in _SENTENCE_ENDS or rest.endswith("\n")
        self._lower_next = self._glue_next = False
        return f"⌫ {command.name}" + (f": {gone.strip()}" if gone.strip() else "")

    def _take_back_sentence(self) -> list[_Step]:
        """Take the newest final's steps off the document, and the start of its sentence where earlier finals
        hold it (agreement makes a sentence's first words final while it is still said); returns what went."""
        steps = self._last_group()
        for step in reversed(steps):
            self._revert(step)
        while steps and self._mid_sentence() and self._log and self._log[-1].kind == "text":
            top = self._log.pop()
            self._revert(top)
            kept = _before_last_sentence(top.added)
            if kept:
                self._push(_Step("text", top.removed, kept, top.final))
                steps.insert(0, _Step("text", "", top.added[len(kept) :], top.final))
                break
            steps.insert(0, top)
        return steps

    def _mid_sentence(self) -> bool:
        """Whether the document ends inside a sentence (not after ".", "?", "!", a new line, or nothing)."""
        rest = self._document.rstrip(" ")
        return bool(rest) and rest[-1] not in _SENTENCE_ENDS and not rest.endswith("\n")

    def _undo(self) -> str:
        """Take back the last command's effect (a scratch's undo puts its text back), or the last sentence."""
        if not self._log:
            return "↶ undo: nothing to undo"
        top = self._log[-1]
        if top.kind == "text":
            steps = self._take_back_sentence()
            what = "".join(step.added for step in steps).strip()
        else:
            self._log.pop()
            self._revert(top)
            self._log.extend(top.restores)
            what = top.label or ("⌫ " + top.removed.strip())
        self._capitalize_next = self._lower_next = self._glue_next = False
        return f"↶ undo: {what}" if what else "↶ undo"

    def _last_group(self) -> list[_Step]:
        """The newest final's steps still in the document: the text and command steps at the top of the log
        (under any scratches, which left the document as it was before what they took back)."""
        top = len(self._log)
        while top and self._log[top - 1].kind == "scratch":
            top -= 1
        if not top:
            return []
        final = self._log[top - 1].final
        first = top
        while first and self._log[first - 1].kind != "scratch" and self._log[first - 1].final == final:
            first -= 1
        steps = self._log[first:top]
        del self._log[first:top]
        return steps

    def _revert(self, step: _Step) -> None:
        document = self._document
        if step.added and not document.endswith(step.added):  # never happens while the log is consistent
            raise RuntimeError("the dictation document does not end with the step taken back")
        self._document = document[: len(document) - len(step.added)] + step.removed
        self._low = min(self._low, len(document) - len(step.added))

    def _push(self, step: _Step) -> None:
        document = self._document
        self._document = document[: len(document) - len(step.removed)] + step.added
        self._low = min(self._low, len(document) - len(step.removed))
        self._log.append(step)


def _may_continue(table: CommandTable, tokens: list[_Token]) -> bool:
    """Whether the last token may be a command that the next final completes or confirms: the first word of a
    phrase ("delete", "new"), or an ordinary command word ("period") that a command after it would make one."""
    last = tokens[-1]
    if last.trailing:
        return False
    key = last.key
    for command in table.commands:
        for phrase in command.phrases:
            parts = phrase.split()
            if len(parts) > 1 and parts[0] == key:
                return True
            if command.ordinary and command.action != "undo" and parts == [key]:
                before = tokens[-2] if len(tokens) > 1 else None
                return before is None or bool(before.trailing) or before.key not in table.determiners
    return False


def _before_last_sentence(text: str) -> str:
    """``text`` up to its last sentence end that more words follow ("A. B, C" -> "A."); "" when none."""
    match = re.match(r"(.*[.?!])\s+\S", text, re.DOTALL)
    return match.group(1) if match else ""


def _title_word(word: str) -> bool:
    """A word Whisper capitalised as a sentence's first (not "I", not an acronym like "NASA")."""
    letters = re.sub(r"\W+", "", word)
    return len(letters) > 1 and letters[0].isupper() and letters[1:].islower() and not letters.startswith("I'")


def _match(
    table: CommandTable, tokens: list[_Token], index: int, at_pause: bool, previous_command: bool
) -> tuple[Command, int] | None:
    """The command said at ``tokens[index]`` and the index after its words, if it is one here."""
    found = _phrase_at(table, tokens, index)
    if found is None:
        return None
    command, end = found
    if command.action == "undo":
        # "Undo" is an everyday verb: a command only when it is all the speaker said.
        return found if index == 0 and end == len(tokens) and at_pause else None
    if not command.ordinary:
        return found
    before = tokens[index - 1] if index > 0 else None
    if before is not None and not before.trailing and before.key in table.determiners:
        return None  # "a period of time", "the colon", "a new line of products"
    last = tokens[end - 1]
    if end == len(tokens):
        after = at_pause
    else:
        following = tokens[end]
        gap = (
            following.start - last.end if following.start is not None and last.end is not None else 0.0
        )  # Whisper's timings: a pause after the word
        after = gap >= PAUSE_S or _phrase_at(table, tokens, end) is not None
    boundary = after or bool(last.trailing) or previous_command
    return found if boundary else None


def _phrase_at(table: CommandTable, tokens: list[_Token], index: int) -> tuple[Command, int] | None:
    """The longest command phrase whose words are the tokens from ``index`` (by their letters)."""
    best: tuple[Command, int] | None = None
    for command in table.commands:
        for phrase in command.phrases:
            parts = phrase.split()
            count = len(parts)
            keys = [token.key for token in tokens[index : index + count]]
            if keys == parts and (best is None or index + count > best[1]):
                # Whisper's punctuation inside a phrase ("question, mark") is fine; a sentence end is not.
                inner = tokens[index : index + count - 1]
                if not any(mark in token.trailing for token in inner for mark in _SENTENCE_ENDS):
                    best = (command, index + count)
            if count > 1 and index < len(tokens) and tokens[index].key == "".join(parts) and best is None:
                best = (command, index + 1)  # "semi-colon", "Newline"
    return best


# --------------------------------------------------------------------------------------------------------------
# Numbers


def _digits(words: list[str], table: CommandTable) -> list[str]:
    """Numbers said as words written as digits ("twenty three" -> "23"); a lone "one" stays a word."""
    result: list[str] = []
    index = 0
    while index < len(words):
        end, value = _number_at(words, index, table)
        if end == index:
            result.append(words[index])
            index += 1
            continue
        trailing = re.search(r"[^\w]*$", words[end - 1])
        result.append(str(value) + (trailing.group(0) if trailing else ""))
        index = end
    return result


def _number_at(words: list[str], index: int, table: CommandTable) -> tuple[int, int]:
    """(index after the number, its value) for the number words from ``index``; (index, 0) when none."""
    total = current = 0
    end = index
    last_kind = ""
    position = index
    while position < len(words):
        word = words[position]
        key = re.sub(r"[\W_]+", "", word.lower())
        if key == table.number_joiner and last_kind == "scale" and position + 1 < len(words):
            position += 1
            continue
        if key in table.units:
            if last_kind in ("unit", "teen") or (last_kind == "tens" and table.units[key] >= 10):
                break  # "two three" are two numbers, said one after the other
            current += table.units[key]
            last_kind = "teen" if table.units[key] >= 10 else "unit"
        elif key in table.tens:
            if last_kind in ("unit", "teen", "tens"):
                break
            current += table.tens[key]
            last_kind = "tens"
        elif key in table.scales and last_kind:
            scale = table.scales[key]
            if scale == 100:
                current = max(current, 1) * 100
            else:
                total += max(current, 1) * scale
                current = 0
            last_kind = "scale"
        else:
            break
        position += 1
        end = position
        if re.search(r"[^\w]$", word):
            break  # punctuation ends the number
    if end == index:
        return index, 0
    said = [re.sub(r"[\W_]+", "", w.lower()) for w in words[index:end]]
    if said == ["one"]:
        return index, 0
    return end, total + current

"""Spoken punctuation and commands, numbers and replacements: the text rules on finals written here as Whisper
writes them (its own punctuation and capitals around the command words), with the trap cases where a command
word is meant as a word. Recordings with spoken punctuation are in test_spoken_commands.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.dictation.commands import DictationEditor, Edit, TextRules, command_table
from app.core.dictation.vocabulary import (
    Replacement,
    VocabularyError,
    load_replacements,
    load_vocabulary,
    parse_replacements,
    parse_vocabulary,
)
from app.core.transcript.document import Word

COMMANDS = TextRules(commands=True)


def typed(*finals: str, rules: TextRules = COMMANDS) -> str:
    """The document after these finals, each ended by a pause; checked against replaying its edits."""
    editor = DictationEditor(rules)
    screen = ""
    for final in finals:
        edit = editor.apply(final)
        screen = replayed(screen, edit)
    assert screen == editor.document
    return editor.document


def replayed(screen: str, edit: Edit) -> str:
    """What a target program shows after the edit's BackSpaces and keys."""
    assert 0 <= edit.erase <= len(screen)
    return screen[: len(screen) - edit.erase] + edit.text


def timed(*pieces: tuple[str, float, float]) -> list[Word]:
    return [Word(start, end, text, 0.9) for text, start, end in pieces]


# ------------------------------------------------------------------------------------------------ punctuation


@pytest.mark.parametrize(
    ("final", "expected"),
    [
        ("Hello, comma, how are you? Question mark.", "Hello, how are you?"),
        ("Dear team comma the meeting is moved to Friday.", "Dear team, the meeting is moved to Friday."),
        # Whisper's own sentence end next to a spoken comma goes, and the capital it gave the next word.
        ("Hello. Comma. How are you?", "Hello, how are you?"),
        ("We won exclamation mark", "We won!"),
        ("We won, exclamation point.", "We won!"),
        ("Three items, colon, apples semicolon pears full stop", "Three items: apples; pears."),
        (
            "The list is commerce-operated semi-colon. The values are red.",
            "The list is commerce-operated; the values are red.",
        ),
        ("He said, open quote, hello, close quote, period.", 'He said "hello".'),
        ("Milk, new line, eggs, new paragraph, that's all", "Milk\neggs\n\nThat's all"),
        ("Wait, dash, what", "Wait – what"),
        ("Comma", ","),
    ],
)
def test_spoken_punctuation_in_whispers_own_writing(final: str, expected: str) -> None:
    assert typed(final) == expected


@pytest.mark.parametrize(
    "final",
    [
        "I waited for a period of time.",
        "It lasted a period of time",
        "We launched a new line of products.",
        "The colon is part of the gut.",
        "Please send a comma-separated list.",
        "That was the period.",
        "Undo the last change.",
        "I can undo it.",
        "A dash of salt.",
        "Colon cancer screening saves lives.",
        "Three items colon apples",  # nothing sets "colon" apart: no pause, no punctuation, no command by it
    ],
)
def test_trap_cases_stay_words(final: str) -> None:
    """What a person means as words stays words: after an article, or not set apart from the words around it
    (no pause, no punctuation, no command next to it); "undo" only alone."""
    assert typed(final) == final


def test_an_ordinary_command_word_acts_at_a_pause_in_the_word_timings() -> None:
    """Whisper wrote no punctuation; the timings show a pause after "period" in one final and none in the
    other: only the first is a full stop."""
    paused = timed(
        (" I", 0.0, 0.2), (" left", 0.2, 0.5), (" period", 0.5, 0.9), (" then", 1.4, 1.6), (" went", 1.6, 2.0)
    )
    running = timed((" a", 0.0, 0.1), (" new", 0.1, 0.3), (" line", 0.3, 0.6), (" of", 0.62, 0.7), (" cars", 0.7, 1.0))
    editor = DictationEditor(COMMANDS)
    editor.apply("I left period then went", paused, at_pause=True)
    assert editor.document == "I left. Then went"
    editor = DictationEditor(COMMANDS)
    editor.apply("a new line of cars", running, at_pause=True)
    assert editor.document == "a new line of cars"


def test_a_command_word_at_the_end_of_a_final_the_speaker_went_on_after() -> None:
    """Agreement commits words while the person speaks: "I waited for a period" is such a final (no pause
    after it); "period" there is a word. The same word ending a final at a pause is a full stop."""
    editor = DictationEditor(COMMANDS)
    editor.apply("I waited for a period", at_pause=False)
    editor.apply("of time.", at_pause=True)
    assert editor.document == "I waited for a period of time."
    editor = DictationEditor(COMMANDS)
    editor.apply("We are done period", at_pause=True)
    assert editor.document == "We are done."


def test_a_command_cut_in_two_by_agreement_is_put_together() -> None:
    """ "delete | that" and "Friday period | new paragraph" arrive as two finals: the first word waits for
    the next final, and the command acts; a word that turns out to be a word is typed with the next final."""
    editor = DictationEditor(COMMANDS)
    screen = replayed("", editor.apply("Send it to Anna.", at_pause=True))
    first = editor.apply("Delete", at_pause=False)
    assert first == Edit(0, "", (), "")  # held back: nothing typed yet
    screen = replayed(screen, first)
    gone = editor.apply("that.", at_pause=True)
    assert gone.erase == len("Send it to Anna.") and gone.text == ""
    screen = replayed(screen, gone)
    screen = replayed(screen, editor.apply("The meeting is on Friday period", at_pause=False))
    assert screen == "The meeting is on Friday"
    screen = replayed(screen, editor.apply("new paragraph. Please come.", at_pause=True))
    assert screen == editor.document == "The meeting is on Friday.\n\nPlease come."
    screen = replayed(screen, editor.apply("We open", at_pause=False))
    screen = replayed(screen, editor.apply("the doors at nine.", at_pause=True))
    assert screen.endswith("Please come. We open the doors at nine.")
    # A held word is typed when the dictation stops.
    screen = replayed(screen, editor.apply("Brand new", at_pause=False))
    assert editor.holding == "new"
    screen = replayed(screen, editor.finish())
    assert screen == editor.document and screen.endswith("nine. Brand new")


def test_a_mark_said_after_a_pause_replaces_whispers_own_with_the_fewest_keys() -> None:
    """ "Please bring the reports." was typed; "Question mark." arrives as the next final: one BackSpace for
    Whisper's full stop, then "?"."""
    editor = DictationEditor(COMMANDS)
    assert editor.apply("Please bring the reports.") == Edit(
        0, "Please bring the reports.", (), "Please bring the reports."
    )
    assert editor.apply("Question mark.") == Edit(1, "?", ("[question mark]",), "[question mark]")
    assert editor.apply("New paragraph.").text == "\n\n"
    assert editor.apply("thanks").text == "Thanks"


def test_a_final_is_shown_with_its_commands_as_labels() -> None:
    """What the CLI prints and a panel shows: the words as typed, each command's label where it was said."""
    editor = DictationEditor(COMMANDS)
    assert (
        editor.apply("Hello, comma, how are you? Question mark.").shown == "Hello [comma] how are you [question mark]"
    )
    edit = editor.apply("Send it to Anna, scratch that, send it to Maria, period.")
    assert edit.shown == "Send it to Anna, ⌫ scratch that Send it to Maria [period]"
    assert edit.actions == ("⌫ scratch that: Send it to Anna,", "[period]")


# ------------------------------------------------------------------------------------------------ scratch, undo


def test_scratch_that_takes_back_the_last_final_exactly() -> None:
    editor = DictationEditor(COMMANDS)
    screen = replayed("", editor.apply("Keep this."))
    screen = replayed(screen, editor.apply("Drop this one."))
    edit = editor.apply("Scratch that.")
    assert edit.erase == len(" Drop this one.") and edit.text == ""
    assert edit.actions == ("⌫ scratch that: Drop this one.",)
    screen = replayed(screen, edit)
    assert screen == "Keep this."
    screen = replayed(screen, editor.apply("delete that"))
    assert screen == ""
    screen = replayed(screen, editor.apply("Scratch that."))  # nothing left: nothing taken back
    assert screen == "" and editor.document == ""


def test_scratch_that_takes_back_a_sentence_that_came_in_several_finals() -> None:
    """Agreement makes a sentence's first words final while it is still said: "scratch that" takes the whole
    sentence back, not only its last final, and no more; undo puts it back."""
    editor = DictationEditor(COMMANDS)
    screen = replayed("", editor.apply("Keep this."))
    screen = replayed(screen, editor.apply("Send the report", at_pause=False))
    screen = replayed(screen, editor.apply("to Anna."))
    edit = editor.apply("Scratch that.")
    assert edit.actions == ("⌫ scratch that: Send the report to Anna.",)
    screen = replayed(screen, edit)
    assert screen == "Keep this." and editor.document == screen
    screen = replayed(screen, editor.apply("Undo."))
    assert screen == "Keep this. Send the report to Anna." and editor.document == screen
    # The sentence began inside an earlier final: that final's sentences before it stay.
    editor = DictationEditor(COMMANDS)
    screen = replayed("", editor.apply("Bring the reports. Send the", at_pause=False))
    screen = replayed(screen, editor.apply("report to Anna."))
    screen = replayed(screen, editor.apply("scratch that"))
    assert screen == "Bring the reports." and editor.document == screen
    screen = replayed(screen, editor.apply("undo"))
    assert screen == "Bring the reports. Send the report to Anna." and editor.document == screen
    # Undo said after text takes back its sentence the same way.
    undo = editor.apply("Undo.")
    assert undo.actions == ("↶ undo: Send the report to Anna.",)
    screen = replayed(screen, undo)
    assert screen == "Bring the reports." and editor.document == screen


def test_scratch_that_inside_a_final_takes_back_the_words_before_it() -> None:
    assert typed("Send it to Anna, scratch that, send it to Maria period.") == "Send it to Maria."
    # A replay that ran two utterances into one final: only the last sentence before it goes.
    assert typed("Bring the reports. Send it to Anna, scratch that.") == "Bring the reports."
    assert typed("Dear team.", "Bring the reports question mark send it to Anna scratch that") == (
        "Dear team. Bring the reports?"
    )


def test_undo_takes_back_the_last_command_or_final_and_brings_scratched_text_back() -> None:
    editor = DictationEditor(COMMANDS)
    screen = ""
    for final in ("Dear team, comma", "the meeting is moved.", "Scratch that.", "Undo."):
        screen = replayed(screen, editor.apply(final))
    assert screen == "Dear team, the meeting is moved."
    undo = editor.apply("Undo.")  # the last final (its text) goes
    screen = replayed(screen, undo)
    assert screen == "Dear team,"
    screen = replayed(screen, editor.apply("undo"))  # then the spoken comma
    assert screen == "Dear team"
    screen = replayed(screen, editor.apply("undo"))
    screen = replayed(screen, editor.apply("undo"))  # nothing left to undo
    assert screen == "" and editor.document == ""


def test_commands_off_types_every_word() -> None:
    assert typed("Hello comma how are you question mark", rules=TextRules()) == "Hello comma how are you question mark"
    assert typed("First.", "Scratch that.", rules=TextRules()) == "First. Scratch that."


def test_commands_exist_for_english_only_and_say_so() -> None:
    assert command_table("en") is not None and command_table("en-GB") is not None
    assert command_table("de") is None and command_table(None) is None
    assert typed("Hallo comma wie geht's", rules=TextRules(commands=True, language="de")) == "Hallo comma wie geht's"


# ------------------------------------------------------------------------------------------------ numbers


@pytest.mark.parametrize(
    ("final", "expected"),
    [
        ("I need twenty three apples.", "I need 23 apples."),
        ("one hundred and five pears", "105 pears"),
        ("It costs two thousand twenty four dollars", "It costs 2024 dollars"),
        ("One of them is here", "One of them is here"),
        ("Call two three four", "Call 2 3 4"),
        ("seventeen, eighteen", "17, 18"),
        ("a hundred people", "a hundred people"),
    ],
)
def test_numbers_as_digits_when_asked(final: str, expected: str) -> None:
    assert typed(final, rules=TextRules(numbers=True)) == expected
    assert typed(final, rules=TextRules()) == final


# ------------------------------------------------------------------------------------------------ replacements


def test_replacements_whole_words_any_case_after_commands() -> None:
    rules, problems = parse_replacements(
        "# my words\nat sign -> @\ncooper netties -> Kubernetes   # the cluster\nperiod -> era\n\nScriba->Scriba\n",
        "words.txt",
    )
    assert problems == []
    chosen = TextRules(commands=True, replacements=rules)
    assert (
        typed("Write to me at sign home, Cooper, Netties rocks.", rules=chosen)
        == "Write to me @ home, Kubernetes rocks."
    )
    # Whole words only: "signal", "Catsign" stay.
    assert typed("at signal and Catsign", rules=chosen) == "at signal and Catsign"
    # Commands first: the spoken full stop is a full stop; "period" meant as a word is replaced.
    assert typed("It was a period of peace period", rules=chosen) == "It was a era of peace."


def test_a_bad_line_is_named_and_the_rest_loads(tmp_path: Path) -> None:
    path = tmp_path / "dictation-replacements.txt"
    path.write_text("at sign -> @\nno arrow here\n -> nothing heard\nfoo -> bar -> baz\nscriba -> Scriba\n", "utf-8")
    rules, problems = load_replacements(path, missing_ok=False)
    assert [(rule.heard, rule.typed) for rule in rules] == [("at sign", "@"), ("scriba", "Scriba")]
    assert len(problems) == 3
    assert problems[0].startswith(f"{path}, line 2: no '->'")
    assert problems[1].startswith(f"{path}, line 3: nothing before '->'")
    assert problems[2].startswith(f"{path}, line 4: more than one '->'")


def test_replacement_files_that_cannot_be_read(tmp_path: Path) -> None:
    assert load_replacements(tmp_path / "absent.txt", missing_ok=True) == ((), [])
    with pytest.raises(VocabularyError, match=r"absent\.txt does not exist"):
        load_replacements(tmp_path / "absent.txt", missing_ok=False)
    latin = tmp_path / "latin.txt"
    latin.write_bytes("caf\xe9 -> cafe\n".encode("latin-1"))
    with pytest.raises(VocabularyError, match=r"latin\.txt is not UTF-8"):
        load_replacements(latin, missing_ok=False)


def test_longer_phrases_win_and_vocabulary_lists() -> None:
    rules, _ = parse_replacements("new york -> NY\nnew york city -> NYC\n", "r.txt")
    assert typed("I love New York City and New York.", rules=TextRules(replacements=rules)) == "I love NYC and NY."
    assert rules[0] == Replacement("new york city", "NYC")
    assert parse_vocabulary("Scriba, Kubernetes\n# names\nAnna Karenina ,scriba\n\n") == (
        "Scriba",
        "Kubernetes",
        "Anna Karenina",
    )


def test_vocabulary_file(tmp_path: Path) -> None:
    path = tmp_path / "dictation-vocabulary.txt"
    path.write_text("Scriba\nKubernetes, kubectl\n", "utf-8")
    assert load_vocabulary(path, missing_ok=False) == ("Scriba", "Kubernetes", "kubectl")
    assert load_vocabulary(tmp_path / "none.txt", missing_ok=True) == ()

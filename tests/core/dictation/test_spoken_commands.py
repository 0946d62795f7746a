"""Spoken punctuation and commands on recordings: espeak-ng prompts with the command words said between the
sentences (a breath of 0.4 s around them, as a person sets a command apart), replayed in real time through the
dictation controller with the bundled tiny.en, and the document its edits type checked by punctuation at the
places the prompt puts it. `scriba dictate --commands --replacements` runs on one too."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.core.dictation.commands import DictationEditor, Edit
from app.core.dictation.controller import DictationController, Edited, RunEnded, text_rules
from app.core.dictation.decoding import StreamingVad, WhisperDecoder, cut_loop, load_warm_decoder, looping
from app.core.dictation.sources import ArraySource
from app.core.dictation.stream import DictationOptions, DictationStream
from app.core.engine.audio import SAMPLE_RATE
from app.core.transcript.document import Word
from tests import synth
from tests.core.dictation.test_dictation_controller import WAIT_S, Events

ROOT = Path(__file__).resolve().parents[3]
BREATH_S = 0.4  # around a command: shorter than the silence that ends an utterance (0.5 s)
COMMAND_WORDS = ("period", "paragraph", "question", "exclamation", "full stop", "new line", "comma", "delete")


def prompt(*pieces: str | float, voice: int = 0, speed: int = 165) -> np.ndarray:
    """Speech and silences (seconds) one after another, after half a second of silence and before 1.5 s."""
    name, pitch = synth.VOICES[voice]
    parts = [np.zeros(SAMPLE_RATE // 2, dtype=np.float32)]
    for piece in pieces:
        if isinstance(piece, float):
            parts.append(np.zeros(int(piece * SAMPLE_RATE), dtype=np.float32))
        else:
            parts.append(synth.speak(piece, name, pitch, speed) * 0.8)
    parts.append(np.zeros(int(1.5 * SAMPLE_RATE), dtype=np.float32))
    return np.concatenate(parts)


def dictated(samples: np.ndarray, options: DictationOptions) -> tuple[str, list[str], list[Edit]]:
    """The document the run's edits type (applied one after another as a target program would show them),
    the commands carried out, and the edits."""
    events = Events()
    controller = DictationController(
        options,
        events,
        source_factory=lambda _device: ArraySource(samples, realtime=True),
        stop_at_end=True,
    )
    try:
        assert controller.start()
        events.wait_for(lambda seen: any(isinstance(e, RunEnded) for e in seen))
    finally:
        controller.close(WAIT_S)
    edits = [e.edit for e in events.of(Edited)]
    screen = ""
    for edit in edits:
        assert 0 <= edit.erase <= len(screen), edit
        screen = screen[: len(screen) - edit.erase] + edit.text
    actions = [action for edit in edits for action in edit.actions]
    print(repr(screen), actions)
    return screen, actions, edits


@pytest.fixture(scope="module")
def decoder() -> WhisperDecoder:
    return load_warm_decoder(DictationOptions())


def streamed(
    samples: np.ndarray, options: DictationOptions, decoder: WhisperDecoder
) -> tuple[str, list[str], list[Edit]]:
    """As :func:`dictated`, without threads: the stream fed 50 ms blocks as a microphone delivers them (a
    decode whenever the audio so far makes one due, whatever the machine's speed), its finals through the
    editor as the controller passes them. The same audio gives the same finals on every run."""
    decoder.set_vocabulary(options.vocabulary)
    editor = DictationEditor(text_rules(options, "en"))
    stream = DictationStream(options, decoder, StreamingVad(options.vad_threshold, options.end_silence_s))
    block = SAMPLE_RATE // 20
    events = []
    for start in range(0, len(samples), block):
        events += stream.feed(samples[start : start + block])
    events += stream.flush()
    edits = [editor.apply(e.text, e.words, at_pause=e.at_pause) for e in events if e.type == "final"]
    edits.append(editor.finish())
    screen = ""
    for edit in edits:
        assert 0 <= edit.erase <= len(screen), edit
        screen = screen[: len(screen) - edit.erase] + edit.text
    assert screen == editor.document
    actions = [action for edit in edits for action in edit.actions]
    print([e.text for e in events if e.type == "final"], repr(screen), actions)
    streamed.finals = [e for e in events if e.type == "final"]  # type: ignore[attr-defined]
    return screen, actions, edits


def literal_commands(screen: str) -> list[str]:
    return [word for word in COMMAND_WORDS if word in screen.lower()]


@pytest.fixture(scope="module")
def letter(espeak: str) -> np.ndarray:
    return prompt(
        "Dear team",
        BREATH_S,
        "the meeting is moved to Friday",
        BREATH_S,
        "period",
        BREATH_S,
        "new paragraph",
        BREATH_S,
        "please bring the reports",
        BREATH_S,
        "question mark",
        1.0,
        "We won the game",
        BREATH_S,
        "exclamation mark",
        BREATH_S,
        "new line",
        BREATH_S,
        "see you soon",
        BREATH_S,
        "full stop",
    )


def test_spoken_punctuation_on_a_real_time_replay(letter: np.ndarray) -> None:
    screen, actions, _ = dictated(letter, DictationOptions(commands=True))
    assert actions == ["[period]", "[new paragraph]", "[question mark]", "[exclamation mark]", "[new line]", "[period]"]
    assert literal_commands(screen) == []
    assert re.search(r"Friday\.\n\n[A-Z]\w+", screen), screen
    assert re.search(r"reports\? We won", screen), screen
    assert re.search(r"game!\n\w", screen), screen
    assert screen.endswith("soon."), screen


def test_commands_off_types_the_command_words(letter: np.ndarray) -> None:
    """The same recording without --commands: the words are typed as heard (the switch is what acts)."""
    screen, actions, _ = dictated(letter, DictationOptions())
    assert actions == []
    assert {"period", "paragraph", "question", "exclamation"} <= set(literal_commands(screen)), screen


@pytest.mark.parametrize(("command", "voice"), [("delete that", 0), ("scratch that", 1)])
def test_scratch_that_on_a_replay_takes_back_the_last_sentence(
    espeak: str, decoder: WhisperDecoder, command: str, voice: int
) -> None:
    """The command said on its own between two sentences (a second's pause around it, at a slower pace that
    tiny.en hears espeak-ng's "that" at): the first sentence is taken back, exactly."""
    samples = prompt(
        "Send the report to Anna",
        1.0,
        command,
        1.0,
        "send the report to Maria",
        BREATH_S,
        "period",
        voice=voice,
        speed=130,
    )
    screen, actions, edits = streamed(samples, DictationOptions(commands=True), decoder)
    assert [action.split(":")[0] for action in actions] == ["⌫ scratch that", "[period]"], actions
    assert "anna" not in screen.lower() and "maria." in screen.lower(), screen
    assert literal_commands(screen) == [] and "that" not in screen.lower(), screen
    taken_back = [edit for edit in edits if edit.erase]
    assert len(taken_back) == 1 and taken_back[0].erase >= len("the report to Anna")


def pauses(samples: np.ndarray, shortest_s: float = 0.3) -> list[tuple[int, int]]:
    """(start, end) samples of the quiet stretches of a real recording, at least ``shortest_s`` long: 20 ms
    frames within 5 dB of its quietest tenth (a real room's noise floor, not digital silence)."""
    frame = SAMPLE_RATE // 50
    count = len(samples) // frame
    levels = 20 * np.log10(np.sqrt(np.mean(samples[: count * frame].reshape(count, frame) ** 2, axis=1)) + 1e-9)
    quiet = levels < np.percentile(levels, 10) + 5
    found, start = [], None
    for index, still in enumerate([*quiet, False]):
        if still and start is None:
            start = index
        elif not still and start is not None:
            if (index - start) * frame >= shortest_s * SAMPLE_RATE:
                found.append((start * frame, index * frame))
            start = None
    return found


def test_commands_spliced_into_a_real_reading(espeak: str, decoder: WhisperDecoder) -> None:
    """A real speaker's reading (mfa_en_spontaneous_a) cut at two of its own pauses, with espeak-ng saying
    "period", "new paragraph" between the parts and "question mark" after them: the two parts become two
    paragraphs, the first ending with a full stop, the second with a question mark, and the real speech
    itself sets off no command."""
    from app.core.engine.audio import decode_audio
    from tests.real_speech import real_speech_dir

    reading = decode_audio(real_speech_dir() / "mfa_en_spontaneous_a.wav").samples
    quiet = pauses(reading)
    first = next(pause for pause in quiet if pause[0] > 4 * SAMPLE_RATE)
    second = next(pause for pause in quiet if pause[0] > first[1] + 3 * SAMPLE_RATE)
    name, pitch = synth.VOICES[0]

    def said(text: str) -> np.ndarray:
        return synth.speak(text, name, pitch) * 0.8

    breath = np.zeros(int(BREATH_S * SAMPLE_RATE), dtype=np.float32)
    # A second's pause around the other voice: a person dictating sets the commands apart, and tiny.en heard
    # nothing of espeak-ng's words run straight into the reader's (they vanished from the final).
    apart = np.zeros(SAMPLE_RATE, dtype=np.float32)
    samples = np.concatenate(
        [
            reading[: first[0]],
            apart,
            said("period"),
            breath,
            said("new paragraph"),
            apart,
            reading[first[1] : second[0]],
            apart,
            said("question mark"),
            np.zeros(SAMPLE_RATE, dtype=np.float32),
        ]
    )
    screen, actions, _ = streamed(samples, DictationOptions(commands=True), decoder)
    assert actions == ["[period]", "[new paragraph]", "[question mark]"], screen
    paragraphs = screen.split("\n\n")
    assert len(paragraphs) == 2 and paragraphs[0].endswith(".") and paragraphs[1].endswith("?"), screen
    assert "acoustic" in paragraphs[0].lower() and literal_commands(screen) == [], screen


@pytest.mark.parametrize("name", ["mfa_en_spontaneous_a.wav", "mfa_en_spontaneous_b.wav"])
def test_real_speech_without_commands_sets_off_none(decoder: WhisperDecoder, name: str) -> None:
    """Two real readers who say no command words, dictated with --commands: nothing acts, and the typed text is
    the finals joined, word for word (also 0 commands on 702 words of six real recordings, sonnets and
    meetings included, when measured)."""
    from app.core.engine.audio import decode_audio
    from tests.real_speech import real_speech_dir

    screen, actions, edits = streamed(
        decode_audio(real_speech_dir() / name).samples, DictationOptions(commands=True), decoder
    )
    finals = streamed.finals  # type: ignore[attr-defined]
    assert actions == [] and all(edit.erase == 0 for edit in edits)
    assert screen == " ".join(final.text for final in finals) and len(screen.split()) > 40


def test_trap_words_on_a_replay_stay_words(espeak: str, decoder: WhisperDecoder) -> None:
    """Said straight through, "a period of time" and "a new line of products" are words, not commands."""
    samples = prompt("I waited for a period of time", 1.0, "We launched a new line of products")
    screen, actions, _ = streamed(samples, DictationOptions(commands=True), decoder)
    assert actions == [] and "\n" not in screen, screen
    # tiny.en hears "of" as "on" now and then; what matters is that no full stop or line came in between.
    assert re.search(r"\ba period o[fn] time\b", screen.lower()), screen
    assert re.search(r"\ba new \w+ o[fn] products\b", screen.lower()), screen


def test_finals_say_whether_the_speaker_paused_after_them(espeak: str, decoder: WhisperDecoder) -> None:
    """Two sentences a second apart, said straight through: the final that ends each sentence says the speaker
    paused after it; finals committed while the sentence went on (two hypotheses agreeing) say not, and the
    next final follows them without a pause."""
    samples = prompt("I waited for a long time and then I left the house", 1.0, "We launched a new line of products")
    streamed(samples, DictationOptions(), decoder)
    finals = streamed.finals  # type: ignore[attr-defined]
    assert finals[-1].at_pause
    running = [(final, after) for final, after in itertools.pairwise(finals) if not final.at_pause]
    assert running, [final.text for final in finals]  # agreement committed words while the speech went on
    for final, after in running:
        assert after.start - final.end < 0.5, (final.text, after.text)
    # The first sentence ends in a final that says the pause (1 s of silence in the recording).
    house = next(final for final in finals if "house" in final.text.lower())
    assert house.at_pause, [(final.text, final.at_pause) for final in finals]


def test_the_vocabulary_reaches_the_decoder(espeak: str, decoder: WhisperDecoder) -> None:
    """espeak-ng's "comma" is heard as "Karma" by tiny.en; with "comma" in the vocabulary (hotwords before
    each window) it is heard, and acts."""
    samples = prompt("Hello team", BREATH_S, "comma", BREATH_S, "how are you", BREATH_S, "question mark")
    plain, plain_actions, _ = streamed(samples, DictationOptions(commands=True), decoder)
    assert "[comma]" not in plain_actions, plain
    biased, actions, _ = streamed(samples, DictationOptions(commands=True, vocabulary=("comma",)), decoder)
    assert "[comma]" in actions and "comma" not in biased.lower(), biased
    assert re.search(r"\w, how are you\?$", biased), biased


def test_a_vocabulary_does_not_make_the_decoder_loop(decoder: WhisperDecoder) -> None:
    """Hotwords are text before the audio, and tiny.en then looped after a real reader's last word ("see you
    in the next video" five times: WER 0.76 against 0.14 without them); a window that loops is decoded again
    without the hotwords."""
    from app.core.engine.audio import decode_audio
    from tests import metrics
    from tests.real_speech import real_speech_dir

    path = real_speech_dir() / "mfa_en_spontaneous_a.wav"
    screen, _, _ = streamed(decode_audio(path).samples, DictationOptions(vocabulary=("Scriba", "Kubernetes")), decoder)
    assert not looping([Word(0, 0, f" {word}", 1.0) for word in screen.split()]), screen
    assert metrics.wer(path.with_suffix(".ref.txt").read_text(), screen) <= 0.25, screen


def test_looping_finds_a_phrase_said_three_times_over() -> None:
    def said(text: str) -> list[Word]:
        return [Word(0, 0, f" {word}", 1.0) for word in text.split()]

    assert looping(said("Thanks. See you in the next video, see you in the next video, see you in the next video"))
    assert looping(said("no no, no no. No no"))
    assert not looping(said("here are some more words words words words"))  # one word again: a person may
    assert not looping(said("see you in the next video, see you in the next video"))  # twice is speech


def test_a_loop_is_cut_after_its_first_time_round() -> None:
    def said(text: str) -> list[Word]:
        return [Word(0, 0, f" {word}", 1.0) for word in text.split()]

    def text(words: list[Word]) -> str:
        return " ".join(word.word.strip() for word in words)

    assert text(cut_loop(said("the exception of ah, ah, ah, ah, ah, ah, ah"))) == "the exception of ah, ah,"
    assert text(cut_loop(said("so here we go, here we go, here we go. here we"))) == "so here we go,"
    assert text(cut_loop(said("words words words and more"))) == "words words words and more"
    assert text(cut_loop(said("again and again and again"))) == "again and again and again"


@pytest.mark.parametrize(
    ("windows", "final"),
    [
        ([(40.2, 49.0), (40.2, 48.8), (40.2, 49.2), (39.6, 50.2)], True),
        ([(40.2, 48.4), (40.2, 48.2), (40.2, 48.6)], False),
    ],
    ids=["final", "partial"],
)
def test_a_window_that_loops_is_decoded_again_without_repeats(
    decoder: WhisperDecoder, monkeypatch: pytest.MonkeyPatch, windows: list[tuple[float, float]], final: bool
) -> None:
    """An unclear word makes tiny.en loop with no hotwords too: windows of a real reading ending at "... the
    exception of rhythm" loop to their ends ("of the uhh uhh uhh ..."). Which of them loops moves with the
    CPU's arithmetic, so the first of a few that does is taken. It is decoded again with no three tokens
    repeated, and the words before the loop are kept."""
    from app.core.engine.audio import decode_audio
    from tests.real_speech import real_speech_dir

    reading = decode_audio(real_speech_dir() / "gentle_lucier.wav").samples
    decoder.set_vocabulary(())  # the module's decoder: an earlier test's hotwords would change what loops
    looped = None
    for start_s, end_s in windows:
        window = reading[int(start_s * SAMPLE_RATE) : int(end_s * SAMPLE_RATE)]
        if looping(decoder._decode(window, final=final, prompt=None, hotwords=None)):
            looped = window
            break
    assert looped is not None, f"none of these windows loops any more (the model changed?): find another: {windows}"
    again: list[bool] = []
    plain_decode = decoder._decode

    def spy(samples: np.ndarray, **settings: Any) -> list[Word]:
        again.append(bool(settings.get("no_repeat")))
        return plain_decode(samples, **settings)

    monkeypatch.setattr(decoder, "_decode", spy)
    guarded = decoder.decode(looped, final=final, prompt=None)
    text = " ".join(word.word.strip() for word in guarded).lower()
    assert not looping(guarded), text
    assert re.search(r"semblance of \S+ speech,? (is|was|with)? ?perhaps the exception", text), text
    assert again == [False, True], f"decoded again with no repeats, not only cut at the loop: {again}"


# ------------------------------------------------------------------------------------------------ the command


def _cli(*arguments: str, config: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_CONFIG_HOME": str(config), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "app", "dictate", *arguments],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=ROOT,
    )


def test_dictate_commands_and_replacements_from_the_command_line(espeak: str, tmp_path: Path) -> None:
    """`scriba dictate --commands --replacements FILE --jsonl`: each final's edit as JSON, the replacements
    applied after the commands, a bad line of the file named on stderr while the rest is used."""
    audio = synth.write_wav(
        tmp_path / "note.wav",
        prompt("Send the report to Maria", BREATH_S, "period", BREATH_S, "new paragraph", BREATH_S, "Thanks"),
    )
    rules = tmp_path / "mine.txt"
    rules.write_text("# names\nmaria -> Mariah\nthe report -> the Q3 report\nthis line has no arrow\n", "utf-8")
    result = _cli("--from-file", str(audio), "--commands", "--replacements", str(rules), "--jsonl", config=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"scriba: warning: {rules}, line 4: no '->'" in result.stderr
    assert "Traceback" not in result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    edits = [line for line in lines if line["type"] == "edit"]
    typed = "".join(edit["text"] for edit in edits)
    assert all(edit["erase"] == 0 for edit in edits)
    assert "the Q3 report to Mariah.\n\nThanks" in typed, typed
    assert "[period]" in [action for edit in edits for action in edit["actions"]]
    # Without --jsonl each final is printed with its commands as labels.
    shown = _cli("--from-file", str(audio), "--commands", "--replacements", str(rules), config=tmp_path)
    assert shown.returncode == 0, shown.stderr
    # Where one final ends and the next begins depends on how fast this machine decodes (a loaded one takes
    # the file in several pieces, and a final that ends at "Mariah" gets Whisper's full stop): read them as one.
    said = " ".join(shown.stdout.split())
    assert re.search(r"Q3 report to Mariah\.? \[period\] \[new paragraph\] Thanks", said), shown.stdout


def test_dictate_says_which_replacements_file_is_missing(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.txt"
    result = _cli("--from-file", str(tmp_path / "x.wav"), "--replacements", str(missing), config=tmp_path)
    assert result.returncode != 0
    assert result.stderr.strip() == f"scriba: error: {missing} does not exist: give the path of a text file"


def test_the_config_folders_files_are_used_by_default(espeak: str, tmp_path: Path) -> None:
    """Without --replacements the config folder's dictation-replacements.txt applies (and its vocabulary file
    is read); a file given on the command line replaces it."""
    folder = tmp_path / "scriba"
    folder.mkdir()
    (folder / "dictation-replacements.txt").write_text("maria -> MARIA-FROM-CONFIG\n", "utf-8")
    (folder / "dictation-vocabulary.txt").write_text("Maria\n", "utf-8")
    audio = synth.write_wav(tmp_path / "name.wav", prompt("Send the report to Maria"))
    result = _cli("--from-file", str(audio), config=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "MARIA-FROM-CONFIG" in result.stdout, result.stdout
    other = tmp_path / "other.txt"
    other.write_text("report -> memo\n", "utf-8")
    result = _cli("--from-file", str(audio), "--replacements", str(other), config=tmp_path)
    assert "memo" in result.stdout and "MARIA-FROM-CONFIG" not in result.stdout, result.stdout

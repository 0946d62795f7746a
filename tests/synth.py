"""Multi-speaker speech made at test time with espeak-ng: the text and the turn times are known exactly.

Used by the tests and the benchmarks (which import it from the repository checkout).
"""

from __future__ import annotations

import subprocess
import tempfile
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SAMPLE_RATE = 16000

# Voices that differ clearly in timbre and pitch, as different people would.
VOICES = (
    ("en-us+m3", 40),
    ("en-gb-x-rp+f4", 70),
    ("en-us+m7", 25),
    ("en-gb-scotland+f2", 85),
)

SENTENCES = (
    "Thanks for joining the call today, we have a lot to cover.",
    "Sure, I looked at the budget numbers last night and they look reasonable.",
    "The main question is whether we can ship the release before the holidays.",
    "I think we can, if the testing team finishes the interviews by Friday.",
    "What about the transcription backlog from the research project?",
    "We cleared most of it, there are about twenty recordings left.",
    "Good, then let us plan the next sprint around the customer feedback.",
    "I will send everyone a summary of the decisions after this meeting.",
    "Please include the open questions about the cloud costs as well.",
    "Of course, and I will add the figures from the benchmark run.",
    "One more thing, the new microphones arrived this morning.",
    "Great, we can test them in the studio tomorrow afternoon.",
)

# The same four sentences (a short meeting opening) in other languages, for the language check.
OTHER_LANGUAGES: dict[str, tuple[str, ...]] = {
    "de": (
        "Guten Morgen, ich möchte heute über das neue Projekt sprechen.",
        "Wir haben letzte Woche die Ergebnisse der Umfrage bekommen und sie sind sehr interessant.",
        "Die meisten Teilnehmer waren mit dem Angebot zufrieden, aber einige haben sich über die Preise beschwert.",
        "Deshalb schlage ich vor, dass wir nächste Woche noch einmal zusammenkommen.",
    ),
    "fr": (
        "Bonjour à tous, nous allons parler aujourd'hui du nouveau projet.",
        "La semaine dernière, nous avons reçu les résultats de l'enquête et ils sont très intéressants.",
        "La plupart des participants étaient satisfaits, mais certains se sont plaints des prix.",
        "Je propose donc que nous nous réunissions encore une fois la semaine prochaine.",
    ),
    "es": (
        "Buenos días a todos, hoy vamos a hablar del nuevo proyecto.",
        "La semana pasada recibimos los resultados de la encuesta y son muy interesantes.",
        "La mayoría de los participantes estaban contentos, pero algunos se quejaron de los precios.",
        "Por eso propongo que nos reunamos otra vez la próxima semana.",
    ),
    "it": (
        "Buongiorno a tutti, oggi parliamo del nuovo progetto.",
        "La settimana scorsa abbiamo ricevuto i risultati del sondaggio e sono molto interessanti.",
        "La maggior parte dei partecipanti era contenta, ma alcuni si sono lamentati dei prezzi.",
        "Quindi propongo di incontrarci di nuovo la prossima settimana.",
    ),
    "nl": (
        "Goedemorgen allemaal, vandaag praten we over het nieuwe project.",
        "Vorige week kregen we de resultaten van de enquete en ze zijn heel interessant.",
        "De meeste deelnemers waren tevreden, maar sommigen klaagden over de prijzen.",
        "Daarom stel ik voor dat we volgende week nog een keer samenkomen.",
    ),
}


@dataclass(frozen=True)
class Utterance:
    speaker: str
    start: float
    end: float
    text: str


def speak(text: str, voice: str, pitch: int, speed: int = 165) -> np.ndarray:
    """One utterance as 16 kHz float32, leading and trailing silence trimmed."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "u.wav"
        subprocess.run(
            ["espeak-ng", "-v", voice, "-p", str(pitch), "-s", str(speed), "-w", str(path), text],
            check=True,
            capture_output=True,
        )
        with wave.open(str(path)) as handle:
            rate = handle.getframerate()
            pcm = np.frombuffer(handle.readframes(handle.getnframes()), dtype=np.int16).astype(np.float32) / 32768
    # Linear resampling is enough for test speech (espeak's output is band-limited well below 8 kHz).
    positions = np.arange(0, len(pcm) * SAMPLE_RATE / rate) * rate / SAMPLE_RATE
    samples = np.interp(positions, np.arange(len(pcm)), pcm).astype(np.float32)
    loud = np.flatnonzero(np.abs(samples) > 0.01)
    return samples[loud[0] : loud[-1] + 1] if loud.size else samples


def conversation(
    turns: list[tuple[int, str]], pause: float = 0.6, lead: float = 0.5
) -> tuple[np.ndarray, list[Utterance]]:
    """Speakers (indices into VOICES) saying texts one after another with ``pause`` seconds between turns."""
    pieces = [np.zeros(int(lead * SAMPLE_RATE), dtype=np.float32)]
    utterances = []
    clock = lead
    for speaker, text in turns:
        voice, pitch = VOICES[speaker]
        samples = speak(text, voice, pitch)
        utterances.append(Utterance(f"spk{speaker}", clock, clock + len(samples) / SAMPLE_RATE, text))
        pieces.append(samples)
        pieces.append(np.zeros(int(pause * SAMPLE_RATE), dtype=np.float32))
        clock += len(samples) / SAMPLE_RATE + pause
    return np.concatenate(pieces) * 0.8, utterances


def meeting(n_speakers: int, n_turns: int, pause: float = 0.6) -> tuple[np.ndarray, list[Utterance]]:
    """A round of ``n_turns`` turns cycling through the speakers in a fixed, non-trivial order."""
    order = [(i * 7 + i // n_speakers) % n_speakers for i in range(n_turns)]
    return conversation([(speaker, SENTENCES[i % len(SENTENCES)]) for i, speaker in enumerate(order)], pause)


def write_wav(path: Path, samples: np.ndarray, rate: int = SAMPLE_RATE) -> Path:
    pcm = (np.clip(samples, -1, 1) * 32767).astype(np.int16)
    with wave.open(str(path), "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(2)
        handle.setframerate(rate)
        handle.writeframes(pcm.tobytes())
    return path


def write_rttm(path: Path, utterances: list[Utterance], uri: str = "file") -> Path:
    lines = [f"SPEAKER {uri} 1 {u.start:.3f} {u.end - u.start:.3f} <NA> <NA> {u.speaker} <NA> <NA>" for u in utterances]
    path.write_text("\n".join(lines) + "\n")
    return path


def other_language_speech(language: str, voice: str, pause: float = 0.5) -> np.ndarray:
    """The sentences of ``OTHER_LANGUAGES[language]`` spoken by an espeak-ng ``voice`` (e.g. "de+m3")."""
    silence = np.zeros(int(pause * SAMPLE_RATE), dtype=np.float32)
    return np.concatenate([part for text in OTHER_LANGUAGES[language] for part in (speak(text, voice, 50), silence)])

"""Known speakers in the window: the library dialog (list, rename, merge, forget) and "Remember this speaker…".

The library and the matching live in :mod:`app.core.engine.speakers`; this module only shows and forwards.
Enrollment decodes the job's audio and runs the speaker encoder, so it runs on a thread of its own.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPushButton,
    QStatusBar,
    QVBoxLayout,
    QWidget,
)

from app.core.engine.speakers import RECOMMENDED_SPEECH_S, SpeakerLibrary
from app.core.errors import ScribaError
from app.gui.error_dialog import show_error
from app.gui.main_thread import run_off_main_thread

if TYPE_CHECKING:
    from app.core.queue.jobs import JobStore
    from app.core.transcript.document import Transcript

NAME_ROLE = Qt.ItemDataRole.UserRole  # the list item's speaker name, apart from its displayed text


class SpeakersDialog(QDialog):
    """The enrolled voices. Every change is saved at once; errors show in the dialog's own status line."""

    changed = Signal()

    def __init__(self, library_dir: Path, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.library_dir = Path(library_dir)
        self.setWindowTitle("Known speakers")
        intro = QLabel(
            "Scriba names these voices in every new transcript. Voiceprints stay on this computer; "
            "no audio is kept. Add one with “Remember this speaker…” on a finished transcript."
        )
        intro.setWordWrap(True)
        self.list = QListWidget()
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.rename_button = QPushButton("Rename…")
        self.merge_button = QPushButton("Merge…")
        self.merge_button.setToolTip("Two or more names that are one person become one name")
        self.forget_button = QPushButton("Forget")
        self.rename_button.clicked.connect(self._ask_rename)
        self.merge_button.clicked.connect(self._ask_merge)
        self.forget_button.clicked.connect(self._ask_forget)
        self.list.itemSelectionChanged.connect(self._update_buttons)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        buttons = QHBoxLayout()
        for button in (self.rename_button, self.merge_button, self.forget_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        close = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        close.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addWidget(self.list)
        layout.addLayout(buttons)
        layout.addWidget(self.status)
        layout.addWidget(close)
        # Voiceprints of an earlier voice encoder, made again from their recordings (seconds: off the main thread).
        self.remaking: threading.Thread | None = None
        self.refresh()
        library = self._library()
        if library is not None and library.remakeable():
            self._remake_earlier()

    def _library(self) -> SpeakerLibrary | None:
        try:
            return SpeakerLibrary.load(self.library_dir)
        except ScribaError as error:
            self.status.setText(str(error))
            return None

    def refresh(self) -> None:
        self.list.clear()
        library = self._library()
        waiting = library.waiting() if library else {}
        rows: list[tuple[str, str]] = []
        for known in library.known() if library else []:
            note = "" if known.seconds >= RECOMMENDED_SPEECH_S else " — add more speech for reliable recognition"
            rows.append((known.name, f"{known.name}  ({len(known.samples)} sample(s), {known.seconds:.1f} s){note}"))
        rows += [(name, f"{name}  — needs one new sample to be named again") for name in waiting]
        for name, text in sorted(rows, key=lambda row: row[0].casefold()):
            item = QListWidgetItem(text)
            item.setData(NAME_ROLE, name)
            self.list.addItem(item)
        if waiting:
            self.status.setText(" ".join(f"{name} cannot be named: {why}." for name, why in waiting.items()))
        elif library is not None and not library.speakers:
            self.status.setText("No speakers enrolled yet.")
        self._update_buttons()

    def _remake_earlier(self) -> None:
        directory = self.library_dir

        def work() -> str:
            from app.core.engine.diarize.encoder import SpeakerEncoder
            from app.core.engine.speakers import reenroll_earlier

            remade = reenroll_earlier(SpeakerLibrary.load(directory), SpeakerEncoder())
            if not remade.names:
                return ""
            return (
                f"{', '.join(remade.names)}: voiceprints made again with the current voice encoder from the "
                "recordings they were enrolled from."
            )

        def ended(result: str | Exception) -> None:
            self.remaking = None
            self.status.setText("")
            self.refresh()
            if isinstance(result, Exception):
                text = str(result) if isinstance(result, ScribaError) else f"{type(result).__name__}: {result}"
                self.status.setText(f"Voiceprints of an earlier voice encoder not made again: {text}")
            elif result:
                self.status.setText(f"{result} {self.status.text()}".strip())
                self.changed.emit()

        self.status.setText("Making the voiceprints of an earlier voice encoder again from their recordings…")
        self.remaking = run_off_main_thread(work, ended, ended, name="remake-voiceprints")
        self._update_buttons()

    def names(self) -> list[str]:
        return [str(self.list.item(row).data(NAME_ROLE)) for row in range(self.list.count())]

    def selected_names(self) -> list[str]:
        return [str(item.data(NAME_ROLE)) for item in self.list.selectedItems()]

    def _update_buttons(self) -> None:
        # While voiceprints are being made again, a change here would be overwritten when they are saved.
        count = 0 if self.remaking is not None else len(self.list.selectedItems())
        self.rename_button.setEnabled(count == 1)
        self.merge_button.setEnabled(count >= 2)
        self.forget_button.setEnabled(count >= 1)

    def _apply(self, message: str, action: str, *args: object) -> bool:
        if self.remaking is not None:
            self.status.setText("Wait until the voiceprints are made again, then try once more.")
            return False
        library = self._library()
        if library is None:
            return False
        try:
            getattr(library, action)(*args)
        except ScribaError as error:
            self.status.setText(str(error))
            return False
        self.refresh()
        self.status.setText(message)
        self.changed.emit()
        return True

    def rename(self, old: str, new: str) -> bool:
        return self._apply(f"Renamed {old} to {new.strip()}.", "rename", old, new)

    def merge(self, names: list[str], into: str) -> bool:
        return self._apply(f"Merged {', '.join(names)} into {into.strip()}.", "merge", names, into)

    def forget(self, names: list[str]) -> bool:
        return all(self._apply(f"Forgot {name}.", "forget", name) for name in names)

    def _ask_rename(self) -> None:
        names = self.selected_names()
        if len(names) != 1:
            return
        new, accepted = QInputDialog.getText(self, "Rename speaker", f"New name for {names[0]}:", text=names[0])
        if accepted:
            self.rename(names[0], new)

    def _ask_merge(self) -> None:
        names = self.selected_names()
        if len(names) < 2:
            return
        into, accepted = QInputDialog.getItem(
            self, "Merge speakers", f"{', '.join(names)} are one person, named:", names, 0, True
        )
        if accepted:
            self.merge(names, into)

    def _ask_forget(self) -> None:
        names = self.selected_names()
        if not names:
            return
        answer = QMessageBox.question(self, "Forget speakers", f"Delete the voiceprints of {', '.join(names)}?")
        if answer == QMessageBox.StandardButton.Yes:
            self.forget(names)


def enroll_speaker(
    library_dir: Path, name: str, source: Path, turns: list[tuple[float, float, str]], speaker: str
) -> str:
    """Enroll one diarized speaker of a finished job from that speaker's turns in the job's audio (seconds of
    work: run it off the main thread); a sentence for the status bar."""
    from app.core.engine.audio import decode_audio
    from app.core.engine.diarize.encoder import SpeakerEncoder
    from app.core.engine.speakers import enroll_from_turns

    library = SpeakerLibrary.load(library_dir)
    audio = decode_audio(source)
    known = enroll_from_turns(library, name, SpeakerEncoder(), audio, turns, speaker)
    advice = (
        "" if known.seconds >= RECOMMENDED_SPEECH_S else " Remember more of their speech to recognise them reliably."
    )
    return (
        f"Scriba will name {known.name} in new transcripts ({len(known.samples)} sample(s), "
        f"{known.seconds:.1f} s of speech).{advice}"
    )


class ShownTranscript(Protocol):
    """The transcript on show (the window's transcript view): its job, its transcript, and renaming a speaker."""

    @property
    def job_id(self) -> int | None: ...

    @property
    def transcript(self) -> Transcript | None: ...

    def rename_speaker(self, old: str, new: str) -> None: ...


def remember_speaker(
    parent: QWidget,
    status: QStatusBar,
    store: JobStore,
    shown: ShownTranscript,
    speaker: str,
    name: str | None,
    threads: list[threading.Thread],
) -> threading.Thread | None:
    """Enroll ``speaker`` of the transcript ``shown``, under the name it has (asked for when it has none); the
    voice is measured on a thread of its own, kept in ``threads`` while it runs, and ``status`` says how it went.
    Once remembered, the speaker is called by that name in this transcript too (if it is still on show)."""
    from app.core.engine.speakers import check_name

    job_id, transcript = shown.job_id, shown.transcript
    if not speaker or transcript is None or job_id is None or transcript.diarization is None:
        return None
    if name is None:
        suggestion = "" if speaker.startswith("SPEAKER_") else speaker
        name, accepted = QInputDialog.getText(
            parent, "Remember this speaker", f"Name {speaker}'s voice in new transcripts as:", text=suggestion
        )
        if not accepted:
            return None

    def failed(error: Exception) -> None:
        status.clearMessage()
        text = error.words if isinstance(error, ScribaError) else f"{type(error).__name__}: {error}"
        show_error(parent, "Scriba: remember speaker", text)

    try:
        name = check_name(name)
    except ScribaError as error:
        failed(error)
        return None
    source = store.get(job_id).source
    turns = [(turn.start, turn.end, turn.speaker) for turn in transcript.diarization.turns]
    directory = store.directory

    def ended(result: str | Exception) -> None:
        threads.remove(thread)
        if isinstance(result, Exception):
            failed(result)
            return
        status.showMessage(result, 15000)
        if shown.job_id == job_id and name != speaker:
            shown.rename_speaker(speaker, name)  # the transcript it came from names it too (an edit, undoable)

    status.showMessage(f"Remembering {name}'s voice…")
    thread = run_off_main_thread(
        lambda: enroll_speaker(directory, name, source, turns, speaker), ended, ended, name="remember-speaker"
    )
    threads.append(thread)
    return thread

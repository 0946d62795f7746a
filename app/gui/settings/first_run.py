"""The first-run page (and Help › Choose a speech model…): what this computer has, the model it should use and
why, with the time an hour of audio takes here; a fast / balanced / accurate choice; one button that downloads
the choice (progress, cancel) and one that starts at once with the built-in model. Nothing is downloaded
without that click; offline, it says so and the built-in model keeps working.

The reasoning is app.core.engine.recommend's (the same as ``scriba models recommend``); the download is
:class:`app.gui.settings.models_dialog.ModelDownload`'s."""

from __future__ import annotations

import html
import os
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QButtonGroup,
    QDialog,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QRadioButton,
    QVBoxLayout,
    QWidget,
)

from app.core.engine.models import BUNDLED_MODEL, CATALOG
from app.core.engine.recommend import TIERS, Machine, Recommendation, read_machine, recommend
from app.gui.main_thread import run_off_main_thread
from app.gui.settings.models_dialog import ModelDownload

TIER_WORDS = {
    "fast": "Fast",
    "balanced": "Balanced",
    "accurate": "Accurate",
}


def read_machine_in_a_child() -> Machine:
    """This computer, read by doctor's checks in a process of its own: they import torch and CTranslate2, which
    the window never imports (their import holds the interpreter's lock for seconds and would freeze it)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as child:
        return child.submit(read_machine).result()


class FirstRunDialog(QDialog):
    """``machine``: readings to use (tests write them); else ``reader`` reads this computer off the main thread.
    ``cache``/``endpoint``: another model folder and hub (tests)."""

    model_chosen = Signal(str)  # use this model for new jobs (downloaded just now, or on disk already)

    def __init__(
        self,
        parent: QWidget | None = None,
        machine: Machine | None = None,
        reader: Callable[[], Machine] | None = None,
        cache: Path | None = None,
        endpoint: str | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Welcome to Scriba: choose a speech model")
        self._cache = cache
        self.recommendation: Recommendation | None = None
        self.outcome = ""  # what the last download did, in words (empty: none tried)

        intro = QLabel(
            "Scriba transcribes on this computer with a speech model. Larger models are more accurate and slower. "
            f"The built-in {BUNDLED_MODEL} works right away (English only, least accurate)."
        )
        intro.setWordWrap(True)
        self.machine_label = QLabel("Looking at this computer…")
        self.machine_label.setWordWrap(True)
        self.reasons = QLabel("")
        self.reasons.setWordWrap(True)
        self.tiers = QButtonGroup(self)
        self.tier_buttons: dict[str, QRadioButton] = {}
        choices = QVBoxLayout()
        for tier in TIERS:
            button = QRadioButton(TIER_WORDS[tier])
            button.setEnabled(False)
            button.toggled.connect(self._update_buttons)
            self.tiers.addButton(button)
            self.tier_buttons[tier] = button
            choices.addWidget(button)
        self.basis = QLabel("")
        self.basis.setWordWrap(True)
        self.basis.setEnabled(False)  # the fine print: greyed
        # Their texts are escaped HTML ("computer&#x27;s"): rich text, or Qt may guess plain and show the escapes.
        for label in (self.machine_label, self.reasons, self.basis):
            label.setTextFormat(Qt.TextFormat.RichText)
        self.progress = QProgressBar()
        self.progress.setVisible(False)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.status.setTextFormat(Qt.TextFormat.RichText)
        self.download_button = QPushButton("Download")
        self.download_button.setEnabled(False)
        self.download_button.clicked.connect(self.download_choice)
        self.cancel_button = QPushButton("Cancel download")
        self.cancel_button.setVisible(False)
        self.cancel_button.clicked.connect(self.cancel)
        self.start_button = QPushButton(f"Start now with the built-in model ({BUNDLED_MODEL})")
        self.start_button.clicked.connect(self.start_now)
        buttons = QHBoxLayout()
        buttons.addWidget(self.download_button)
        buttons.addWidget(self.cancel_button)
        buttons.addStretch(1)
        buttons.addWidget(self.start_button)
        layout = QVBoxLayout(self)
        for label in (intro, self.machine_label, self.reasons):
            layout.addWidget(label)
        layout.addLayout(choices)
        layout.addWidget(self.basis)
        layout.addWidget(self.progress)
        layout.addWidget(self.status)
        layout.addStretch(1)
        layout.addLayout(buttons)
        self.resize(720, 460)

        self.downloader = ModelDownload(cache, endpoint, self)
        self.downloader.progress.connect(self._on_progress)
        self.downloader.finished.connect(self._on_downloaded)
        self.downloader.failed.connect(self._on_failed)
        self.downloader.cancelled.connect(self._on_cancelled)
        if machine is not None:
            self.show_recommendation(recommend(machine, cache))
        else:
            run_off_main_thread(
                reader or read_machine_in_a_child, self._machine_read, self._machine_unreadable, name="read-machine"
            )

    # ------------------------------------------------------------------------------------------- the advice

    def _machine_read(self, machine: Machine) -> None:
        self.show_recommendation(recommend(machine, self._cache))

    def _machine_unreadable(self, error: Exception) -> None:
        # Doctor's checks failed (a broken GPU library): advise for the CPU, which always works.
        self.show_recommendation(recommend(Machine("cpu", os.cpu_count() or 1), self._cache))
        self.machine_label.setText(
            f"Scriba could not read this computer's graphics card ({type(error).__name__}: {error}); the advice "
            "below is for its CPU."
        )

    def show_recommendation(self, advice: Recommendation) -> None:
        self.recommendation = advice
        self.machine_label.setText(html.escape(advice.reasons[0]))
        self.reasons.setText("<br>".join(html.escape(reason) for reason in advice.reasons[1:]))
        for choice in advice.choices:
            button = self.tier_buttons[choice.tier]
            mark = " (recommended)" if choice.tier == advice.recommended else ""
            where = "on this computer" if choice.on_disk else f"{choice.size_mb:,} MB download"
            button.setText(f"{TIER_WORDS[choice.tier]}{mark}: {choice.model}, {choice.time_words()} ({where})")
            button.setEnabled(True)
        self.tier_buttons[advice.recommended].setChecked(True)
        self.basis.setText(f"How the times are estimated: {html.escape(advice.basis)}")
        self._update_buttons()
        self.download_button.setDefault(True)

    def chosen(self) -> str | None:
        """The model of the checked choice."""
        if self.recommendation is None:
            return None
        tier = next((tier for tier, button in self.tier_buttons.items() if button.isChecked()), None)
        return self.recommendation.choice(tier).model if tier else None

    def _on_disk(self, name: str) -> bool:
        from app.core.engine.models import installed_models

        return any(model.name == name for model in installed_models(self._cache))

    def _update_buttons(self) -> None:
        name = self.chosen()
        busy = self.downloader.name is not None
        self.download_button.setEnabled(name is not None and not busy)
        self.cancel_button.setVisible(busy)
        for button in self.tier_buttons.values():
            button.setEnabled(self.recommendation is not None and not busy)
        if name is not None:
            on_disk = self._on_disk(name)
            self.download_button.setText(
                f"Use {name}" if on_disk else f"Download {name} ({CATALOG[name].size_mb:,} MB) and use it"
            )

    # ------------------------------------------------------------------------------------------- the buttons

    def download_choice(self) -> None:
        """Download the checked model (in the background) and use it once it is there; on disk: use it now."""
        name = self.chosen()
        if name is None:
            return
        if self._on_disk(name):
            self._use(name)
            return
        if not self.downloader.start(name):
            return
        self.progress.setVisible(True)
        self.progress.setRange(0, 0)  # busy until the size is known
        self.status.setText(
            f"Downloading {name} ({CATALOG[name].size_mb:,} MB)… The built-in model works meanwhile: "
            "“Start now” closes this page (and stops the download)."
        )
        self._update_buttons()

    def cancel(self) -> None:
        self.downloader.cancel()

    def start_now(self) -> None:
        """Close at once; jobs use the built-in model (or the best one already on disk)."""
        self.downloader.cancel()
        self.accept()

    def _use(self, name: str) -> None:
        self.model_chosen.emit(name)
        self.accept()

    def _on_progress(self, done_kb: int, total_kb: int) -> None:
        self.progress.setRange(0, max(total_kb, 1))
        self.progress.setValue(done_kb)
        self.status.setText(
            f"Downloading {self.downloader.name}: {done_kb / 1024:.0f} of {total_kb / 1024:.0f} MB. "
            "The built-in model works meanwhile."
        )

    def _ended(self, text: str) -> None:
        self.outcome = text
        self.progress.setVisible(False)
        self.status.setText(html.escape(text))
        self._update_buttons()

    def _on_downloaded(self, name: str) -> None:
        self._ended(f"{name} is downloaded; new jobs use it.")
        self._use(name)

    def _on_failed(self, name: str, text: str) -> None:
        self._ended(text)
        self.download_button.setText(f"Try downloading {name} again")

    def _on_cancelled(self, name: str) -> None:
        self._ended(
            f"The download of {name} was cancelled; what arrived is kept and the next try continues from there. "
            f"The built-in {BUNDLED_MODEL} keeps working."
        )

    def done(self, result: int) -> None:
        self.downloader.cancel()  # closing the page stops a download (it continues next time)
        super().done(result)

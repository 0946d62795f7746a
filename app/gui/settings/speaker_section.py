"""Settings > Speaker detection: the one-time step for pyannote community-1, a token field, and a
"Check and download" button that runs the check and the download in a background thread."""

from __future__ import annotations

import threading
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.core.cancel import CancelToken
from app.core.engine.diarize.pyannote_models import PYANNOTE_SIZE_MB, TERMS_URL, TOKENS_URL
from app.core.secrets import keyring_problem
from app.gui.main_thread import deliver_on_main_thread, run_off_main_thread

EXPLANATION = (
    "Scriba labels speakers with its built-in diarizer out of the box. pyannote's <i>community-1</i> separates "
    "voices better in long meetings and crosstalk. It is free, but its authors ask each person to accept their "
    "terms once:<ol>"
    f'<li>sign in at huggingface.co and accept the conditions on <a href="{TERMS_URL}">the model\'s page</a>;</li>'
    f'<li>create a <b>read</b> token on <a href="{TOKENS_URL}">your token page</a> and paste it below;</li>'
    f"<li>press <b>Check and download</b> (about {PYANNOTE_SIZE_MB} MB, once).</li></ol>"
    "After that pyannote runs on this computer, offline, without the token. The token is kept in your system "
    "keyring, never in a settings file, and is not shown again."
)


class SpeakerDetectionSection(QGroupBox):
    """The section; ``endpoint`` points it at another hub (tests)."""

    def __init__(
        self,
        token_stored: bool,
        diarizer: str = "auto",
        endpoint: str | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__("Speaker detection", parent)
        self._endpoint = endpoint
        self._diarizer = diarizer
        self._thread: threading.Thread | None = None
        self._cancel = CancelToken()
        # For the download thread: (kB done, kB in all), as the progress bar takes them.
        self._deliver_progress = deliver_on_main_thread(self._on_progress)

        explanation = QLabel(EXPLANATION)
        explanation.setWordWrap(True)
        explanation.setOpenExternalLinks(True)
        self.token = QLineEdit()
        self.token.setEchoMode(QLineEdit.EchoMode.Password)
        self.token.setPlaceholderText(
            "a token is stored (hidden); type a new one to replace it" if token_stored else "Hugging Face token: hf_…"
        )
        self.clear_button = QPushButton("Forget token")
        self.clear_button.setEnabled(token_stored)
        self.check_button = QPushButton("Check and download")
        self.check_button.clicked.connect(self.check_and_download)
        token_row = QHBoxLayout()
        token_row.addWidget(self.token)
        token_row.addWidget(self.clear_button)
        token_row.addWidget(self.check_button)
        self.progress = QProgressBar()
        self.progress.setVisible(False)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.status.setOpenExternalLinks(True)
        self.backend = QLabel("")
        self.backend.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.addWidget(explanation)
        layout.addLayout(token_row)
        # Said before a token is typed: without a keyring backend (common on Linux outside a desktop session)
        # the token works for this download but cannot be kept, and the user should know what to install.
        self.keyring_note = QLabel("")
        self.keyring_note.setWordWrap(True)
        self.keyring_note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        problem = keyring_problem()
        self.keyring_note.setVisible(problem is not None)
        if problem is not None:
            self.keyring_note.setText(
                f"<b>Your token cannot be remembered on this computer:</b> {problem[:1].upper()}{problem[1:]} "
                "Until then a token typed here is used for <i>Check and download</i> and then forgotten."
            )
        layout.addWidget(self.keyring_note)
        layout.addWidget(self.progress)
        layout.addWidget(self.status)
        layout.addWidget(self.backend)
        self.show_backend()

    def show_backend(self) -> None:
        from app.core.engine.diarize import DiarizerOptions, choose_backend

        if self._diarizer not in ("auto", "pyannote", "embedded"):
            self._diarizer = "auto"
        from app.core.engine.diarize.pyannote_backend import pyannote_installed

        choice = choose_backend(DiarizerOptions(backend=self._diarizer))  # type: ignore[arg-type]
        # The window's own words: the core's reason is also the command line's.
        if choice.backend == "pyannote":
            why = "downloaded: it runs on this computer, offline" if self._diarizer == "auto" else "chosen above"
            self.backend.setText(f"Will run: <b>pyannote community-1</b> ({why}).")
        elif self._diarizer == "embedded":
            self.backend.setText("Will run: <b>the built-in diarizer</b> (chosen above).")
        elif not pyannote_installed():
            self.backend.setText(
                "Will run: <b>the built-in diarizer</b>. The better speaker detection cannot run in this "
                "installation of Scriba."
            )
        else:
            self.backend.setText(
                "Will run: <b>the built-in diarizer</b>, until pyannote community-1 is downloaded with "
                "<i>Check and download</i> above."
            )

    def _token_now(self) -> str | None:
        typed = self.token.text().strip()
        if typed:
            return typed
        from app.core.secrets import huggingface_token

        return huggingface_token()[0]

    def check_and_download(self) -> None:
        """Start the check and the download in a background thread; its result arrives on the main thread."""
        if self._thread is not None and self._thread.is_alive():
            return
        token = self._token_now()
        self._cancel = CancelToken()
        self.check_button.setEnabled(False)
        self.progress.setVisible(True)
        self.progress.setRange(0, 0)  # busy until the size is known
        self.status.setText("Checking the token and the access to community-1…")
        cancel = self._cancel
        self._thread = run_off_main_thread(
            lambda: self._download(token, cancel), self._on_done, self._on_error, name="pyannote-download"
        )

    def cancel(self) -> None:
        """Stop a running download (the dialog closes); what arrived stays for the next attempt."""
        self._cancel.cancel()

    def _download(self, token: str | None, cancel: CancelToken) -> Path:
        """On the download thread: no widget is touched; (kB: Qt's int is 32-bit)."""
        from app.core.engine.diarize.pyannote_models import download_pipeline

        deliver = self._deliver_progress
        return download_pipeline(
            token,
            progress=lambda done, total: deliver((done // 1024, total // 1024)),
            cancel=cancel,
            endpoint=self._endpoint,
        )

    def _on_error(self, error: Exception) -> None:
        from app.core.engine.diarize.pyannote_models import PyannoteAccessError
        from app.core.errors import CancelledError

        if isinstance(error, CancelledError):
            return  # the dialog is closing: nobody to tell
        if isinstance(error, PyannoteAccessError):
            self._on_failed(error.kind, str(error))
        else:  # shown in the dialog, never a traceback
            self._on_failed("hub", f"{type(error).__name__}: {error}")

    def wait(self, timeout: float = 30.0) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _on_progress(self, sizes: tuple[int, int]) -> None:
        done_kb, total_kb = sizes
        self.progress.setRange(0, max(total_kb, 1))
        self.progress.setValue(done_kb)
        self.status.setText(f"Downloading: {done_kb / 1024:.1f} of {total_kb / 1024:.1f} MB")

    def _on_failed(self, kind: str, message: str) -> None:
        self.check_button.setEnabled(True)
        self.progress.setVisible(False)
        self.status.setProperty("kind", kind)
        if kind == "terms":
            message = message.replace(TERMS_URL, f'<a href="{TERMS_URL}">{TERMS_URL}</a>')
        self.status.setText(f"<b>Not downloaded:</b> {message[:1].upper()}{message[1:]}.")

    def _on_done(self, path: Path) -> None:
        self.check_button.setEnabled(True)
        self.progress.setVisible(False)
        self.status.setProperty("kind", "done")
        self.status.setText(f"Downloaded to {path}. pyannote now runs offline; the token is no longer needed.")
        self.show_backend()

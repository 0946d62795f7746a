"""Settings > Speaker detection: the one-time step for pyannote community-1, a token field, and a
"Check and download" button that runs the check and the download in a background thread."""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject, Signal
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
from app.core.diarize.pyannote_models import PYANNOTE_SIZE_MB, TERMS_URL, TOKENS_URL

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


class _DownloadSignals(QObject):
    progress = Signal(int, int)  # bytes done, bytes in all (as kB: Qt's int is 32-bit)
    failed = Signal(str, str)  # kind, message
    done = Signal(str)  # the pipeline's folder


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
        self.signals = _DownloadSignals(self)
        self.signals.progress.connect(self._on_progress)
        self.signals.failed.connect(self._on_failed)
        self.signals.done.connect(self._on_done)

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
        layout.addWidget(self.progress)
        layout.addWidget(self.status)
        layout.addWidget(self.backend)
        self.show_backend()

    def show_backend(self) -> None:
        from app.core.diarize import DiarizerOptions, choose_backend

        if self._diarizer not in ("auto", "pyannote", "embedded"):
            self._diarizer = "auto"
        choice = choose_backend(DiarizerOptions(backend=self._diarizer))  # type: ignore[arg-type]
        name = "pyannote community-1" if choice.backend == "pyannote" else "the built-in diarizer"
        self.backend.setText(f"Will run: <b>{name}</b> ({choice.reason}).")

    def _token_now(self) -> str | None:
        typed = self.token.text().strip()
        if typed:
            return typed
        from app.core.secrets import huggingface_token

        return huggingface_token()[0]

    def check_and_download(self) -> None:
        """Start the check and the download in a background thread; results arrive as signals."""
        if self._thread is not None and self._thread.is_alive():
            return
        token = self._token_now()
        self._cancel = CancelToken()
        self.check_button.setEnabled(False)
        self.progress.setVisible(True)
        self.progress.setRange(0, 0)  # busy until the size is known
        self.status.setText("Checking the token and the access to community-1…")
        self._thread = threading.Thread(
            target=self._work, args=(token, self._cancel), name="pyannote-download", daemon=True
        )
        self._thread.start()

    def cancel(self) -> None:
        """Stop a running download (the dialog closes); what arrived stays for the next attempt."""
        self._cancel.cancel()

    def _work(self, token: str | None, cancel: CancelToken) -> None:
        from app.core.diarize.pyannote_models import PyannoteAccessError, download_pipeline
        from app.core.errors import CancelledError

        try:
            path = download_pipeline(
                token,
                progress=lambda done, total: self.signals.progress.emit(done // 1024, total // 1024),
                cancel=cancel,
                endpoint=self._endpoint,
            )
        except CancelledError:
            return  # the dialog is closing: nobody to tell
        except PyannoteAccessError as error:
            self.signals.failed.emit(error.kind, str(error))
        except Exception as error:  # shown in the dialog, never a traceback
            self.signals.failed.emit("hub", f"{type(error).__name__}: {error}")
        else:
            self.signals.done.emit(str(path))

    def wait(self, timeout: float = 30.0) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _on_progress(self, done_kb: int, total_kb: int) -> None:
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

    def _on_done(self, path: str) -> None:
        self.check_button.setEnabled(True)
        self.progress.setVisible(False)
        self.status.setProperty("kind", "done")
        self.status.setText(f"Downloaded to {path}. pyannote now runs offline; the token is no longer needed.")
        self.show_backend()

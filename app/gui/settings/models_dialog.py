"""Settings › Models…: every Whisper model Scriba knows, whether it is on disk, its size, languages and speed;
download (with progress and cancel) and remove. The catalog and the downloads are app.core.engine.models'.

:class:`ModelDownload` is the download itself (a background thread, progress, cancel, the outcome in words), shared
with the first-run page."""

from __future__ import annotations

import threading
from pathlib import Path

from PySide6.QtCore import QModelIndex, QObject, QPersistentModelIndex, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDialog,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.core.cancel import CancelToken
from app.core.engine.models import BUNDLED_MODEL, CATALOG, SPEED_SOURCE, installed_models, relative_speed
from app.gui.main_thread import deliver_on_main_thread, run_off_main_thread
from app.gui.queue.safety import ask_first

COLUMNS = ("Model", "Languages", "Size", "Speed", "On disk")
# A model list's item data: "on disk" or its download size, and "recommended" (shown after the name).
DETAIL_ROLE = Qt.ItemDataRole.UserRole + 1


class ModelListDelegate(QStyledItemDelegate):
    """A model list's rows read "name — on disk · recommended"; the chosen text stays the bare name."""

    def initStyleOption(self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> None:
        super().initStyleOption(option, index)
        detail = index.data(DETAIL_ROLE)
        if detail:
            option.text = f"{option.text}  —  {detail}"


def describe_models(box: QComboBox, cache: Path | None = None, recommended: str | None = None) -> None:
    """Say in a model list (items named by catalog name) which models are on disk, their download size and which
    one is recommended for this computer."""
    on_disk = {model.name for model in installed_models(cache)}
    for name, entry in CATALOG.items():
        index = box.findText(name)
        if index < 0:
            continue
        languages = "multilingual" if entry.multilingual else "English only"
        where = "on disk" if name in on_disk else f"not downloaded ({entry.size_mb:,} MB)"
        tip = f"{languages}; {where}" + ("; recommended for this computer" if name == recommended else "")
        box.setItemData(index, tip, Qt.ItemDataRole.ToolTipRole)
        detail = "on disk" if name in on_disk else f"{entry.size_mb:,} MB download"
        box.setItemData(index, detail + (" · recommended" if name == recommended else ""), DETAIL_ROLE)
    if not isinstance(box.view().itemDelegate(), ModelListDelegate):
        box.view().setItemDelegate(ModelListDelegate(box))


def offline_text(name: str) -> str:
    return (
        f"This computer seems to be offline: {name} could not be downloaded. The built-in {BUNDLED_MODEL} keeps "
        "working; try again once you are connected (the download continues where it stopped)."
    )


class ModelDownload(QObject):
    """One model download at a time on a background thread, never blocking the window; what happened arrives as a
    signal on the main thread. ``cache``/``endpoint``: another model folder and hub (tests)."""

    progress = Signal(int, int)  # kB done, kB in all (a progress bar's range is a 32-bit int)
    finished = Signal(str)  # the model is on disk
    failed = Signal(str, str)  # the model, what happened in words
    cancelled = Signal(str)

    def __init__(self, cache: Path | None = None, endpoint: str | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.cache = cache
        self.endpoint = endpoint
        self.name: str | None = None  # the model being downloaded
        self.offline = False  # the last failure was no connection at all
        self._thread: threading.Thread | None = None
        self._cancel = CancelToken()
        self._deliver_progress = deliver_on_main_thread(self._on_progress)

    def start(self, name: str) -> bool:
        """Start downloading ``name``; False while another download runs."""
        if self.name is not None:
            return False
        self.name = name
        self.offline = False
        self._cancel = cancel = CancelToken()
        self._thread = run_off_main_thread(
            lambda: self._work(name, cancel), self._on_done, self._on_error, name="model-download"
        )
        return True

    def _work(self, name: str, cancel: CancelToken) -> str:
        """On the download thread: the model's name once it is on disk."""
        from app.core.engine import models

        report = self._deliver_progress
        models.download_model(
            name,
            cache=self.cache,
            progress=lambda done, total: report((done // 1024, total // 1024)),
            cancel=cancel,
            endpoint=self.endpoint,
        )
        return name

    def cancel(self) -> None:
        """Stop the download; what arrived is kept, and the next download of the model continues from it."""
        self._cancel.cancel()

    def is_running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def wait(self, timeout: float = 30.0) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _on_progress(self, sizes: tuple[int, int]) -> None:
        if self.name is not None:
            self.progress.emit(*sizes)

    def _on_done(self, name: str) -> None:
        self.name = None
        self.finished.emit(name)

    def _on_error(self, error: Exception) -> None:
        from app.core.engine.recommend import cannot_connect
        from app.core.errors import CancelledError, ScribaError

        name, self.name = self.name or "", None
        if isinstance(error, CancelledError):
            self.cancelled.emit(name)
            return
        self.offline = cannot_connect(error)
        if self.offline:
            self.failed.emit(name, offline_text(name))
        elif isinstance(error, ScribaError):
            self.failed.emit(name, str(error))
        else:  # shown in words, never a traceback
            self.failed.emit(name, f"{name} could not be downloaded ({type(error).__name__}: {error}).")


class ModelsDialog(QDialog):
    """The model manager. ``cache``/``endpoint`` point it at another model folder and hub (tests)."""

    downloaded = Signal(str)  # a model finished downloading (its name)
    download_failed = Signal(str, str)  # a download failed or was cancelled: the model, what happened in words

    def __init__(
        self,
        parent: QWidget | None = None,
        select: str | None = None,
        cache: Path | None = None,
        endpoint: str | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Speech models")
        self._cache = cache
        self._endpoint = endpoint
        self._downloading: str | None = None
        self.outcome = ""  # what the last download did, in words
        self.downloader = ModelDownload(cache, endpoint, self)
        self.downloader.progress.connect(self._on_progress)
        self.downloader.finished.connect(self._on_done)
        self.downloader.failed.connect(self._on_failed)
        self.downloader.cancelled.connect(self._on_cancelled)

        intro = QLabel(
            "Models ending in <b>.en</b> transcribe English only; the others transcribe about 100 languages. "
            "Larger models are more accurate and slower. Speed is relative to large "
            f"(source: {SPEED_SOURCE})."
        )
        intro.setWordWrap(True)
        self.table = QTableWidget(len(CATALOG), len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setTabKeyNavigation(False)  # Tab leaves the table for the buttons
        self.table.verticalHeader().setVisible(False)
        self.table.itemSelectionChanged.connect(self._update_buttons)
        self.download_button = QPushButton("Download")
        self.download_button.clicked.connect(lambda: self.download(self.selected()))
        self.cancel_button = QPushButton("Cancel download")
        self.cancel_button.clicked.connect(self.cancel)
        self.remove_button = QPushButton("Remove")
        self.remove_button.clicked.connect(lambda: self.remove(self.selected()))
        close = QPushButton("Close")
        close.clicked.connect(self.accept)
        buttons = QHBoxLayout()
        for button in (self.download_button, self.cancel_button, self.remove_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        buttons.addWidget(close)
        self.progress = QProgressBar()
        self.progress.setVisible(False)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addWidget(self.table)
        layout.addWidget(self.progress)
        layout.addWidget(self.status)
        layout.addLayout(buttons)
        self.resize(720, 480)
        self.refresh()
        self.select(select or next(iter(CATALOG)))

    def on_disk(self) -> dict[str, str]:
        """Model name -> where it is ("downloaded" or "bundled")."""
        found = installed_models(self._cache)
        return {model.name: "bundled" if model.origin == "bundled" else "downloaded" for model in found}

    def refresh(self) -> None:
        present = self.on_disk()
        for row, (name, entry) in enumerate(CATALOG.items()):
            where = present.get(name, "")
            if name == self._downloading:
                where = "downloading…"
            cells = (
                name,
                "multilingual" if entry.multilingual else "English only",
                f"{entry.size_mb:,} MB",
                f"{relative_speed(name):g}x large",
                where or "not downloaded",
            )
            for column, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if column in (2, 3):
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(row, column, item)
        self.table.resizeColumnsToContents()
        self._update_buttons()

    def select(self, name: str) -> None:
        if name in CATALOG:
            self.table.selectRow(list(CATALOG).index(name))

    def selected(self) -> str | None:
        rows = self.table.selectionModel().selectedRows()
        return list(CATALOG)[rows[0].row()] if rows else None

    def is_downloading(self) -> bool:
        return self.downloader.is_running()

    def _update_buttons(self) -> None:
        name = self.selected()
        where = self.on_disk().get(name or "", "")
        busy = self._downloading is not None
        self.download_button.setEnabled(name is not None and not where and not busy)
        self.cancel_button.setEnabled(busy)
        # The bundled tiny.en belongs to the installation; only downloads can be removed.
        self.remove_button.setEnabled(where == "downloaded" and name != self._downloading)

    def download(self, name: str | None) -> None:
        """Start downloading ``name`` in a background thread; progress and the result arrive as signals."""
        if name is None or self._downloading is not None:
            return
        self._downloading = name
        self.progress.setVisible(True)
        self.progress.setRange(0, 0)  # busy until the size is known
        self.status.setText(f"Downloading {name} ({CATALOG[name].size_mb:,} MB)…")
        self.downloader.start(name)
        self.refresh()

    def cancel(self) -> None:
        """Stop the download; what arrived is kept, and the next download of the model continues from it."""
        self.downloader.cancel()

    def wait(self, timeout: float = 30.0) -> None:
        self.downloader.wait(timeout)

    def remove(self, name: str | None) -> None:
        if name is None or self.on_disk().get(name) != "downloaded":
            return
        text = f"Delete {name} ({CATALOG[name].size_mb:,} MB) from this computer? It can be downloaded again."
        if not ask_first(self, "Remove model", text, "Delete"):
            return
        from app.core.engine.models import remove_model
        from app.core.errors import ScribaError

        try:
            remove_model(name, self._cache)
        except (ScribaError, OSError) as error:
            self.status.setText(f"<b>Not removed:</b> {error}")
        else:
            self.status.setText(f"Removed {name}.")
        self.refresh()

    def _finish(self, text: str) -> None:
        self._downloading = None
        self.progress.setVisible(False)
        self.status.setText(text)
        self.refresh()

    def _on_progress(self, done_kb: int, total_kb: int) -> None:
        self.progress.setRange(0, max(total_kb, 1))
        self.progress.setValue(done_kb)
        self.status.setText(f"Downloading {self._downloading}: {done_kb / 1024:.1f} of {total_kb / 1024:.1f} MB")

    def _on_cancelled(self, name: str) -> None:
        self._finish("Download cancelled; what arrived is kept, and Download continues from there.")
        self.outcome = f"The download of {name} was cancelled; what arrived is kept for the next try."
        self.download_failed.emit(name, self.outcome)

    def _on_failed(self, name: str, text: str) -> None:
        self._finish(f"<b>Not downloaded:</b> {text}")
        self.outcome = text
        self.download_failed.emit(name, text)

    def _on_done(self, name: str) -> None:
        self._finish(f"{name} is downloaded and ready.")
        self.outcome = f"{name} is downloaded."
        self.downloaded.emit(name)

    def done(self, result: int) -> None:
        self.cancel()  # closing the dialog stops a download (it continues next time)
        super().done(result)

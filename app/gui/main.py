"""Start the window: a Qt application, the crash dialog, then the main window on the user's queue."""

from __future__ import annotations

import faulthandler
import logging
import sys
import threading
import traceback
from pathlib import Path
from types import TracebackType

import shiboken6
from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QApplication, QMessageBox

from app import __version__
from app.core.config.settings import SettingsStore
from app.core.errors import ScribaError
from app.core.paths import config_dir
from app.core.queue.jobs import JobStore
from app.gui.error_dialog import show_error
from app.resources import icon_path

log = logging.getLogger(__name__)


class CrashReporter(QObject):
    """Shows an unexpected exception in a dialog (and writes it to crash.log) instead of exiting silently; a
    :class:`ScribaError` that escapes is no bug: its one line goes to the error dialog, and nothing to crash.log.

    Exceptions from other threads arrive through a queued signal, so the dialog is always built on the
    main thread.
    """

    crashed = Signal(str)
    user_error = Signal(str)

    def __init__(self, log_path: Path) -> None:
        super().__init__()
        self.log_path = log_path
        self.reports: list[str] = []
        self._dialogs: list[QMessageBox] = []  # a parentless dialog needs a Python reference to stay alive
        self.crashed.connect(self._show, Qt.ConnectionType.QueuedConnection)
        self.user_error.connect(lambda text: show_error(None, "Scriba", text), Qt.ConnectionType.QueuedConnection)

    def install(self) -> None:
        sys.excepthook = self._excepthook
        threading.excepthook = self._thread_excepthook

    def _excepthook(self, kind: type[BaseException], value: BaseException, trace: TracebackType | None) -> None:
        # After the application was torn down (a thread ending after the window closed) no dialog can show.
        alive = shiboken6.isValid(self)
        if isinstance(value, ScribaError):
            # Written for the user, not a bug: its one line in the error dialog, and nothing in crash.log.
            log.warning("%s", value)
            if alive:
                self.user_error.emit(value.words)  # the command line's hint (cli_hint) is not for a window
            return
        text = "".join(traceback.format_exception(kind, value, trace))
        self._record(text)
        if alive:
            self.crashed.emit(text)

    def _thread_excepthook(self, args: threading.ExceptHookArgs) -> None:
        if args.exc_value is None:
            return
        self._excepthook(args.exc_type, args.exc_value, args.exc_traceback)

    def _record(self, text: str) -> None:
        log.error("unexpected error:\n%s", text)
        self.reports.append(text)
        try:
            with self.log_path.open("a", encoding="utf-8") as stream:
                stream.write(f"--- Scriba {__version__}\n{text}\n")
        except OSError:
            pass

    def _show(self, text: str) -> None:
        box = QMessageBox(QMessageBox.Icon.Critical, "Scriba: unexpected error", "Something went wrong inside Scriba.")
        box.setInformativeText(
            f"Your queue and transcripts are safe. The details were written to {self.log_path}; "
            "please include them in a bug report."
        )
        box.setDetailedText(text)
        box.finished.connect(lambda _result: self._dialogs.remove(box))
        self._dialogs.append(box)
        box.open()  # not exec(): the window goes on working behind the dialog


def create_application(argv: list[str] | None = None) -> QApplication:
    app = QApplication.instance()
    if not isinstance(app, QApplication):
        app = QApplication(argv if argv is not None else sys.argv[:1])
    app.setApplicationName("Scriba")
    app.setApplicationVersion(__version__)
    app.setDesktopFileName("scriba")
    app.setWindowIcon(QIcon(str(icon_path())))
    return app


def run_gui(data_dir: Path, open_files: list[Path] | None = None) -> int:
    app = create_application()
    from app.gui.single_instance import InstanceServer, hand_over, server_name

    instance_name = server_name(data_dir)
    if hand_over(instance_name, open_files or []):
        # A window is already open on this queue: it took the files (and comes to the front); no second one.
        print("Scriba is already open; " + (f"{len(open_files)} file(s) handed to it." if open_files else "shown."))
        return 0
    try:
        store = JobStore(data_dir)
    except Exception as error:
        QMessageBox.critical(None, "Scriba cannot open its queue", f"{data_dir}: {error}")
        return 1
    crash_log = data_dir / "crash.log"
    reporter = CrashReporter(crash_log)
    reporter.install()
    fault_stream = (data_dir / "fault.log").open("a", encoding="utf-8")
    faulthandler.enable(fault_stream)  # a native crash of the window itself still leaves a trace

    from app.gui.window import MainWindow

    window = MainWindow(store, SettingsStore(config_dir()))
    window.show()
    window.offer_first_run()
    instance_server = InstanceServer(instance_name, window)
    instance_server.files_received.connect(window.files_from_another_launch)
    if not instance_server.listen():
        log.warning("a second launch will open a second window: %s", instance_server.server.errorString())
    if open_files:
        window.add_paths(open_files)
    code = app.exec()
    store.close()
    return int(code)

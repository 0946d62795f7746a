"""The one dialog for a failure the user can cause or meet (a :class:`app.core.errors.ScribaError`, or a line
written the same way): its message as written, no traceback. A bug is something else: the crash dialog
(:class:`app.gui.main.CrashReporter`) writes it to crash.log and says where."""

from __future__ import annotations

from PySide6.QtWidgets import QMessageBox, QWidget

from app.core.errors import ScribaError

# Parentless dialogs need a Python reference to stay alive while they are shown.
_shown_without_parent: list[QMessageBox] = []


def show_error(parent: QWidget | None, title: str, message: ScribaError | str) -> QMessageBox:
    """Show ``message`` in a warning that does not block: the window (and the queue) keep running behind it."""
    box = QMessageBox(QMessageBox.Icon.Warning, title, str(message), parent=parent)
    if parent is None:
        _shown_without_parent.append(box)
        box.finished.connect(lambda _result: _shown_without_parent.remove(box))
    box.open()  # not exec()
    return box

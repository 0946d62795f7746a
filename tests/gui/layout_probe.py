"""Open the main window and every dialog on a screen of a given size and scale, and say where text does not fit.

    python -m tests.gui.layout_probe --size 1280x720 [--scale 2]     (prints one JSON list of problems)

The screen is the offscreen platform's, configured to the size asked for (in logical pixels: at scale 2 the
device is twice as large, as a HiDPI laptop is). :func:`layout_problems` is the check; :func:`open_each` opens the
real window on a queue this module writes (a finished transcript, a running job with a long path, a queued and a
failed one) and each dialog the way the window opens it."""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from PySide6.QtCore import QPoint, QRect, QTimer
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QApplication,
    QDockWidget,
    QGroupBox,
    QHeaderView,
    QLabel,
    QScrollArea,
    QSizeGrip,
    QStackedWidget,
    QTableView,
    QTabWidget,
    QWidget,
)

# A pixel of rounding between a size hint and the laid-out size is not a clipped letter.
SLACK = 1


def wait_until(condition: Callable[[], object], timeout: float = 10.0) -> None:
    """Process events until ``condition`` holds (raises TimeoutError after ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout} s for {getattr(condition, '__name__', 'a condition')}")
        QApplication.processEvents()
        time.sleep(0.01)


def settle() -> None:
    """Let pending layouts run (a layout request is an event; a resize can post another)."""
    for _ in range(5):
        QApplication.processEvents()


def _plain(text: str) -> str:
    text = re.sub(r"<[^>]+>", " ", text)
    return " ".join(html.unescape(text).replace("&&", "&").split())


def _text(widget: QWidget) -> str | None:
    """The text a person reads on ``widget``, for the widgets whose text must fit (None: not such a widget)."""
    if isinstance(widget, QLabel):
        return _plain(widget.text()) or None
    if isinstance(widget, QAbstractButton):
        return _plain(widget.text().replace("&", "")) or None
    if isinstance(widget, QGroupBox):
        return _plain(widget.title().replace("&", "")) or None
    return None


def _describe(widget: QWidget, text: str) -> str:
    shown = text if len(text) <= 70 else text[:67] + "…"
    name = f" {widget.objectName()}" if widget.objectName() else ""
    return f"{type(widget).__name__}{name} {shown!r}"


def _cut(widget: QWidget) -> str | None:
    """How ``widget``'s text is cut at the size it has, or None when it fits."""
    size = widget.size()
    if isinstance(widget, QLabel):
        if widget.wordWrap():
            need = widget.heightForWidth(size.width())
            if need > size.height() + SLACK:
                return f"is {size.height()} px high where its {size.width()} px wide text needs {need}"
            return None
        hint = widget.minimumSizeHint()
        if hint.width() > size.width() + SLACK or hint.height() > size.height() + SLACK:
            return f"is {size.width()}x{size.height()} where its text needs {hint.width()}x{hint.height()}"
        return None
    if isinstance(widget, QAbstractButton):
        hint = widget.minimumSizeHint()
        text_width = widget.fontMetrics().horizontalAdvance(widget.text().replace("&", ""))
        need_width = max(hint.width(), text_width)
        if need_width > size.width() + SLACK or hint.height() > size.height() + SLACK:
            return f"is {size.width()}x{size.height()} where it needs {need_width}x{hint.height()}"
        return None
    if isinstance(widget, QGroupBox):
        need = widget.fontMetrics().horizontalAdvance(widget.title().replace("&", ""))
        if need > size.width() + SLACK:
            return f"is {size.width()} px wide where its title needs {need}"
    return None


def _outside(widget: QWidget, top: QWidget) -> str | None:
    """Which ancestor cuts ``widget`` off (a scroll area's contents may run past its viewport: they scroll)."""
    rect = widget.rect()
    current = widget
    parent = widget.parentWidget()
    while current is not top and parent is not None:
        rect = rect.translated(current.pos())
        area = parent.parentWidget()
        if isinstance(area, QScrollArea) and parent is area.viewport():
            return None
        inside = rect.intersected(parent.rect())
        if inside.width() < rect.width() - SLACK or inside.height() < rect.height() - SLACK:
            return f"is cut by its {type(parent).__name__} ({_size(rect)} in {_size(parent.rect())})"
        current, parent = parent, parent.parentWidget()
    return None


def _size(rect: QRect) -> str:
    return f"{rect.width()}x{rect.height()}+{rect.x()}+{rect.y()}"


def _overlap(widget: QWidget) -> str | None:
    parent = widget.parentWidget()
    if parent is None:
        return None
    for sibling in parent.findChildren(QWidget, options=_direct()):
        if sibling is widget or not sibling.isVisible() or sibling.isWindow() or isinstance(sibling, QSizeGrip):
            continue
        common = widget.geometry().intersected(sibling.geometry())
        if common.width() > SLACK and common.height() > SLACK:
            text = _text(sibling) or ""
            return f"overlaps {_describe(sibling, text) if text else type(sibling).__name__} ({_size(common)})"
    return None


def _direct():  # type: ignore[no-untyped-def]
    from PySide6.QtCore import Qt

    return Qt.FindChildOption.FindDirectChildrenOnly


def _columns(view: QTableView) -> list[str]:
    """A table whose columns do not all fit its width (one is pushed off-screen or squeezed under its title)."""
    header = view.horizontalHeader()
    problems = []
    width = view.viewport().width()
    for column in range(header.count()):
        if header.isSectionHidden(column):
            continue
        title = str(view.model().headerData(column, header.orientation()) or column)
        right = header.sectionViewportPosition(column) + header.sectionSize(column)
        if right > width + SLACK:
            problems.append(f"column {title!r} ends at {right} px, past the table's {width} px")
        elif header.sectionSize(column) < header.fontMetrics().horizontalAdvance(title):
            problems.append(f"column {title!r} is {header.sectionSize(column)} px, narrower than its title")
    return problems


def layout_problems(top: QWidget, name: str) -> list[str]:
    """Every label, check box, radio, button and group title in ``top`` whose text is cut, that overlaps a
    visible sibling or lies outside its window; ``top`` itself off the screen; a table with a column off its
    edge. Each names ``name`` (the dialog), the widget and its text."""
    settle()
    problems = []
    screen = top.screen().availableGeometry()
    if not screen.contains(top.frameGeometry()):
        problems.append(f"{name}: the window ({_size(top.frameGeometry())}) is off the screen ({_size(screen)})")
    # A dock behind another in its tab group is parked outside the window, not hidden: it is not on show.
    parked = [
        dock
        for dock in top.findChildren(QDockWidget)
        if not top.rect().intersects(QRect(dock.mapTo(top, QPoint(0, 0)), dock.size()))
    ]
    for widget in top.findChildren(QWidget):
        if not widget.isVisible() or widget.window() is not top or any(d.isAncestorOf(widget) for d in parked):
            continue
        if isinstance(widget, QTableView) and not isinstance(widget.parentWidget(), QHeaderView):
            problems.extend(f"{name}: {type(widget).__name__} {problem}" for problem in _columns(widget))
        text = _text(widget)
        if text is None or isinstance(widget.parentWidget(), QAbstractItemView):
            continue
        for found in (_cut(widget), _outside(widget, top), _overlap(widget)):
            if found:
                problems.append(f"{name}: {_describe(widget, text)} {found}")
    return problems


def pages_problems(top: QWidget, name: str) -> list[str]:
    """:func:`layout_problems` for each page of each stacked or tabbed page set in ``top``, each shown in turn."""
    problems = layout_problems(top, name)
    for stack in top.findChildren(QStackedWidget):
        if not stack.isVisible() or isinstance(stack.parentWidget(), QTabWidget):
            continue
        first = stack.currentIndex()
        for index in range(stack.count()):
            if index == first:
                continue
            _show_page(top, stack, index)
            shown = stack.widget(index)
            page = (shown.objectName() if shown is not None else "") or str(index)
            problems.extend(layout_problems(top, f"{name} › {page}"))
        _show_page(top, stack, first)
    for tabs in top.findChildren(QTabWidget):
        if not tabs.isVisible():
            continue
        first = tabs.currentIndex()
        for index in range(tabs.count()):
            if index != first:
                tabs.setCurrentIndex(index)
                problems.extend(layout_problems(top, f"{name} › {tabs.tabText(index)}"))
        tabs.setCurrentIndex(first)
    return problems


def _show_page(top: QWidget, stack: QStackedWidget, index: int) -> None:
    """Show a page the way a person does: through the list that chooses it when the dialog has one."""
    chooser = getattr(top, "page_list", None)
    if chooser is not None:
        chooser.setCurrentRow(index)
    else:
        stack.setCurrentIndex(index)
    settle()


def write_queue(folder: Path) -> dict[str, int]:
    """A queue as a person has it after a while: a finished transcript, a running job (long path), a queued one
    and a failed one. Returns the job ids by role."""
    import numpy
    import soundfile

    from app.core.queue.jobs import JobOptions, JobStore
    from app.core.transcript.document import Segment, Transcript, Word

    media = folder / "media" / "Recordings of the planning committee, spring term" / "second week"
    media.mkdir(parents=True)
    silence = numpy.zeros(16000 * 2, dtype="float32")
    names = {
        "done": "interview.wav",
        "running": "2026-03-14 quarterly planning meeting with the whole regional team (full recording).wav",
        "queued": "customer-call.wav",
        "failed": "broken-upload.wav",
    }
    for file in names.values():
        soundfile.write(media / file, silence, 16000)
    speakers = ("SPEAKER_00", "SPEAKER_01")
    segments, now = [], 0.0
    for turn in range(12):
        words = []
        for number, text in enumerate(
            ["so", "what", "we", "agreed", "on", "last", "week", "was", "the", "plan", "for", "the", "launch"]
        ):
            words.append(Word(now, now + 0.3, " " + text, 0.4 if number % 5 == 0 else 0.95, speakers[turn % 2]))
            now += 0.35
        segments.append(
            Segment(words[0].start, words[-1].end, "".join(w.word for w in words), tuple(words), speakers[turn % 2])
        )
    transcript = Transcript(names["done"], now, "en", "tiny.en", "cpu", "int8", tuple(segments), speakers=speakers)
    store = JobStore(folder / "data")
    ids = {"done": store.add_transcribed(media / names["done"], JobOptions(), transcript).id}
    for role in ("running", "queued", "failed"):
        ids[role] = store.add(media / names[role], JobOptions(model="tiny.en")).id
    store.fail(ids["failed"], "The file could not be decoded: it ends after 12 bytes (is it a complete recording?).")
    store.close()
    return ids


def open_each(folder: Path) -> Iterator[tuple[str, QWidget]]:
    """The main window, then each dialog, as the window opens them; each is closed when the next is asked for."""
    from PySide6.QtWidgets import QMessageBox

    from app.core.config.settings import SettingsStore
    from app.core.engine.recommend import Machine
    from app.core.queue.jobs import JobStore
    from app.core.queue.trash import Trash
    from app.core.queue.worker import JobEvent
    from app.gui.error_dialog import show_error
    from app.gui.offload.provider_keys import ProviderKeysDialog
    from app.gui.queue.time_range import TimeRangeDialog
    from app.gui.settings.dialog import SettingsDialog
    from app.gui.settings.model_offer import DownloadFailedNotice, MissingModelOffer
    from app.gui.window import MainWindow

    ids = write_queue(folder)
    store = JobStore(folder / "data")
    window = MainWindow(store, SettingsStore(folder / "config"), start_worker=False)
    window.show()
    wait_until(window.isVisible)
    running = store.get(ids["running"])
    window.model.apply_progress(JobEvent("progress", running.id, running.source, 0.42, "diarize", 3725.0, 6.5, 1834.0))
    window.select_job(ids["done"])
    wait_until(lambda: window.transcript_view.job_id == ids["done"])
    yield "main window", window
    # The panels a person opens from View, in front of their tab group, on the whole screen.
    window.showMaximized()
    wait_until(window.isMaximized)
    window.gpu_dock.show()
    window.gpu_dock.raise_()
    wait_until(window.gpu_dock.isVisible)
    yield "main window, full screen, GPU panel", window
    window.dictation_dock.show()
    window.dictation_dock.raise_()
    wait_until(window.dictation_panel.isVisible)
    yield "main window, full screen, dictation panel", window

    def shown(dialog: QWidget) -> QWidget:
        wait_until(dialog.isVisible)
        return dialog

    settings = SettingsDialog(window.settings, False, window)
    settings.open()
    yield "Settings", shown(settings)
    settings.reject()
    words = window.dictation_panel.words.open_words()
    yield "Your words", shown(words)
    words.reject()
    for label, opened_by, attribute in SHEETS:
        if opened_by in vars(sys.modules[MainWindow.__module__]):  # the window opens this sheet
            if opened_by == "ask_options":
                window.ask_and_add([store.get(ids["queued"]).source])  # as a drop or Add files… does
            else:
                window.choose_export()  # the Export… button's slot, with the finished job selected
            sheet = getattr(window, attribute)
            yield label, shown(sheet)
            sheet.close()
    models = window.open_models()
    yield "Speech models", shown(models)
    models.reject()
    speakers = window.open_speakers()
    yield "Known speakers", shown(speakers)
    speakers.close()
    offload = window.open_offload_dialog([ids["queued"]])
    assert offload is not None
    wait_until(lambda: offload.selected is not None or offload.estimate is not None, timeout=60)
    yield "Offload to cloud", shown(offload)
    offload.close()
    keys = ProviderKeysDialog(window)
    keys.open()
    yield "API keys", shown(keys)
    keys.reject()
    Trash(store.directory).put(store, store.get(ids["done"]), "removed")
    trash = window.open_trash()
    yield "Restore removed", shown(trash)
    trash.reject()
    part = TimeRangeDialog(store.get(ids["queued"]), window)
    part.open()
    yield "Transcribe a part", shown(part)
    part.reject()
    for label, machine in (
        ("first-run page (CPU)", Machine("cpu", 8, 16.0)),
        ("first-run page (GPU)", Machine("cuda", 16, 64.0, "NVIDIA GeForce RTX 4090 Laptop GPU", 16.0)),
    ):
        first = window.open_first_run(machine=machine)
        yield label, shown(first)
        first.reject()
    error = show_error(
        window,
        "Scriba",
        "interview.wav could not be exported: the folder /media/usb/Transcripts is read-only. Choose another "
        "folder in Settings › Output, or make this one writable, and export again.",
    )
    yield "error dialog", shown(error)
    error.done(0)
    missing = MissingModelOffer(window, "2026-03-14 quarterly planning meeting.wav", "large-v3")
    missing.open()
    yield "missing model offer", shown(missing)
    missing.done(0)
    failed = DownloadFailedNotice(window, "large-v3", "tiny.en", "The network could not be reached.")
    failed.open()
    yield "download failed notice", shown(failed)
    failed.done(0)
    # About is modal (QMessageBox.about): looked at from inside its own event loop.
    about_box: list[QWidget] = []

    def look() -> None:
        box = QApplication.activeModalWidget()
        if isinstance(box, QMessageBox):
            about_box.append(box)
            about_problems.extend(pages_problems(box, "About"))
            box.done(0)

    about_problems: list[str] = []
    QTimer.singleShot(200, look)
    next(
        action
        for action in window.findChildren(type(window.menu_actions.offload_action))
        if action.text() == "About Scriba"
    ).trigger()
    if not about_box:
        about_problems.append("About: the About dialog did not open")
    yield "About", _Found(about_problems)
    window.close()
    store.close()


# Sheets the window opens where it has them: (label, the function that opens it, the window's attribute for it).
SHEETS = (
    ("export sheet", "open_export_sheet", "export_sheet"),
    ("add-files sheet", "ask_options", "options_sheet"),
)


class _Found(QWidget):
    """Problems found while a modal dialog was open (it is gone by the time the caller looks)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__()
        self.problems = problems


def check_all(folder: Path) -> tuple[list[str], list[str]]:
    """(what was opened, the problems found) for the main window and every dialog."""
    opened, problems = [], []
    for name, top in open_each(folder):
        opened.append(name)
        problems.extend(top.problems if isinstance(top, _Found) else pages_problems(top, name))
    return opened, problems


def screen_config(folder: Path, width: int, height: int, scale: float) -> str:
    """The offscreen platform's argument for one screen of ``width`` x ``height`` logical pixels at ``scale``."""
    config = folder / "screen.json"
    physical = {"width": int(width * scale), "height": int(height * scale)}
    screen = {"name": "probe", "x": 0, "y": 0, **physical, "logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1}
    config.write_text(json.dumps({"screens": [screen]}))
    return f"offscreen:configfile={config}"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="1280x720")
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()
    width, height = (int(value) for value in args.size.split("x"))
    with tempfile.TemporaryDirectory(prefix="scriba-layout-") as temporary:
        folder = Path(temporary)
        for name in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"):
            os.environ[name] = str(folder / name.lower())
        os.environ["QT_QPA_PLATFORM"] = screen_config(folder, width, height, args.scale)
        os.environ["QT_SCALE_FACTOR"] = str(args.scale)
        os.environ["PYTHON_KEYRING_BACKEND"] = "keyring.backends.null.Keyring"
        from app.gui.main import create_application

        app = create_application(["scriba"])
        screen = app.primaryScreen()
        assert (screen.size().width(), screen.size().height()) == (width, height), screen.size()
        opened, problems = check_all(folder)
    print(json.dumps({"opened": opened, "problems": problems}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

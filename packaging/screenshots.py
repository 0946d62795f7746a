"""One picture of the window and of each dialog on a 1280x720 screen, for the README (`make screenshots`).

    xvfb-run -a -s "-screen 0 1280x720x24" python packaging/screenshots.py [FOLDER]     (default: resources)

The real window (Qt's xcb platform on the X server xvfb-run starts) on a queue this script makes: a real
four-person meeting (AMI ES2003a's first 30 s, from ../shared/real-speech, or SCREENSHOT_AMI) and pyannote's
sample phone call, transcribed by `scriba queue run` on the bundled tiny.en with the built-in diarizer, offline,
in a temporary data, config and cache folder (the user's queue and settings are not touched). The window fills
the screen and is taken whole (window-editor.png, 1280x720; window-editor-dark.png in the dark theme); each
dialog is opened over it as the window opens it and taken as it lies on that screen (window-NAME.png). Stored
with a 256-colour palette (Pillow): small.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MEETING = "project-meeting.wav"
CALL = "customer-call.wav"
QUEUED = "follow-up-call.wav"


def isolate(work: Path) -> None:
    """Offline, no keyring, no telemetry, and folders of this run's own."""
    for name in ("HF_TOKEN", "SCRIBA_HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "SCRIBA_DATA_DIR"):
        os.environ.pop(name, None)
    os.environ |= {
        "PYANNOTE_METRICS_ENABLED": "0",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_OFFLINE": "1",
        "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring",
        "XDG_CACHE_HOME": str(work / "cache"),
        "XDG_DATA_HOME": str(work / "data"),
        "XDG_CONFIG_HOME": str(work / "config"),
        "XDG_RUNTIME_DIR": str(work / "runtime"),
        "QT_QPA_PLATFORM": "xcb",
    }
    (work / "runtime").mkdir(mode=0o700)


def transcribe(work: Path) -> Path:
    """The queue: the meeting and the call transcribed, a third recording still queued. Returns the data folder."""
    import importlib.util

    media = work / "media"
    media.mkdir()
    spec = importlib.util.find_spec("pyannote.audio")
    assert spec is not None and spec.submodule_search_locations is not None
    sample = Path(next(iter(spec.submodule_search_locations))) / "sample" / "sample.wav"
    shutil.copy(sample, media / CALL)
    shutil.copy(sample, media / QUEUED)
    ami = Path(os.environ.get("SCREENSHOT_AMI", ROOT.parent / "shared" / "real-speech" / "ami_ES2003a_0-30.wav"))
    shutil.copy(ami if ami.is_file() else sample, media / MEETING)
    scriba = [str(Path(sys.executable).parent / "scriba"), "--data-dir", str(work / "queue")]
    subprocess.run([*scriba, "queue", "add", str(media / CALL), str(media / MEETING)], check=True)
    subprocess.run([*scriba, "queue", "run", "--until-empty"], check=True)
    subprocess.run([*scriba, "queue", "add", str(media / QUEUED)], check=True)
    return work / "queue"


def save(image: object, path: Path, border: bool = False) -> None:
    """The picture with a 256-colour palette (a screen of text and flat colours loses nothing one can see)."""
    from PIL import Image, ImageOps
    from PySide6.QtCore import QBuffer, QIODevice

    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")  # type: ignore[attr-defined]
    picture = Image.open(io.BytesIO(bytes(buffer.data().data()))).convert("RGB")
    if border:
        picture = ImageOps.expand(picture, border=1, fill=(128, 128, 128))
    picture.quantize(256, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
    print(f"wrote {path} ({picture.width}x{picture.height}, {path.stat().st_size // 1024} KB)")


def main() -> int:
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "resources").resolve()
    with tempfile.TemporaryDirectory(prefix="scriba-screenshots-") as temporary:
        work = Path(temporary)
        isolate(work)
        data = transcribe(work)
        return take(data, work / "settings", folder)


def take(data: Path, config: Path, folder: Path) -> int:
    from PySide6.QtCore import QTimer
    from PySide6.QtGui import QAction
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication, QMessageBox, QWidget

    from app.core.config.settings import SettingsStore
    from app.core.queue.jobs import JobState, JobStore
    from app.core.queue.trash import Trash
    from app.gui.error_dialog import show_error
    from app.gui.main import create_application
    from app.gui.settings.dialog import SettingsDialog
    from app.gui.theme import apply_theme
    from app.gui.window import MainWindow

    app = create_application(["scriba"])
    apply_theme("light")
    screen = app.primaryScreen()
    if (screen.size().width(), screen.size().height()) != (1280, 720):
        print(f"the screen is {screen.size().width()}x{screen.size().height()}, not 1280x720", file=sys.stderr)
        return 1
    store = JobStore(data)
    jobs = {job.source.name: job for job in store.jobs()}
    if jobs[MEETING].state is not JobState.DONE or jobs[CALL].state is not JobState.DONE:
        print(f"the recordings were not transcribed: {[job.status for job in jobs.values()]}", file=sys.stderr)
        return 1

    def wait_until(condition: Callable[[], object], timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise TimeoutError("the window did not get there in time")
            QTest.qWait(20)

    def shoot(name: str, widget: QWidget) -> None:
        """The whole screen for the window; a dialog as it lies on the screen (without a window manager
        it has no frame of its own, so one thin line is drawn around it)."""
        wait_until(widget.isVisible)
        QTest.qWaitForWindowExposed(widget)
        QTest.qWait(300)  # painted: text laid out, the transcript's paragraphs wrapped
        if widget is window:
            window.statusBar().clearMessage()  # "Saved." after the rename is not what the picture is about
            QTest.qWait(50)
            save(screen.grabWindow(0).toImage(), folder / f"window-{name}.png")
        else:
            area = widget.frameGeometry()
            picture = screen.grabWindow(0, area.x(), area.y(), area.width(), area.height()).toImage()
            save(picture, folder / f"window-{name}.png", border=True)

    window = MainWindow(store, SettingsStore(config), start_worker=False)
    window.setGeometry(screen.availableGeometry())
    window.show()
    window.select_job(jobs[MEETING].id)
    view = window.transcript_view
    wait_until(lambda: view.job_id == jobs[MEETING].id)
    if view.transcript is not None and view.transcript.speakers:
        view.rename_speaker(view.transcript.speakers[0], "Chair")
    window.table.setFocus()
    shoot("editor", window)
    apply_theme("dark")
    shoot("editor-dark", window)
    apply_theme("light")

    first = window.open_first_run()
    wait_until(lambda: first.recommendation is not None)
    shoot("first-run", first)
    first.reject()

    settings = SettingsDialog(window.settings, False, window)
    settings.open()
    for page in range(settings.page_list.count()):
        settings.page_list.setCurrentRow(page)
        shoot(f"settings-{settings.page_list.item(page).text().lower()}", settings)
    settings.reject()

    opens = vars(sys.modules[MainWindow.__module__])  # the sheets, where the window has them
    if "open_export_sheet" in opens:
        window.select_job(jobs[MEETING].id)
        window.choose_export()
        export = window.export_sheet
        assert export is not None, "Export… opened no sheet"
        shoot("export", export)
        export.close()
    if "ask_options" in opens:
        window.ask_and_add([jobs[QUEUED].source])
        options = window.options_sheet
        assert options is not None, "adding a file opened no sheet"
        shoot("add-files", options)
        options.close()

    models = window.open_models()
    shoot("models", models)
    models.reject()
    speakers = window.open_speakers()
    shoot("speakers", speakers)
    speakers.close()
    window.select_job(jobs[QUEUED].id)
    offload = window.open_offload_dialog([jobs[QUEUED].id])
    assert offload is not None
    wait_until(lambda: offload.estimate is not None)
    shoot("offload", offload)
    offload.close()

    Trash(store.directory).put(store, store.get(jobs[CALL].id), "removed")
    trash = window.open_trash()
    shoot("trash", trash)
    trash.reject()
    error = show_error(
        window,
        "Scriba",
        f"{CALL} could not be exported: the folder /media/usb/Transcripts is read-only. Choose "
        "another folder in the export sheet, or make this one writable, and export again.",
    )
    shoot("error", error)
    error.done(0)

    def about() -> None:
        box = QApplication.activeModalWidget()
        if isinstance(box, QMessageBox):
            shoot("about", box)
            box.done(0)

    QTimer.singleShot(300, about)
    next(action for action in window.findChildren(QAction) if action.text() == "About Scriba").trigger()
    window.close()
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

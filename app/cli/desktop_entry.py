"""`scriba --install-desktop-entry`: a menu entry and icon for the installed `scriba`, in the user's own XDG data
folder, so that a `pipx install` or `uv tool install` (which install no desktop files) ends as an app in the menu.

The entry is the packaged ``resources/scriba.desktop`` (the one the bundle and AppStream metainfo use) with its
Exec pointing at this very `scriba` by absolute path: a tool installer's bin folder is often not on the PATH a
desktop session starts programs with.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from app.core.errors import ExitCode

DESKTOP_ID = "scriba.desktop"  # the launchable the AppStream metainfo names
ICON_NAME = "scriba"

# Characters that make the Desktop Entry spec require an Exec argument in double quotes.
_RESERVED = re.compile(r"""[\s"'\\><~|&;$*?#()`]""")


def data_home() -> Path:
    """$XDG_DATA_HOME, else ~/.local/share (platformdirs reads the variable on each call)."""
    import platformdirs

    return Path(platformdirs.user_data_dir())


def entry_path() -> Path:
    return data_home() / "applications" / DESKTOP_ID


def icon_path() -> Path:
    return data_home() / "icons" / "hicolor" / "scalable" / "apps" / f"{ICON_NAME}.svg"


def scriba_command() -> list[str]:
    """The command that starts this installed Scriba, absolute: the `scriba` script it was started as, else the
    one beside this interpreter (a venv's or a tool installer's bin), else this interpreter with ``-m app``."""
    started_as = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if started_as is not None and started_as.name == "scriba" and started_as.is_file():
        return [str(started_as.absolute())]
    beside = Path(sys.executable).parent / "scriba"
    if beside.is_file():
        return [str(beside)]
    return [str(Path(sys.executable).absolute()), "-m", "app"]


def exec_argument(argument: str) -> str:
    """One argument of an Exec line, quoted as the Desktop Entry spec asks when it holds a reserved character."""
    if not _RESERVED.search(argument):
        return argument
    return '"' + re.sub(r'(["`$\\])', r"\\\1", argument) + '"'


def entry_text(command: Sequence[str]) -> str:
    """The packaged entry with its Exec (and TryExec, so a menu hides the entry once Scriba is uninstalled) set to
    ``command``. A backslash is escaped once more: Exec is a string value, whose own escapes are read first."""
    from app.resources import resource_path

    template = resource_path(DESKTOP_ID).read_text(encoding="utf-8")
    line = " ".join(exec_argument(argument) for argument in command) + " %F"
    lines = []
    for text in template.splitlines():
        if text.startswith("TryExec="):
            continue
        if text.startswith("Exec="):
            lines.append("TryExec=" + command[0].replace("\\", "\\\\"))
            lines.append("Exec=" + line.replace("\\", "\\\\"))
        else:
            lines.append(text)
    return "\n".join(lines) + "\n"


def install() -> list[Path]:
    """Write the entry and the icon (again, when there: the same content, so running it twice changes nothing);
    the files written."""
    from app.core.files import write_atomic
    from app.resources import icon_path as packaged_icon

    entry, icon = entry_path(), icon_path()
    entry.parent.mkdir(parents=True, exist_ok=True)
    icon.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(icon, packaged_icon().read_bytes())
    write_atomic(entry, entry_text(scriba_command()))
    _refresh_caches()
    return [entry, icon]


def uninstall() -> list[Path]:
    """Remove what ``install`` wrote; the files that were there and are gone now."""
    removed = []
    for path in (entry_path(), icon_path()):
        if path.exists():
            path.unlink()
            removed.append(path)
    _refresh_caches()
    return removed


def _refresh_caches() -> None:
    """Tell the menu's MIME cache at once where its tool exists (``xdg-desktop-menu`` does the same); desktops
    also notice the folder's change on their own."""
    folder = entry_path().parent
    if shutil.which("update-desktop-database") and folder.is_dir():
        subprocess.run(
            ["update-desktop-database", "-q", str(folder)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
            timeout=60,
        )


def cmd_desktop_entry(remove: bool) -> int:
    try:
        if remove:
            removed = uninstall()
            print("removed " + ", ".join(map(str, removed)) if removed else "no Scriba menu entry was installed")
            return ExitCode.OK
        entry, icon = install()
    except OSError as error:
        where = error.filename or entry_path().parent
        print(
            f"scriba: error: the menu entry could not be written to {where} ({error.strerror or error}): make that "
            "folder writable, or set XDG_DATA_HOME to one that is",
            file=sys.stderr,
        )
        return ExitCode.FAILED
    print(f"menu entry: {entry}\nicon: {icon}\nScriba is in the applications menu (it starts {scriba_command()[0]}).")
    return ExitCode.OK

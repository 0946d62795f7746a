"""Dictation's final text delivered to the desktop: typed at the focused program's cursor, or put on the
clipboard ("copy instead of type").

Only finals come here: a partial changes while the person speaks, many times a second, and typing it would mean
taking it back as often. Each final is sent once, in order, with one space between consecutive finals
(:meth:`DesktopTextOutput.send`); a dictation command's edit takes back characters this output delivered and
types its text exactly as given (:meth:`~DesktopTextOutput.edit`: BackSpace presses, or the clipboard's text
shortened). The keys are pressed on a thread of this object's own, so a slow target program never holds up
the decoder that produces the finals.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from app.core.desktop.clipboard import copy_command, copy_text
from app.core.desktop.display import DesktopError, DisplaySystem, display_system

if TYPE_CHECKING:
    from app.core.desktop.wayland_typing import WaylandKeyboard
    from app.core.desktop.x11_typing import XTestTyper

log = logging.getLogger(__name__)

OutputMode = Literal["type", "copy"]

_END = object()


class DesktopTextOutput:
    """``send(final)`` from any thread; ``close()`` returns once everything sent has been typed or copied.

    In copy mode the clipboard holds the whole text dictated since this object was made, not only the last
    final: a person who dictates several sentences and then pastes wants all of them.

    ``notice`` is a line for the person when how the text arrives needs saying: on Wayland, the route it is
    typed through (the desktop's portal, wtype, ydotool, or the clipboard one paste at a time). ``on_error``
    hears a failure while typing or copying (the session goes on), and a Wayland route that was refused when
    it opened, with the route taking over.

    ``hold()`` keeps what is sent until ``release()``: while a global hotkey's key is down, the X server gives
    the whole keyboard to the program that grabbed it, so keys typed then would never reach the focused window.
    With push-to-talk this means the text is typed when the key is let go.
    """

    def __init__(
        self,
        mode: OutputMode,
        env: Mapping[str, str] | None = None,
        *,
        on_error: Callable[[str], None] | None = None,
        key_delay_s: float = 0.002,
        portal_token_path: Path | None = None,
    ) -> None:
        self._env = dict(os.environ if env is None else env)
        self.system: DisplaySystem = display_system(self._env)
        self.notice: str | None = None
        self._on_error = on_error
        self._typer: XTestTyper | WaylandKeyboard | None = None
        if mode == "type" and self.system == "wayland":
            # Never XTest (xdotool's way) here: through XWayland it reaches only X11 programs, and reports
            # success while a Wayland window receives nothing. wayland_typing.py picks the route that works.
            from app.core.desktop.wayland_typing import WaylandKeyboard, default_token_path

            self._typer = WaylandKeyboard(self._env, token_path=portal_token_path or default_token_path())
            self.notice = self._typer.notice
        elif mode == "type":
            if self.system != "x11":
                raise DesktopError(
                    "typing into other programs needs an X11 display (DISPLAY is not set)"
                    if self.system == "none"
                    else f"typing into other programs is not built for {self.system} yet: use copy mode"
                )
            from app.core.desktop.x11_typing import XTestTyper

            self._typer = XTestTyper(self._env.get("DISPLAY"), key_delay_s=key_delay_s)
        else:
            copy_command(self.system, self._env)  # no tool: say so now, not at the first final
        self.mode: OutputMode = mode
        self._delivered = ""  # typed or on the clipboard: what an edit may take back
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._released = threading.Event()
        self._released.set()
        self._thread = threading.Thread(target=self._work, name="desktop-output", daemon=True)
        self._thread.start()

    def send(self, final_text: str) -> None:
        """Deliver a final, after a space when something was delivered before it."""
        text = final_text.strip()
        if text:
            self._queue.put((0, text, True))

    def edit(self, erase: int, text: str) -> None:
        """Take back the last ``erase`` characters this output delivered, then deliver ``text`` exactly as given
        (its spaces and new lines included, no separator added). Never more than this output delivered is
        taken back: text that was there before Scriba typed stays."""
        if erase < 0:
            raise ValueError("erase must not be negative")
        if erase or text:
            self._queue.put((erase, text, False))

    def take_back(self, count: int) -> None:
        """Take back the last ``count`` characters this output delivered (BackSpace presses when typing, the
        clipboard's text shortened in copy mode)."""
        self.edit(count, "")

    @property
    def delivered(self) -> str:
        """Everything this output has typed or copied so far, after its edits (read on any thread: a snapshot)."""
        return self._delivered

    def hold(self) -> None:
        self._released.clear()

    def release(self) -> None:
        self._released.set()

    def close(self) -> None:
        """Deliver everything sent (held text too), then stop."""
        self._released.set()
        if self._thread.is_alive():
            self._queue.put(_END)
            self._thread.join()

    def __enter__(self) -> DesktopTextOutput:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _work(self) -> None:
        try:
            self._start_typer()
            while True:
                item = self._queue.get()
                if item is _END:
                    return
                assert isinstance(item, tuple)
                erase, text, separate = item
                self._released.wait()
                try:
                    self._deliver(erase, text, separate)
                except Exception as error:  # one failed final must not end the session's output
                    log.exception("desktop output failed")
                    if self._on_error is not None:
                        self._on_error(str(error))
        finally:
            if self._typer is not None:
                try:
                    self._typer.close()
                except Exception:  # the X server went away: nothing is left to give the key codes back to
                    log.exception("closing the X connection failed")

    def _start_typer(self) -> None:
        """Open a route that waits for the person (the portal's permission) here, not in the constructor: the
        caller's thread goes on, and finals sent meanwhile wait in the queue."""
        start = getattr(self._typer, "start", None)
        if start is None:
            return
        try:
            changed = start()
        except Exception as error:  # each final will say it again; the session goes on
            log.exception("no route to type on this desktop")
            changed = str(error)
        if changed and self._on_error is not None:
            self._on_error(changed)

    def _deliver(self, erase: int, text: str, separate: bool) -> None:
        erase = min(erase, len(self._delivered))
        if separate and self._delivered:
            text = f" {text}"
        if self._typer is not None:
            if self._typer.focused_window_pid() == os.getpid():
                # Scriba's own window has the focus (Start was just clicked): keys typed there would land in its
                # widgets, an open transcript say. The text is in the panel already.
                if self._on_error is not None:
                    self._on_error("not typed: Scriba's own window has the focus")
                return
            self._typer.erase(erase)
            self._typer.type_text(text)
        else:
            copy_text(self._delivered[: len(self._delivered) - erase] + text, self.system, self._env)
        self._delivered = self._delivered[: len(self._delivered) - erase] + text

"""A global hotkey on X11: a passive grab (XGrabKey) on the root window, so the key reaches Scriba whichever
program has the focus, and reaches no other program.

Lock modifiers (Caps Lock, Num Lock) are part of a key event's state, so the key is grabbed once with each
combination of them: otherwise the hotkey would stop working whenever Num Lock is on.
"""

from __future__ import annotations

import logging
import os
import select
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from app.core.desktop.display import DesktopError, display_system
from app.core.desktop.x11_typing import open_display

log = logging.getLogger(__name__)

# X modifier masks (X.h): ShiftMask, LockMask, ControlMask, Mod1 (Alt), Mod2 (Num Lock), Mod4 (Super)
_SHIFT, _LOCK, _CONTROL, _MOD1, _MOD2, _MOD4 = 1, 2, 4, 8, 16, 64
_MODIFIER_NAMES = {
    "shift": _SHIFT,
    "ctrl": _CONTROL,
    "control": _CONTROL,
    "alt": _MOD1,
    "super": _MOD4,
    "win": _MOD4,
    "meta": _MOD4,
}
_IGNORED_LOCKS = (0, _LOCK, _MOD2, _LOCK | _MOD2)
# A release followed this quickly by a press of the same key is the keyboard's auto-repeat, not the person.
_AUTOREPEAT_GAP_S = 0.03


def check_hotkey_support(env: Mapping[str, str] | None = None) -> None:
    """DesktopError unless a global hotkey can be grabbed here (an X11 session)."""
    system = display_system(os.environ if env is None else env)
    if system == "wayland":
        raise DesktopError(
            "Wayland does not let a program grab a global hotkey through X11: bind a shortcut to "
            "`scriba dictate` in the desktop's keyboard settings instead (docs/DESKTOP.md)"
        )
    if system == "none":
        raise DesktopError("a global hotkey needs an X11 display (DISPLAY is not set)")
    if system != "x11":
        raise DesktopError(f"a global hotkey is not built for {system} yet (designed in docs/DESKTOP.md)")


@dataclass(frozen=True)
class Hotkey:
    """A key with modifiers, as a person writes it: "ctrl+alt+d", "super+space", "F9"."""

    text: str
    modifiers: int  # X modifier mask
    keysym: int


def parse_hotkey(text: str) -> Hotkey:
    from Xlib import XK

    parts = [part.strip() for part in text.split("+")]
    if not parts or not all(parts):
        raise DesktopError(f"hotkey {text!r}: write it as modifiers and a key joined by '+', e.g. ctrl+alt+d")
    *modifier_names, key = parts
    modifiers = 0
    for name in modifier_names:
        if name.lower() not in _MODIFIER_NAMES:
            known = ", ".join(sorted(_MODIFIER_NAMES))
            raise DesktopError(f"hotkey {text!r}: unknown modifier {name!r} (known: {known})")
        modifiers |= _MODIFIER_NAMES[name.lower()]
    keysym = 0
    # A letter is its key: "D" means the d key (X names the shifted symbol "D" otherwise), "f9" means F9.
    candidates = (key.lower(),) if len(key) == 1 else (key, key.capitalize(), key.lower(), key.upper())
    for candidate in candidates:
        keysym = XK.string_to_keysym(candidate)
        if keysym:
            break
    if not keysym:
        raise DesktopError(f"hotkey {text!r}: unknown key {key!r} (X keysym names: a, F9, space, Pause, …)")
    if keysym < 0x100 and not modifiers & ~_SHIFT:
        # A character key (Latin-1 keysyms) grabbed alone would never reach any program again while Scriba runs.
        raise DesktopError(f"hotkey {text!r} would take that key from every program: add ctrl, alt or super to it")
    return Hotkey(text=text, modifiers=modifiers, keysym=keysym)


class X11GlobalHotkey:
    """Calls ``on_press`` and ``on_release`` (on its own thread) when the hotkey goes down and up, whichever
    window has the focus. ``start()`` raises DesktopError when another program holds the same key."""

    def __init__(
        self,
        hotkey: Hotkey,
        on_press: Callable[[], None],
        on_release: Callable[[], None] | None = None,
        display_name: str | None = None,
    ) -> None:
        self.hotkey = hotkey
        self._on_press = on_press
        self._on_release = on_release
        self._display_name = display_name
        self._display: Any = None
        self._keycode = 0
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        from Xlib import X
        from Xlib.error import CatchError

        display = open_display(self._display_name)
        keycode = display.keysym_to_keycode(self.hotkey.keysym)
        if not keycode:
            display.close()
            raise DesktopError(f"hotkey {self.hotkey.text!r}: the keyboard layout has no such key")
        root = display.screen().root
        refused = CatchError()
        for locks in _IGNORED_LOCKS:
            root.grab_key(keycode, self.hotkey.modifiers | locks, True, X.GrabModeAsync, X.GrabModeAsync, refused)
        display.sync()
        if refused.get_error() is not None:
            display.close()
            raise DesktopError(f"hotkey {self.hotkey.text!r} is already taken by another program: choose another one")
        self._display, self._keycode = display, keycode
        self._thread = threading.Thread(target=self._listen, name="hotkey", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> X11GlobalHotkey:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _listen(self) -> None:
        from Xlib import X

        display = self._display
        down = False
        waiting: Any = None  # an event read while looking for auto-repeat, still to be handled
        try:
            while not self._stopping.is_set():
                event, waiting = waiting or _next_event(display, 0.1), None
                if event is None or getattr(event, "detail", None) != self._keycode:
                    continue
                if event.type == X.KeyPress and not down:
                    down = True
                    self._call(self._on_press)
                elif event.type == X.KeyRelease and down:
                    # Auto-repeat of a held key arrives as a release and a press with the same time stamp.
                    following = _next_event(display, _AUTOREPEAT_GAP_S)
                    if (
                        following is not None
                        and following.type == X.KeyPress
                        and following.detail == event.detail
                        and following.time == event.time
                    ):
                        continue
                    waiting = following
                    down = False
                    if self._on_release is not None:
                        self._call(self._on_release)
        except Exception:  # the X server went away (the session ended): nothing more will come
            log.warning("the hotkey listener lost its X connection (did the X session end?)", exc_info=True)
        finally:
            try:
                root = display.screen().root
                for locks in _IGNORED_LOCKS:
                    root.ungrab_key(self._keycode, self.hotkey.modifiers | locks)
                display.close()
            except Exception:  # the same lost connection: the server dropped the grabs with it
                log.debug("ungrabbing the hotkey failed", exc_info=True)

    @staticmethod
    def _call(callback: Callable[[], None]) -> None:
        try:
            callback()
        except Exception:  # a failing callback must not end the listener
            log.exception("hotkey callback failed")


def _next_event(display: Any, timeout_s: float) -> Any:
    """The next event from the server, or None when none comes within ``timeout_s``."""
    if not display.pending_events():
        select.select([display.fileno()], [], [], timeout_s)
        if not display.pending_events():
            return None
    return display.next_event()

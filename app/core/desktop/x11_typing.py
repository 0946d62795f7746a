"""Text typed into the focused X11 window through the XTest extension (python-xlib).

Why python-xlib rather than a ctypes binding to libXtst: it speaks the X protocol itself in pure Python, so it
needs no C library at run time (it works in the frozen bundle and on a system without libXtst), it already
implements the requests this needs (XTEST FakeInput, GetKeyboardMapping/ChangeKeyboardMapping, GrabKey for the
hotkey) with real error objects, and it is what pynput, the common Python input library, builds on. A ctypes
binding would mean hand-written structures for XEvent and error handlers that call back into Python.

XTest sends key *codes*; which character a code gives depends on the keyboard layout. Each character is looked
up in the current layout (plain or with Shift). A character the layout cannot type (é on a US layout, 你, an
em dash) is bound for a moment to a spare key code (one with no symbols in the layout) as its Unicode keysym,
and that code is pressed: the technique xdotool uses. Clients learn of the new binding through MappingNotify,
which the server sends before the key event, so no clipboard is needed and the person's clipboard is untouched.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from typing import Any

from app.core.desktop.display import DesktopError

log = logging.getLogger(__name__)

_SHIFT_KEYSYM = 0xFFE1  # Shift_L
_NAMED_KEYSYMS = {"\n": 0xFF0D, "\t": 0xFF09, "\b": 0xFF08}  # Return, Tab, BackSpace
# A spare code rebound to another character is used again only after this pause: a client may look the code up
# a moment after its key event arrives, and must still find the character that event meant.
_REBIND_PAUSE_S = 0.05
# Rows of the modifier mapping (Shift, Lock, Control, Mod1-Mod5) that are locks, not held keys: Lock (Caps Lock)
# and Mod2 (Num Lock on every common layout).
_LOCK_MODIFIER_INDICES = (1, 4)


def char_keysym(char: str) -> int:
    """The X keysym of one character: Latin-1 keysyms equal the code point, the rest are Unicode keysyms."""
    if char in _NAMED_KEYSYMS:
        return _NAMED_KEYSYMS[char]
    code = ord(char)
    if 0x20 <= code <= 0x7E or 0xA0 <= code <= 0xFF:
        return code
    return 0x01000000 | code


def open_display(name: str | None) -> Any:
    """A python-xlib connection to the X server (``name`` like ":0"; None: $DISPLAY)."""
    try:
        from Xlib import display as xdisplay
        from Xlib import error as xerror
    except ImportError as error:  # a dependency of Scriba; absent only in a broken install
        broken = DesktopError("this installation of Scriba cannot type into other programs: reinstall Scriba")
        broken.cli_hint = "(python-xlib is missing: `pip install python-xlib`)"
        raise broken from error
    try:
        return xdisplay.Display(name)
    except (xerror.DisplayError, xerror.ConnectionClosedError, OSError) as error:
        raise DesktopError(f"cannot reach the X server {name or '$DISPLAY'}: {error}") from error


class XTestTyper:
    """Types text at the keyboard focus of an X server. One connection, used from one thread at a time."""

    def __init__(self, display_name: str | None = None, *, key_delay_s: float = 0.002) -> None:
        self._display = open_display(display_name)
        if not self._display.has_extension("XTEST"):
            self._display.close()
            raise DesktopError(
                f"the X server {display_name or '$DISPLAY'} has no XTEST extension, so Scriba cannot type into "
                "other programs: use copy mode instead"
            )
        self.key_delay_s = key_delay_s
        info = self._display.display.info
        self._min_keycode: int = info.min_keycode
        self._count: int = info.max_keycode - info.min_keycode + 1
        self._spare: list[int] = []  # key codes with no symbol in the layout, free to bind a character to
        self._bound: OrderedDict[int, int] = OrderedDict()  # keysym -> spare code, least recently used first
        self._bound_at: dict[int, float] = {}  # spare code -> when it was last pressed
        self._layout: dict[int, tuple[int, int]] = {}
        self._read_layout()

    def _read_layout(self) -> None:
        """keysym -> (code, level: 0 plain, 1 Shift), and the spare codes. Read again before each text, so a
        layout switched during a session is followed."""
        mapping = self._display.get_keyboard_mapping(self._min_keycode, self._count)
        layout: dict[int, tuple[int, int]] = {}
        spare = []
        for offset, keysyms in enumerate(mapping):
            code = self._min_keycode + offset
            if code in self._bound.values():
                continue
            if not any(keysyms):
                spare.append(code)
                continue
            # Levels 0 and 1 of the first group only: higher levels need AltGr or a group switch, which the
            # spare-code path below handles without touching the person's modifier state.
            for level in (0, 1):
                if level < len(keysyms) and keysyms[level] and keysyms[level] not in layout:
                    layout[keysyms[level]] = (code, level)
        self._layout = layout
        self._spare = spare
        shift = layout.get(_SHIFT_KEYSYM)
        self._shift_code = shift[0] if shift else None

    def type_text(self, text: str) -> None:
        """Press and release the keys of ``text`` at the current keyboard focus.

        Modifier keys held down meanwhile (Ctrl+Alt of a push-to-talk hotkey) would turn the text into commands:
        they are released for the time of the typing and pressed again after it, as xdotool's --clearmodifiers
        does. Caps Lock, when on, is switched off meanwhile: it would invert the case of every letter."""
        from Xlib import X
        from Xlib.ext import xtest

        self._read_layout()
        held = self._held_modifier_keys()
        caps_lock = self._caps_lock_key() if self._caps_lock_on() else None
        for code in held:
            xtest.fake_input(self._display, X.KeyRelease, code)
        if caps_lock is not None:
            self._tap(caps_lock)
        try:
            self._type_keys(text)
        finally:
            if caps_lock is not None:
                self._tap(caps_lock)
            for code in held:
                xtest.fake_input(self._display, X.KeyPress, code)
            self._display.sync()

    def erase(self, count: int) -> None:
        """Press BackSpace ``count`` times at the keyboard focus: takes back the last characters typed there (a
        dictation command's "scratch that"). Held modifiers are set aside as for text: Ctrl+BackSpace would
        delete whole words."""
        if count > 0:
            self.type_text("\b" * count)

    def _tap(self, code: int) -> None:
        from Xlib import X
        from Xlib.ext import xtest

        xtest.fake_input(self._display, X.KeyPress, code)
        xtest.fake_input(self._display, X.KeyRelease, code)
        self._display.sync()

    def _caps_lock_on(self) -> bool:
        from Xlib import X

        return bool(self._display.screen().root.query_pointer().mask & X.LockMask)

    def _caps_lock_key(self) -> int | None:
        """The key that switches the Lock modifier (Caps Lock), from the modifier mapping."""
        codes = [code for code in self._display.get_modifier_mapping()[1] if code]
        return codes[0] if codes else None

    def _type_keys(self, text: str) -> None:
        from Xlib import X
        from Xlib.ext import xtest

        for char in text:
            keysym = char_keysym(char)
            found = self._layout.get(keysym)
            if found is not None and (found[1] == 0 or self._shift_code is not None):
                code, level = found
            else:
                spare = self._bind_spare(keysym)
                if spare is None:
                    log.warning("cannot type %r: no spare key code to bind it to", char)
                    continue
                code, level = spare, 0
            if level == 1:
                xtest.fake_input(self._display, X.KeyPress, self._shift_code)
            xtest.fake_input(self._display, X.KeyPress, code)
            xtest.fake_input(self._display, X.KeyRelease, code)
            if level == 1:
                xtest.fake_input(self._display, X.KeyRelease, self._shift_code)
            self._display.sync()
            if code in self._bound_at:
                self._bound_at[code] = time.monotonic()
            if self.key_delay_s:
                time.sleep(self.key_delay_s)

    def _bind_spare(self, keysym: int) -> int | None:
        if keysym in self._bound:
            self._bound.move_to_end(keysym)
            return self._bound[keysym]
        if self._spare:
            code = self._spare.pop(0)
        elif self._bound:
            _, code = self._bound.popitem(last=False)
            wait = self._bound_at.get(code, 0.0) + _REBIND_PAUSE_S - time.monotonic()
            if wait > 0:
                time.sleep(wait)
        else:
            return None
        self._display.change_keyboard_mapping(code, [(keysym, keysym)])
        self._display.sync()
        self._bound[keysym] = code
        self._bound_at[code] = time.monotonic()
        return code

    def close(self) -> None:
        """Give the borrowed key codes back to the layout (empty again) and close the connection."""
        try:
            if self._bound:
                # The last key events must be looked up with the characters they were typed with.
                last = max(self._bound_at.values(), default=0.0)
                time.sleep(max(0.0, last + _REBIND_PAUSE_S - time.monotonic()))
                for code in self._bound.values():
                    self._display.change_keyboard_mapping(code, [(0, 0)])
                self._display.sync()
                self._bound.clear()
        finally:
            self._display.close()

    def focused_window_pid(self) -> int | None:
        """The process id of the program whose window has the keyboard focus (its top-level's _NET_WM_PID, which
        Qt, GTK and most toolkits set), or None when unknown."""
        focus = self._display.get_input_focus().focus
        if isinstance(focus, int):  # PointerRoot or None: no window has it
            return None
        pid_atom = self._display.intern_atom("_NET_WM_PID")
        root = self._display.screen().root
        window = focus
        for _ in range(32):  # a window tree is shallow; the bound guards against a cycle from a broken server
            if window is None or window.id == root.id:
                return None
            value = window.get_full_property(pid_atom, 0)  # 0: AnyPropertyType
            if value is not None and len(value.value):
                return int(value.value[0])
            window = window.query_tree().parent
        return None

    def _held_modifier_keys(self) -> list[int]:
        """Key codes of Shift, Ctrl, Alt, Super or AltGr keys that are down now (a push-to-talk hotkey, say).
        Caps Lock and Num Lock are left alone: pressing their keys again would toggle them."""
        pressed = self._display.query_keymap()
        held: list[int] = []
        for index, codes in enumerate(self._display.get_modifier_mapping()):
            if index in _LOCK_MODIFIER_INDICES:
                continue
            held.extend(code for code in codes if code and pressed[code // 8] & (1 << (code % 8)))
        return held

"""A guard against a PySide6 defect that kills the window after minutes, not seconds.

PySide6 6.12.0's wheels on Python 3.11 drop one reference to None on every Qt call that returns nothing and one
to True on every Signal.emit. None's count starts in the thousands, so the window aborted with "Fatal Python
error: none_dealloc" about ten minutes after it opened (the GPU panel alone makes ~25 such calls a second).
Test runs are too short to get there; this test counts the references instead.
"""

from __future__ import annotations

import sys

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QLabel
from pytestqt.qtbot import QtBot


class _Relay(QObject):
    fired = Signal(object)


def test_void_calls_and_emits_keep_none_and_true_alive(qtbot: QtBot) -> None:
    label = QLabel()
    qtbot.addWidget(label)
    relay = _Relay()
    received: list[object] = []
    relay.fired.connect(received.append)
    calls = 2000
    none_before, true_before = sys.getrefcount(None), sys.getrefcount(True)
    for number in range(calls):
        label.setText(str(number))
        label.update()
        relay.fired.emit(number)
    none_lost = none_before - sys.getrefcount(None)
    true_lost = true_before - sys.getrefcount(True)
    assert len(received) == calls
    # A sound binding loses none; the defect loses 2 * calls of None and `calls` of True. Allow for noise from
    # other threads (the interpreter's own None references come and go).
    assert none_lost < calls // 10, f"{none_lost} references to None lost over {calls} calls"
    assert true_lost < calls // 10, f"{true_lost} references to True lost over {calls} emits"

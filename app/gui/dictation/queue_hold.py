"""The window's setting "Pause the file queue while I speak": the dictation panel's speech holds the queue."""

from __future__ import annotations

from collections.abc import Callable

from app.core.dictation.queue_hold import SpeechQueueHold
from app.core.queue.worker import QueueWorker
from app.gui.dictation.panel import DictationPanel, PanelState


class PanelQueueHold:
    """Speech heard by ``panel`` holds ``worker`` while ``enabled()`` (the setting) says so; the end of a run,
    the setting turned off and :meth:`close` release it at once."""

    def __init__(self, panel: DictationPanel, worker: QueueWorker, enabled: Callable[[], bool]) -> None:
        self.hold = SpeechQueueHold(lambda: worker.hold("dictation"), worker.release_hold)
        self._enabled = enabled
        panel.speaking.connect(self._speaking)
        panel.state_changed.connect(self._state_changed)

    def _speaking(self, active: bool) -> None:
        if self._enabled() or not active:
            self.hold.speaking(active)

    def _state_changed(self, state: PanelState) -> None:
        if state is PanelState.IDLE:
            self.hold.run_ended()

    def setting_changed(self) -> None:
        if not self._enabled():
            self.hold.run_ended()  # turned off while held: the job goes on now

    def close(self) -> None:
        self.hold.close()

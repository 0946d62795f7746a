"""An engine process whose GPU library aborts it, as a cuDNN that cannot be loaded does on Linux: the first job
sent to it on "cuda" ends the process with SIGABRT at the point the model would go onto the card. A job on the
CPU goes to the real engine (tiny.en). Importable by the "spawn" child, so it lives in a module of its own."""

from __future__ import annotations

import os
from multiprocessing.connection import Connection
from typing import Any


class _FirstThen:
    """The connection, with the request already read handed out first."""

    def __init__(self, connection: Connection, first: Any) -> None:
        self._connection = connection
        self._first: list[Any] = [first]

    def recv(self) -> Any:
        return self._first.pop() if self._first else self._connection.recv()

    def send(self, message: Any) -> None:
        self._connection.send(message)


def aborts_on_the_gpu(connection: Connection, parent_pid: int, niceness: int) -> None:
    from app.core.queue.engine_process import engine_process_main

    request = connection.recv()
    if request is not None:
        _, options = request
        if options.transcription.device == "cuda":
            connection.send(("progress", _loading_progress()))
            os.abort()  # what libcudnn's loader does when a sub-library is missing: no Python error, no text
    engine_process_main(_FirstThen(connection, request), parent_pid, niceness)  # type: ignore[arg-type]


def _loading_progress() -> Any:
    from app.core.engine.pipeline import Progress

    return Progress("transcribe", 0.0, 0.05, 30.0)

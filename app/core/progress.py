"""How far work has come, one callback type per meaning (the pipeline's own, a stage and its job fraction, is
``app.core.engine.pipeline.PipelineProgress``)."""

from __future__ import annotations

from collections.abc import Callable

# The share of one stage done, 0 to 1 (transcription, diarization).
FractionProgress = Callable[[float], None]
# A download: bytes done, bytes in all.
DownloadProgress = Callable[[int, int], None]

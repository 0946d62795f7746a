"""One estimate row spread over N machines of the same offer: time, cost, and how many machines actually help.

What N machines change, and what they do not:

* every machine boots, installs Scriba and fetches the model at the same time: that start-up is paid N times
  but waited for once;
* the transcription and diarization divide by N (each machine loads the model once), as long as there are at
  least N files or pieces: a file goes to one machine, a long one in pieces of 15 minutes;
* the upload does not divide: every file still goes up through the user's one uplink. Once the machines
  transcribe faster than the uplink brings audio, more machines only wait (and bill) for it. The useful count is
  where the divided work meets the upload time;
* each machine is billed from its boot until the queue has nothing left for it (idle machines are ended then).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.cloud.pricing.estimate import Option, billed_seconds
from app.core.engine.stitch import DEFAULT_PIECE_S


@dataclass(frozen=True)
class Spread:
    nodes: int
    wall_s: float  # from the first launch to the last transcript home
    cost_usd: float  # all machines together
    useful_nodes: int  # more than this and the uplink, not the GPUs, sets the pace
    upload_bound: bool  # this many machines already wait for the uplink


def spread_over(option: Option, nodes: int, files: int, minimum_billing_s: float = 0.0) -> Spread:
    """``option`` (one machine, from :func:`app.cloud.pricing.estimate.estimate`) on ``nodes`` machines."""
    if nodes < 1:
        raise ValueError(f"a fleet needs at least one machine, not {nodes}")
    parts = option.breakdown
    start_s = parts.boot_s + parts.setup_s + parts.model_download_s
    model_load_s = max(0.0, parts.transcribe_s - option.audio_seconds / option.transcribe_speed.x_realtime)
    work_s = parts.transcribe_s + parts.diarize_s - model_load_s  # the GPU time the audio itself needs
    # A file goes to one machine, except that a fleet cuts long files into pieces of DEFAULT_PIECE_S (app/core/
    # engine/stitch.py); more machines than files and pieces find nothing to do. (Only the total length is known
    # here, so the pieces are counted as if the audio were in files of equal length.)
    units = max(files, math.floor(option.audio_seconds / DEFAULT_PIECE_S)) if nodes > 1 else files
    working = min(nodes, max(1, units))
    per_node_work_s = work_s / working + model_load_s
    upload_s = parts.upload_s
    # The first file has to arrive before anything can start, and the queue runs as fast as its slower side.
    first_file_s = upload_s / max(1, files)
    busy_s = first_file_s + max(per_node_work_s, upload_s)
    wall_s = start_s + busy_s + parts.download_s
    useful = min(max(1, math.ceil(work_s / upload_s)) if upload_s > 0 else nodes, max(1, units))
    node_s = start_s + busy_s  # each machine bills until the queue is empty (it is ended then)

    def billed(seconds: float) -> float:
        return billed_seconds(seconds, option.offer.billing, minimum_billing_s) if option.usd_per_hour > 0 else 0.0

    idle_s = start_s + first_file_s  # a machine that finds the queue empty is ended at once
    cost_s = working * billed(node_s) + (nodes - working) * billed(idle_s)
    return Spread(
        nodes=nodes,
        wall_s=wall_s,
        cost_usd=cost_s / 3600 * option.usd_per_hour,
        useful_nodes=useful,
        upload_bound=upload_s >= per_node_work_s,
    )

"""Both ends of the fleet's queue: the Celery settings they share, and what a GPU node runs.

A node is one Celery worker (``scriba worker fleet-node``) with one job at a time (``--pool solo``: one process
holds the models on its GPU) and no job reserved ahead (prefetch 1, acknowledged late): a job is taken off the
queue for good only once its transcript is back in Redis. A node that dies, is preempted or loses its tunnel
leaves its job unacknowledged, and Redis gives it to another node once the visibility timeout has passed.

Everything on the wire is JSON (``accept_content=["json"]``): nothing a node sends is ever unpickled here. A job's
failure (a damaged file) is data in the result, never an exception object to rebuild on this side.
"""

from __future__ import annotations

import json
import socket
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

TASK_NAME = "scriba.fleet.transcribe"
QUEUE = "scriba-fleet"
RESULT_VERSION = 1


def celery_app(broker_url: str, visibility_timeout_s: float) -> Any:
    from celery import Celery

    app = Celery("scriba-fleet", broker=broker_url, backend=broker_url, set_as_current=False)
    transport = {"visibility_timeout": visibility_timeout_s}
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        result_accept_content=["json"],
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_default_queue=QUEUE,
        task_track_started=True,
        broker_transport_options=transport,
        result_backend_transport_options=transport,
        broker_connection_retry_on_startup=True,
        result_expires=7 * 24 * 3600,
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
    )
    return app


def _signature(answer: dict[str, Any], key: str) -> str:
    """HMAC-SHA256 of the answer's canonical JSON (every field but the signature) under ``key``."""
    import hashlib
    import hmac

    body = {name: value for name, value in answer.items() if name != "signature"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    return hmac.new(key.encode(), text, hashlib.sha256).hexdigest()


def sign_answer(answer: dict[str, Any], key: str) -> dict[str, Any]:
    """The answer with its signature under the node's own key. Every node can write to the queue's result keys
    (the broker's ACL cannot tell one node's from another's): the signature tells this machine which node of the
    fleet wrote an answer, so that an answer no node signed, or one passed off as another node's, is refused.
    (A node can still lie about its own jobs: a rented machine is trusted with the audio it is sent.)"""
    return answer | {"signature": _signature(answer, key)}


def signed_by(answer: dict[str, Any], key: str) -> bool:
    import hmac

    try:
        expected = _signature(answer, key)
    except (TypeError, ValueError):  # not JSON (an object) is not something a node signed
        return False
    return hmac.compare_digest(expected, str(answer.get("signature", "")))


def done_key(fleet_id: str, index: int) -> str:
    """Set by this machine when a file's transcript is in: a copy of its job still queued is then skipped."""
    return f"scriba-fleet:{fleet_id}:done:{index}"


def _fetch(url: str, target: Path, attempts: int = 3) -> None:
    """Download ``url`` to ``target``; a dropped tunnel is retried (it comes back when SSH reconnects)."""
    for attempt in range(attempts):
        try:
            with urllib.request.urlopen(url, timeout=60) as response, target.open("wb") as out:
                while chunk := response.read(1 << 20):
                    out.write(chunk)
            return
        except OSError:
            if attempt + 1 == attempts:
                raise
            time.sleep(2.0 * (attempt + 1))


def transcribe_job(engine: Any, files_port: int, job: dict[str, Any], node: str) -> dict[str, Any]:
    """One job on this node: fetch the recording, run the engine, the transcript as JSON (or why it failed)."""
    from app.core.errors import ScribaError
    from app.core.queue.jobs import JobOptions

    started = time.monotonic()
    result: dict[str, Any] = {"version": RESULT_VERSION, "index": job.get("index"), "node": node}
    try:
        options = JobOptions.from_dict(job["options"])
        suffix = Path(str(job.get("name", "audio"))).suffix[:16]
        with tempfile.TemporaryDirectory(prefix="scriba-fleet-") as folder:
            path = Path(folder) / f"recording{suffix}"
            _fetch(f"http://127.0.0.1:{files_port}/{job['token']}", path)
            transcript = engine.run(path, options.to_pipeline(None))
            if job.get("voices") and transcript.diarization is not None:
                # A piece of a long file: its speakers are matched with the other pieces' at home, by voice.
                result["voices"] = {speaker: stats.to_dict() for speaker, stats in _voices(path, transcript).items()}
        result["transcript"] = transcript.to_dict()
    except ScribaError as error:
        result["error"] = str(error)
    except Exception as error:  # one file's unexpected failure is that file's, never the node's
        result["error"] = f"unexpected error on {node} ({type(error).__name__}: {error})"
    result["seconds"] = round(time.monotonic() - started, 2)
    return result


def watch_node(
    access: Any,
    name: str,
    broker_timeout_s: float,
    deadline: float | None,
    on_expire: list[str] | None,
    poll_s: float = 5.0,
) -> None:
    """The node's watchdog (a daemon thread). Each ``poll_s`` it counts up the node's heartbeat in the broker
    (:func:`beat_key`: how the computer that started the fleet tells a node whose link dropped silently from one
    that is busy). When the broker has not answered for ``broker_timeout_s`` (that computer crashed, slept or
    lost its network: the tunnel is gone) or the budget's deadline has passed, it runs ``on_expire`` (the
    provider's way for a machine to end itself) and ends this process. Nobody else would: Celery retries a lost
    broker forever, and a rented machine bills while it does."""
    import os
    import subprocess

    last_answer = time.monotonic()
    first = True
    while True:
        if not first:  # the first beat at once: it comes before this node can take any job
            time.sleep(poll_s)
        first = False
        reason = None
        if _beat(access, beat_key(name)):
            last_answer = time.monotonic()
        elif time.monotonic() - last_answer > broker_timeout_s:
            reason = f"the fleet's queue has not answered for {broker_timeout_s:.0f} s"
        if deadline is not None and time.time() > deadline:
            reason = "the budget's hard deadline was reached"
        if reason is None:
            continue
        print(json.dumps({"node": name, "expired": reason}), flush=True)
        if on_expire:
            try:
                done = subprocess.run(on_expire, capture_output=True, text=True, timeout=120)
                print(f"on-expire exited {done.returncode}: {done.stderr.strip()[-300:]}", flush=True)
            except (OSError, subprocess.SubprocessError) as error:
                print(f"on-expire failed: {error}", flush=True)
        os._exit(3)  # the whole worker, whatever state Celery's threads are in


def beat_key(node: str) -> str:
    return f"scriba-fleet:beat:{node}"


def _beat(access: Any, key: str) -> bool:
    """Count the heartbeat up; whether the broker took it."""
    from app.cloud.fleet.broker import ask

    reply = ask(access, "INCR", key, timeout_s=5.0)
    return reply is not None and reply.startswith(b":")


_embedding: Any = None  # the node's CAM++ model, loaded at its first piece


def _voices(path: Path, transcript: Any) -> dict[str, Any]:
    """Each speaker's voice summary in a piece (app/core/engine/stitch.py)."""
    global _embedding
    import torch

    from app.core.engine.audio import decode_audio
    from app.core.engine.diarize.bundled_models import SpeakerEmbedding
    from app.core.engine.stitch import voice_stats

    if _embedding is None:
        _embedding = SpeakerEmbedding("cuda" if torch.cuda.is_available() else "cpu")
    turns = [(turn.start, turn.end, turn.speaker) for turn in transcript.diarization.turns]
    return voice_stats(_embedding, decode_audio(path).samples, turns)


def run_node(
    broker_port: int,
    files_port: int,
    name: str,
    visibility_timeout_s: float,
    broker_timeout_s: float = 180.0,
    deadline: float | None = None,
    on_expire: list[str] | None = None,
) -> int:
    """The node's worker loop; the broker password comes on standard input (never on a command line)."""
    import threading

    from app.cloud.fleet.broker import NODE_USER, BrokerAccess
    from app.core.engine.pipeline import Engine

    password = sys.stdin.readline().strip()
    key = sys.stdin.readline().strip()  # this node's own: it signs every answer (see sign_answer)
    if not password or not key:
        print("scriba worker fleet-node: no broker password and signing key on standard input", file=sys.stderr)
        return 2
    access = BrokerAccess("127.0.0.1", broker_port, NODE_USER, password)
    app = celery_app(access.url(), visibility_timeout_s)
    threading.Thread(
        target=watch_node,
        args=(access, name, broker_timeout_s, deadline, on_expire, min(5.0, max(0.5, broker_timeout_s / 4))),
        daemon=True,
        name="watchdog",
    ).start()
    engine = Engine()  # one per node: the models stay loaded from one job to the next

    @app.task(name=TASK_NAME)  # type: ignore[untyped-decorator]
    def transcribe(job: dict[str, Any]) -> dict[str, Any]:
        if app.backend.client.exists(done_key(str(job.get("fleet")), int(job.get("index", -1)))):
            return {"version": RESULT_VERSION, "index": job.get("index"), "node": name, "skipped": True}
        return sign_answer(transcribe_job(engine, files_port, job, name), key)

    print(json.dumps({"node": name, "host": socket.gethostname(), "ready": True}), flush=True)
    app.worker_main(
        [
            "worker",
            "--pool=solo",
            "--concurrency=1",
            "--prefetch-multiplier=1",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            f"--hostname={name}@%h",
            "--loglevel=WARNING",
            f"--queues={QUEUE}",
        ]
    )
    return 0

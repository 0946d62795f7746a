"""RunPod pods as RunPod's documented API shows them (tests/cloud/test_providers.py's shapes), for fleet tests
whose "pods" are real sshds on this machine: created one after another (pod0, pod1, …), described as running
with the sshd's address (or as booting for ever), destroyed on DELETE and unknown (404) from then on."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from tests.cloud.replay_server import Recorded, ReplayServer, Reply
from tests.cloud.test_providers import runpod_pod


class ReplayedPods:
    def __init__(self, ports: Sequence[int], booting: bool = False) -> None:
        """``ports[i]``: the sshd that pod i is (on 127.0.0.1); ``booting``: every pod stays PROVISIONING."""
        self.ports = list(ports)
        self.booting = booting
        self.created: list[str] = []
        self.ended_at: dict[str, float] = {}  # pod -> when its DELETE came (time.monotonic)
        self._lock = threading.Lock()

    def route(self, api: ReplayServer) -> None:
        api.route("POST", "/v2/pods", self._create)
        for index in range(len(self.ports)):
            api.route("GET", f"/v2/pods/pod{index}", self._pod)
            api.route("DELETE", f"/v2/pods/pod{index}", self._pod)
        api.route("GET", "/v2/pods", lambda request: {"pods": []})

    def _create(self, request: Recorded) -> dict[str, Any]:
        with self._lock:
            pod_id = f"pod{len(self.created)}"
            self.created.append(pod_id)
        return {**runpod_pod("PROVISIONING", name=request.json()["name"]), "id": pod_id}

    def _pod(self, request: Recorded) -> Any:
        pod_id = request.path.rsplit("/", 1)[1]
        if request.method == "DELETE":
            self.ended_at.setdefault(pod_id, time.monotonic())
            return {}
        if pod_id in self.ended_at:
            return Reply(404, {"error": "pod not found"})
        if self.booting:
            return {**runpod_pod("PROVISIONING"), "id": pod_id}
        answer = runpod_pod("RUNNING", direct=True)
        answer["ssh"]["direct"].update(host="127.0.0.1", port=self.ports[int(pod_id[3:])])
        return {**answer, "id": pod_id}

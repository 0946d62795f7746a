"""RunPod (https://runpod.io): GPU containers ("pods") at a list price per GPU type and cloud tier.

Uses RunPod's REST API v2 (base ``https://api.runpod.io/v2``, OpenAPI "Runpod REST API" 2.0.0, in beta when
this was written; the v1 API at rest.runpod.io is deprecated). Endpoints and shapes from that OpenAPI document
(github.com/runpod/docs, ``api-reference-v2/openapi.json``) and its migration guide:

* ``GET /catalog/gpus?include=AVAILABILITY&product=POD&cloud=SECURE`` -> ``{"gpus": [{id, name, manufacturer,
  memory (GB), secure, community, price: {secure, community}, availability: NONE|LOW|MEDIUM|HIGH}]}``
* ``POST /pods {name, image, gpu: {id, count, minCudaVersion}, cloud, disk, ports: ["22/tcp"], env}`` -> 201 with
  the pod. ``400`` covers both a broken rule and "no capacity" (only the human ``detail`` tells them apart, says
  the reference); ``402`` is an empty balance.
* ``GET /pods/{id}`` -> pod ``{id, name, status: PROVISIONING|STARTING|RUNNING|EXITED|ERROR|TERMINATED,
  ssh: {direct: {host, port, username}}, runtime: {ports: [{private, public, type, ip}]}}``
* ``GET /pods`` -> ``{"pods": [...]}``; ``DELETE /pods/{id}`` -> 204 (terminated for good, gone from the list).
* errors are RFC 9457 problems ``{title, status, detail}``; 429 carries ``Retry-After``.

SSH: RunPod's images start sshd with the keys in the ``PUBLIC_KEY`` environment variable, and ``ssh.direct`` (the
public IP and the port mapped to the pod's 22/tcp) appears only once the pod runs. An image pull can take minutes
before that, so :meth:`Provider.wait_ready` keeps polling a RUNNING pod that has no direct endpoint yet.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from app.cloud.providers.base import (
    LABEL_PREFIX,
    ApiError,
    AuthError,
    Clock,
    InsufficientBalance,
    NoCapacity,
    NotFound,
    Provider,
    ProviderError,
    Sleep,
    check_label,
    normalize_gpu_name,
)
from app.cloud.providers.http import provider_client, today_iso
from app.cloud.types import Instance, InstanceState, Offer

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.runpod.io/v2"
# The reference's own example image (CUDA 12.8, PyTorch): starts sshd from PUBLIC_KEY like every official image.
DEFAULT_IMAGE = "runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404"
DEFAULT_DISK_GB = 40
# faster-whisper's ctranslate2 needs a CUDA 12 driver (FACTS.md); "major.minor" as the API wants it.
MIN_CUDA = "12.0"
# An estimate (image pull + container start), not a measurement.
BOOT_MINUTES = 4.0

_STATES: dict[str, InstanceState] = {
    "PROVISIONING": "booting",
    "STARTING": "booting",
    "RUNNING": "running",
    "EXITED": "stopping",  # stopped: keeps its disk (and bills for it) until terminated
    "ERROR": "failed",
    "TERMINATED": "terminated",
}


def _ssh_endpoint(pod: dict[str, Any]) -> tuple[str | None, int]:
    """The direct SSH endpoint: ``ssh.direct`` when RunPod reports it, else the runtime port mapping of 22/tcp.
    (``ssh.proxy`` carries an interactive shell only; SFTP needs the direct one.)"""
    direct = (pod.get("ssh") or {}).get("direct") if isinstance(pod.get("ssh"), dict) else None
    if isinstance(direct, dict) and direct.get("host") and direct.get("port"):
        return str(direct["host"]), int(direct["port"])
    runtime = pod.get("runtime")
    for port in (runtime.get("ports") or []) if isinstance(runtime, dict) else []:
        if (
            isinstance(port, dict)
            and port.get("private") == 22
            and str(port.get("type") or "tcp") == "tcp"
            and port.get("ip")
            and port.get("public")
        ):
            return str(port["ip"]), int(port["public"])
    return None, 22


class RunPod(Provider):
    name = "runpod"
    title = "RunPod"
    key_name = "runpod_api_key"
    console_url = "https://console.runpod.io/pods"
    ssh_user = "root"

    def self_terminate_command(self, instance_id: str) -> list[str] | None:
        # RunPod documents that every pod has runpodctl with a pod-scoped API key: no key of ours travels.
        return ["runpodctl", "remove", "pod", instance_id]

    def __init__(
        self,
        api_key: str,
        *,
        base_url: str = DEFAULT_BASE_URL,
        image: str = DEFAULT_IMAGE,
        disk_gb: int = DEFAULT_DISK_GB,
        cloud: str = "SECURE",
        min_cuda: str | None = MIN_CUDA,
        timeout_s: float = 30.0,
        max_attempts: int = 5,
        sleep: Sleep = time.sleep,
        clock: Clock = time.monotonic,
    ) -> None:
        super().__init__(sleep=sleep, clock=clock)
        if cloud not in ("SECURE", "COMMUNITY"):
            raise ValueError(f"RunPod cloud must be SECURE or COMMUNITY, not {cloud!r}")
        self.image = image
        self.disk_gb = disk_gb
        self.cloud = cloud
        self.min_cuda = min_cuda
        self._http = provider_client(self, base_url, api_key, timeout_s, max_attempts, self._sleep)

    def offers(self) -> list[Offer]:
        params = {"include": "AVAILABILITY", "product": "POD", "cloud": self.cloud, "count": 1}
        answer = self._http.get("/catalog/gpus", params=params)
        today = today_iso()
        tier = self.cloud.lower()
        rows: list[Offer] = []
        for gpu in self._field(answer, "gpus", list, "GET /catalog/gpus"):
            if not isinstance(gpu, dict) or not gpu.get("id"):
                continue
            if gpu.get("manufacturer") not in (None, "NVIDIA"):
                continue  # the engine runs on CUDA
            if gpu.get(tier) is False or gpu.get("availability") == "NONE":
                continue  # not in this cloud tier, or sold out for pods right now
            price = (gpu.get("price") or {}).get(tier)
            if price is None:
                continue
            rows.append(
                Offer(
                    provider=self.name,
                    offer=str(gpu["id"]),
                    gpu=normalize_gpu_name(str(gpu.get("name") or gpu["id"])),
                    gpu_count=1,
                    vram_gb=float(gpu.get("memory") or 0),
                    usd_per_hour=float(price),
                    spot_usd_per_hour=None,
                    billing="per-second",
                    boot_minutes=BOOT_MINUTES,
                    price_source=f"api:{self.name}",
                    price_date=today,
                    launchable=True,
                )
            )
        return rows

    def launch(self, offer: Offer, ssh_public_key: str, label: str) -> Instance:
        check_label(label)
        gpu: dict[str, Any] = {"id": offer.offer, "count": max(1, offer.gpu_count)}
        if self.min_cuda:
            gpu["minCudaVersion"] = self.min_cuda
        body = {
            "name": label,
            "image": self.image,
            "gpu": gpu,
            "cloud": self.cloud,
            "disk": self.disk_gb,
            "ports": ["22/tcp"],
            # The job's own key only: startSsh would copy the account's keys in instead, and only when none is set.
            "env": {"PUBLIC_KEY": ssh_public_key.strip()},
        }
        try:
            pod = self._http.post("/pods", body, idempotent=False)
        except AuthError as error:
            if error.status == 403:  # documented for create: the account cannot use this GPU pool
                raise NoCapacity(
                    f"RunPod refused {offer.gpu} for this account (HTTP 403). If other GPUs also fail this way, "
                    f"the API key lacks write access: {error}",
                    provider=self.name,
                    status=403,
                ) from None
            raise
        except ApiError as error:
            raise self._launch_error(error, offer) from None
        except ProviderError as error:
            if error.maybe_created:
                return self._recover_launch(label, error)
            raise
        if not isinstance(pod, dict) or not pod.get("id"):
            return self._recover_launch(
                label,
                ProviderError(f"{self.title} answered POST /pods without a pod id.", provider=self.name),
            )
        instance = self._instance(pod)
        return Instance(
            provider=self.name,
            instance_id=instance.instance_id,
            state="booting" if instance.state in ("booting", "running", "unknown") else instance.state,
            host=instance.host,
            port=instance.port,
            user=self.ssh_user,
            offer=offer.offer,
            label=label,
        )

    def _launch_error(self, error: ApiError, offer: Offer) -> ProviderError:
        if error.status == 402:
            return InsufficientBalance(
                f"RunPod refused the pod: the account balance is too low ({error.detail}). Add credit at "
                "https://console.runpod.io/user/billing and try again.",
                provider=self.name,
                status=402,
            )
        if error.status == 400:
            return NoCapacity(
                f"RunPod could not place a {offer.gpu} pod ({error.detail or 'HTTP 400'}). Try another GPU type "
                "or provider; if every choice fails the same way, the request itself is at fault.",
                provider=self.name,
                status=400,
            )
        return error

    def _instance(self, pod: dict[str, Any]) -> Instance:
        host, port = _ssh_endpoint(pod)
        gpu = pod.get("gpu")
        return Instance(
            provider=self.name,
            instance_id=str(pod.get("id")),
            state=_STATES.get(str(pod.get("status") or ""), "unknown"),
            host=host,
            port=port,
            user=self.ssh_user,
            offer=str(gpu.get("id")) if isinstance(gpu, dict) and gpu.get("id") else None,
            label=pod.get("name"),
        )

    def get_instance(self, instance_id: str) -> Instance | None:
        try:
            pod = self._http.get(f"/pods/{instance_id}")
        except NotFound:
            return None
        if not isinstance(pod, dict) or not pod.get("id"):
            raise ProviderError(
                f"{self.title} answered GET /pods/{instance_id} in a shape Scriba does not know.", provider=self.name
            )
        return self._instance(pod)

    def terminate(self, instance_id: str) -> None:
        try:
            self._http.delete(f"/pods/{instance_id}")
        except NotFound:
            return  # already terminated

    def list_ours(self, label_prefix: str = LABEL_PREFIX) -> list[Instance]:
        pods = self._field(self._http.get("/pods"), "pods", list, "GET /pods")
        instances = [self._instance(pod) for pod in pods if isinstance(pod, dict)]
        return [instance for instance in instances if (instance.label or "").startswith(label_prefix)]

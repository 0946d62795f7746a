"""Vast.ai (https://vast.ai): a marketplace where every offer is one host's machine, priced by its owner.

Endpoints and shapes from Vast's API reference (docs.vast.ai/api-reference) and the official CLI
(github.com/vast-ai/vast-cli, ``vastai/api``), both checked for this adapter:

* search: ``GET /api/v0/bundles/?q=<json>`` -> ``{"offers": [{id, gpu_name, num_gpus, gpu_ram (MB), dph_total,
  min_bid, reliability, inet_up, inet_down (Mbps), cuda_max_good, geolocation, ...}]}``. (The CLI sends the same
  query as ``POST /api/v0/bundles/``; the GET form is the one on vast.ai/developers/api.)
* create: ``PUT /api/v0/asks/{offer_id}/ {client_id: "me", image, disk, runtype: "ssh", onstart, label}`` ->
  ``{"success": true, "new_contract": <instance id>}``. An offer rented by someone else between search and create
  answers ``no_such_ask`` (HTTP 400/404/410): :class:`NoCapacity`.
* key: ``POST /api/v0/instances/{id}/ssh/ {"ssh_key": ...}`` attaches a public key to one instance.
* one instance: ``GET /api/v0/instances/{id}/?owner=me`` -> ``{"instances": {actual_status, cur_state, ssh_host,
  ssh_port, label, status_msg, ...}}`` (``null`` once destroyed).
* list: ``GET /api/v1/instances/`` (25 rows a page, ``next_token``/``after_token``). The v0 list was retired in
  2026 (HTTP 410 ``deprecated_endpoint``; SkyPilot issue 10517, dstack PR 4031), which is why the base URL is
  ``https://console.vast.ai/api`` and each path names its version.
* destroy: ``DELETE /api/v0/instances/{id}/``. "Stopped" still bills storage, so Scriba always destroys.

A wrong key has been seen answered as HTTP 404 with ``auth_error`` in the body rather than 401 (reported in
jhammant/AIonDemandCluster PR 1): both become :class:`AuthError`.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

from app.cloud.providers.base import (
    LABEL_PREFIX,
    ApiError,
    AuthError,
    Clock,
    InsufficientBalance,
    LaunchFailed,
    NoCapacity,
    NotFound,
    Provider,
    ProviderError,
    Sleep,
    check_label,
    normalize_gpu_name,
    rejected_key_error,
)
from app.cloud.providers.http import provider_client, today_iso
from app.cloud.types import Instance, InstanceState, Offer

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://console.vast.ai/api"
# Vast's documented default image; the remote worker installs what it needs on top of it.
DEFAULT_IMAGE = "vastai/base-image:@vastai-automatic-tag"
# Vast's default disk is 8 GB, which a model download fills (CLOUD.md, "disk full").
DEFAULT_DISK_GB = 40.0
# faster-whisper's ctranslate2 links CUDA 12 libraries (FACTS.md): hosts whose driver tops out lower cannot run it.
MIN_CUDA = 12.0
MIN_RELIABILITY = 0.95
SEARCH_LIMIT = 64
# An estimate (image pull + container start), not a measurement.
BOOT_MINUTES = 4.0
# Pages of 25 instances: enough for any account Scriba runs in; a bound so a looping token cannot hang start-up.
MAX_LIST_PAGES = 200

_BOOTING = {None, "", "created", "loading", "scheduling", "rebooting"}
_STATES: dict[str, InstanceState] = {
    "running": "running",
    "exited": "failed",
    # Stopped and frozen machines still bill (storage, or the GPU when frozen) but run nothing.
    "stopped": "stopping",
    "frozen": "stopping",
    "unknown": "unknown",
    "offline": "unknown",  # host lost contact with Vast; may come back
}
# status_msg texts that mean the container will never start (seen by users on image pulls and full disks).
_FATAL_STATUS = re.compile(
    r"error response from daemon|manifest unknown|pull access denied|no space left on device", re.IGNORECASE
)
_OFFER_GONE = re.compile(r"no_such_ask|not available|already rented|no longer available", re.IGNORECASE)


def _text(body: object) -> str:
    if isinstance(body, dict):
        return " ".join(str(body.get(key) or "") for key in ("error", "msg", "message", "detail"))
    return str(body or "")


class VastAI(Provider):
    name = "vast"
    title = "Vast.ai"
    key_name = "vast_api_key"
    console_url = "https://cloud.vast.ai/instances/"
    ssh_user = "root"
    offer_is_one_machine = True  # an ask is one host's GPUs

    def __init__(
        self,
        api_key: str,
        *,
        base_url: str = DEFAULT_BASE_URL,
        image: str = DEFAULT_IMAGE,
        disk_gb: float = DEFAULT_DISK_GB,
        onstart: str = "",
        min_cuda: float = MIN_CUDA,
        min_reliability: float = MIN_RELIABILITY,
        search_limit: int = SEARCH_LIMIT,
        timeout_s: float = 30.0,
        max_attempts: int = 5,
        sleep: Sleep = time.sleep,
        clock: Clock = time.monotonic,
    ) -> None:
        super().__init__(sleep=sleep, clock=clock)
        self.image = image
        self.disk_gb = disk_gb
        self.onstart = onstart
        self.min_cuda = min_cuda
        self.min_reliability = min_reliability
        self.search_limit = search_limit
        self._http = provider_client(self, base_url, api_key, timeout_s, max_attempts, self._sleep)

    # ------------------------------------------------------------------------------------------- errors

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        """Every call goes through here so that Vast's 404-with-auth_error reads as a key problem."""
        try:
            return self._http.request(method, path, **kwargs)
        except ApiError as error:
            if "auth_error" in _text(error.body) or "invalid api key" in _text(error.body).lower():
                raise rejected_key_error(
                    self.title, self.key_name, self.name, error.status or 0, error.detail
                ) from None
            raise

    # ------------------------------------------------------------------------------------------- offers

    def search_query(self) -> dict[str, Any]:
        """The filters Scriba needs: a whole machine that is free now, with a CUDA 12 driver and room for models."""
        return {
            "verified": {"eq": True},
            "external": {"eq": False},
            "rentable": {"eq": True},
            "rented": {"eq": False},
            "cuda_max_good": {"gte": self.min_cuda},
            "reliability": {"gte": self.min_reliability},
            "disk_space": {"gte": self.disk_gb},
            "type": "on-demand",
            "order": [["dph_total", "asc"]],
            "limit": self.search_limit,
            # dph_total then includes the storage Scriba will ask for.
            "allocated_storage": self.disk_gb,
        }

    def offers(self) -> list[Offer]:
        answer = self._call("GET", "/v0/bundles/", params={"q": self.search_query()})
        today = today_iso()
        rows: list[Offer] = []
        for item in self._field(answer, "offers", list, "GET /v0/bundles/"):
            if not isinstance(item, dict) or item.get("id") is None:
                continue
            # The query filters already; a host below the bar that slips through is still left out.
            if float(item.get("reliability") or item.get("reliability2") or 0) < self.min_reliability:
                continue
            if float(item.get("cuda_max_good") or 0) < self.min_cuda:
                continue
            min_bid = item.get("min_bid")
            rows.append(
                Offer(
                    provider=self.name,
                    offer=str(item["id"]),
                    gpu=normalize_gpu_name(str(item.get("gpu_name") or "")),
                    gpu_count=int(item.get("num_gpus") or 1),
                    vram_gb=round(float(item.get("gpu_ram") or 0) / 1024.0, 1),
                    usd_per_hour=float(item.get("dph_total") or 0),
                    spot_usd_per_hour=float(min_bid) if min_bid is not None else None,
                    billing="per-second",
                    boot_minutes=BOOT_MINUTES,
                    price_source=f"api:{self.name}",
                    price_date=today,
                    launchable=True,
                    region=str(item["geolocation"]) if item.get("geolocation") else None,
                    upload_mbps=float(item["inet_up"]) if item.get("inet_up") is not None else None,
                    download_mbps=float(item["inet_down"]) if item.get("inet_down") is not None else None,
                )
            )
        return rows

    # ------------------------------------------------------------------------------------------- launch

    def launch(self, offer: Offer, ssh_public_key: str, label: str) -> Instance:
        check_label(label)
        body = {
            "client_id": "me",
            "image": self.image,
            "disk": self.disk_gb,
            "runtype": "ssh",
            "onstart": self.onstart,
            "label": label,
        }
        try:
            answer = self._call("PUT", f"/v0/asks/{offer.offer}/", body=body, idempotent=False)
            instance_id = self._new_contract(answer, offer)
        except AuthError:
            raise
        except ApiError as error:
            raise self._launch_error(error.body, error.detail, error.status, offer) from None
        except ProviderError as error:
            if not error.maybe_created:
                raise
            instance_id = self._recover_launch(label, error).instance_id
        self._attach_key(instance_id, ssh_public_key, label)
        return Instance(
            provider=self.name,
            instance_id=instance_id,
            state="booting",
            user=self.ssh_user,
            offer=offer.offer,
            label=label,
        )

    def _new_contract(self, answer: object, offer: Offer) -> str:
        if isinstance(answer, dict) and answer.get("success") and answer.get("new_contract") is not None:
            return str(answer["new_contract"])
        if isinstance(answer, dict) and answer.get("success") is False:
            raise self._launch_error(answer, _text(answer).strip(), None, offer)
        # Accepted without an id: a machine may exist. Treated like a lost answer (looked for by label).
        raise ProviderError(
            f"{self.title} answered the rental of offer {offer.offer} without an instance id.",
            provider=self.name,
            maybe_created=True,
        )

    def _unexpected(self, where: str) -> ProviderError:
        return ProviderError(
            f"{self.title} answered {where} in a shape Scriba does not know; its API may have changed.",
            provider=self.name,
        )

    def _attach_key(self, instance_id: str, ssh_public_key: str, label: str) -> None:
        """Vast copies the account's keys into a new machine from a snapshot that can be stale; attaching the
        job's own key to this one instance is the documented way to make sure it is there."""
        try:
            self._call("POST", f"/v0/instances/{instance_id}/ssh/", body={"ssh_key": ssh_public_key.strip()})
        except ProviderError as error:
            # The machine exists and bills: end it rather than hand back one nobody can log into.
            try:
                self.terminate(instance_id)
            except ProviderError as terminate_error:
                log.warning("vast: ending %s after a failed key attach failed too: %s", instance_id, terminate_error)
            raise LaunchFailed(
                f"Vast.ai created instance {instance_id} ({label}) but refused its SSH key ({error}). Scriba "
                "asked Vast to destroy it; try again.",
                provider=self.name,
                instance_id=instance_id,
                status=error.status,
            ) from None

    def _launch_error(self, body: object, detail: str, status: int | None, offer: Offer) -> ProviderError:
        text = _text(body) + " " + detail
        if "insufficient_credit" in text or "insufficient credit" in text.lower():
            return InsufficientBalance(
                f"Vast.ai refused the rental: the account has too little credit ({detail}). Add credit at "
                "https://cloud.vast.ai/billing/ and try again.",
                provider=self.name,
                status=status,
            )
        if _OFFER_GONE.search(text) or status in (404, 410):
            return NoCapacity(
                f"Vast.ai offer {offer.offer} ({offer.gpu}) was rented by someone else or withdrawn "
                f"({detail or status}). Pick another offer.",
                provider=self.name,
                status=status,
            )
        return ProviderError(
            f"Vast.ai refused to rent offer {offer.offer} (HTTP {status}: {detail}).",
            provider=self.name,
            status=status,
        )

    # ------------------------------------------------------------------------------------------- instances

    def _instance(self, row: dict[str, Any]) -> Instance:
        actual = row.get("actual_status")
        state: InstanceState
        if row.get("cur_state") == "unloaded":  # the contract is released: destroyed
            state = "terminated"
        elif _FATAL_STATUS.search(str(row.get("status_msg") or "")):
            state = "failed"
        elif actual in _BOOTING:
            state = "booting"
        else:
            state = _STATES.get(str(actual), "unknown")
        port = row.get("ssh_port")
        return Instance(
            provider=self.name,
            instance_id=str(row.get("id")),
            state=state,
            host=row.get("ssh_host") or None,
            port=int(port) if port else 22,
            user=self.ssh_user,
            label=row.get("label"),
        )

    def get_instance(self, instance_id: str) -> Instance | None:
        try:
            answer = self._call("GET", f"/v0/instances/{instance_id}/", params={"owner": "me"})
        except NotFound:
            return None
        if not isinstance(answer, dict) or "instances" not in answer:
            raise self._unexpected(f"GET /v0/instances/{instance_id}/")
        row = answer["instances"]
        if row is None:  # Vast's answer for an instance that no longer exists
            return None
        if not isinstance(row, dict):
            raise self._unexpected(f"GET /v0/instances/{instance_id}/")
        return self._instance(row)

    def terminate(self, instance_id: str) -> None:
        try:
            self._call("DELETE", f"/v0/instances/{instance_id}/")
        except NotFound:
            return  # already destroyed

    def list_ours(self, label_prefix: str = LABEL_PREFIX) -> list[Instance]:
        params: dict[str, Any] = {"select_filters": {}, "order_by": [{"col": "id", "dir": "asc"}], "limit": 25}
        found: list[Instance] = []
        for _page in range(MAX_LIST_PAGES):
            answer = self._call("GET", "/v1/instances/", params=params)
            for row in self._field(answer, "instances", list, "GET /v1/instances/"):
                if isinstance(row, dict) and str(row.get("label") or "").startswith(label_prefix):
                    found.append(self._instance(row))
            token = answer.get("next_token")
            if not token:
                return found
            params["after_token"] = token
        raise ProviderError(
            f"{self.title} kept paging its instance list past {MAX_LIST_PAGES} pages; check {self.console_url}.",
            provider=self.name,
        )

"""Lambda Cloud (https://cloud.lambda.ai): whole VMs with a fixed price per instance type and region.

Endpoints and shapes from Lambda's Cloud API reference (OpenAPI "Lambda Cloud API" 1.5.x, base
``https://cloud.lambda.ai/api/v1``; the older host cloud.lambdalabs.com serves the same API):

* ``GET /instance-types`` -> ``{"data": {name: {"instance_type": {name, description, gpu_description,
  price_cents_per_hour, specs: {vcpus, memory_gib, storage_gib, gpus}}, "regions_with_capacity_available":
  [{name, description}]}}}``
* ``GET /ssh-keys``, ``POST /ssh-keys {name, public_key}`` -> ``{"data": {id, name, public_key}}``
* ``POST /instance-operations/launch {region_name, instance_type_name, ssh_key_names: [one], name}``
  -> ``{"data": {"instance_ids": [...]}}``
* ``GET /instances/{id}`` -> ``{"data": {id, name, ip, status: booting|active|unhealthy|terminating|terminated}}``
* ``GET /instances`` -> ``{"data": [instance, ...]}``
* ``POST /instance-operations/terminate {instance_ids}`` -> ``{"data": {"terminated_instances": [...]}}``
* errors: ``{"error": {code, message, suggestion}}``; capacity: ``instance-operations/launch/insufficient-capacity``.

Lambda has no "stop": a machine bills until it is terminated. About one request per second is allowed; more
gets HTTP 429, which the HTTP layer waits out.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import re
import time
from typing import Any

from app.cloud.providers.base import (
    LABEL_PREFIX,
    ApiError,
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

DEFAULT_BASE_URL = "https://cloud.lambda.ai/api/v1"
# An estimate from CLOUD.md ("boot takes minutes"), not a measurement: the estimator shows it as such.
BOOT_MINUTES = 5.0

_STATES: dict[str, InstanceState] = {
    "booting": "booting",
    "active": "running",
    # An unhealthy machine bills but cannot run the job: treat it as failed, so the caller ends it.
    "unhealthy": "failed",
    "terminating": "stopping",
    "terminated": "terminated",
}
_CAPACITY_CODES = {"instance-operations/launch/insufficient-capacity", "global/quota-exceeded"}
# "1x H100 (80 GB SXM5)" / gpu_description "H100 (80 GB SXM5)"
_GPU_PATTERN = re.compile(
    r"^\s*(?:(?P<count>\d+)\s*x\s+)?(?P<name>.+?)\s*\(\s*(?P<vram>\d+(?:\.\d+)?)\s*GB\b(?P<form>[^)]*)\)",
    re.IGNORECASE,
)


def _error_code(error: ApiError) -> str:
    body = error.body
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return str(body["error"].get("code") or "")
    return ""


def _parse_gpu(instance_type: dict[str, Any]) -> tuple[str, int, float]:
    """(card, count, VRAM per card in GB) from the instance type's descriptions."""
    specs = instance_type.get("specs") or {}
    count = int(specs.get("gpus") or 0)
    for text in (instance_type.get("gpu_description"), instance_type.get("description")):
        match = _GPU_PATTERN.match(str(text or ""))
        if match:
            name = match["name"]
            # Lambda puts the form factor in the brackets; only SXM changes the speed estimate (PCIe is the default).
            if "SXM" in match["form"].upper() and "SXM" not in name.upper():
                name += " SXM"
            count = count or int(match["count"] or 1)
            return normalize_gpu_name(name), count, float(match["vram"])
    return normalize_gpu_name(str(instance_type.get("name") or "")), count or 1, 0.0


def _key_fingerprint(public_key: str) -> str:
    """A short, stable name part for an SSH public key (from its base64 body, not its comment)."""
    fields = public_key.split()
    body = fields[1] if len(fields) > 1 else public_key
    try:
        raw = base64.b64decode(body, validate=True)
    except ValueError:
        raw = body.encode()
    return hashlib.sha256(raw).hexdigest()[:16]


def _same_key(a: str, b: str) -> bool:
    return a.split()[:2] == b.split()[:2]


class LambdaCloud(Provider):
    name = "lambda"
    title = "Lambda Cloud"
    key_name = "lambda_api_key"
    console_url = "https://cloud.lambda.ai/instances"
    ssh_user = "ubuntu"

    def __init__(
        self,
        api_key: str,
        *,
        base_url: str = DEFAULT_BASE_URL,
        timeout_s: float = 30.0,
        max_attempts: int = 5,
        sleep: Sleep = time.sleep,
        clock: Clock = time.monotonic,
    ) -> None:
        super().__init__(sleep=sleep, clock=clock)
        self._http = provider_client(self, base_url, api_key, timeout_s, max_attempts, self._sleep)

    def offers(self) -> list[Offer]:
        data = self._field(self._http.get("/instance-types"), "data", dict, "GET /instance-types")
        today = today_iso()
        rows: list[Offer] = []
        for type_name, entry in sorted(data.items()):
            instance_type = entry.get("instance_type") or {}
            regions = entry.get("regions_with_capacity_available") or []
            if not regions:
                continue  # listed but sold out everywhere: not something the user can rent now
            gpu, count, vram = _parse_gpu(instance_type)
            price = float(instance_type.get("price_cents_per_hour") or 0) / 100.0
            for region in regions:
                rows.append(
                    Offer(
                        provider=self.name,
                        offer=str(instance_type.get("name") or type_name),
                        gpu=gpu,
                        gpu_count=count,
                        vram_gb=vram,
                        usd_per_hour=price,
                        spot_usd_per_hour=None,
                        billing="per-minute",
                        boot_minutes=BOOT_MINUTES,
                        price_source=f"api:{self.name}",
                        price_date=today,
                        launchable=True,
                        region=str(region.get("name")) if isinstance(region, dict) else str(region),
                    )
                )
        return rows

    def ensure_ssh_key(self, ssh_public_key: str) -> str:
        """Lambda launches only with a key registered by name. Register ``ssh_public_key`` once under a name
        derived from the key itself, so that asking again (a retry, the next job with the same key) reuses it."""
        wanted = f"{LABEL_PREFIX}{_key_fingerprint(ssh_public_key)}"
        registered = self._registered_key_name(ssh_public_key)
        if registered:
            return registered
        try:
            created = self._http.post("/ssh-keys", {"name": wanted, "public_key": ssh_public_key.strip()})
        except ApiError:
            # A retried POST whose first attempt did register the key is refused as a duplicate: look again.
            registered = self._registered_key_name(ssh_public_key)
            if registered:
                return registered
            raise
        return str(((created or {}).get("data") or {}).get("name") or wanted)

    def _registered_key_name(self, ssh_public_key: str) -> str | None:
        for key in self._field(self._http.get("/ssh-keys"), "data", list, "GET /ssh-keys"):
            if isinstance(key, dict) and _same_key(str(key.get("public_key") or ""), ssh_public_key):
                return str(key["name"])
        return None

    def launch(self, offer: Offer, ssh_public_key: str, label: str) -> Instance:
        check_label(label)
        if not offer.region:
            raise ValueError(f"a Lambda offer needs a region to launch in: {offer.offer}")
        key_name = self.ensure_ssh_key(ssh_public_key)
        body = {
            "region_name": offer.region,
            "instance_type_name": offer.offer,
            "ssh_key_names": [key_name],
            "name": label,
            "quantity": 1,
        }
        try:
            answer = self._http.post("/instance-operations/launch", body, idempotent=False)
        except ApiError as error:
            raise self._launch_error(error, offer) from None
        except ProviderError as error:
            if error.maybe_created:
                return self._recover_launch(label, error)
            raise
        where = "POST /instance-operations/launch"
        try:
            ids = self._field(self._field(answer, "data", dict, where), "instance_ids", list, where)
        except ProviderError:
            # Accepted (HTTP 2xx) but not understood: the machine may well exist. It is looked for by its label,
            # never written off as "not launched".
            return self._recover_launch(
                label,
                ProviderError(
                    f"Lambda Cloud accepted the launch of {offer.offer} but answered in a shape Scriba does not "
                    "know; its API may have changed.",
                    provider=self.name,
                    maybe_created=True,
                ),
            )
        if not ids:
            # "Accepted, nothing started" is only believed once the list confirms no machine has the label.
            try:
                found = [item for item in self.list_ours(label) if item.label == label]
            except ProviderError as error:
                raise ProviderError(
                    f"Lambda Cloud accepted the launch of {offer.offer} without an instance id, and its list of "
                    f"machines could not be read ({error}).",
                    provider=self.name,
                    maybe_created=True,
                ) from None
            if found:
                return found[0]
            raise NoCapacity(
                f"Lambda Cloud accepted the launch of {offer.offer} in {offer.region} but started no instance. "
                "Try another region or instance type.",
                provider=self.name,
            )
        if len(ids) > 1:  # quantity is 1; more would be machines nobody waits for
            log.warning("lambda: launch returned %d ids for one machine: %s", len(ids), ids)
        return Instance(
            provider=self.name,
            instance_id=str(ids[0]),
            state="booting",
            port=22,
            user=self.ssh_user,
            offer=offer.offer,
            label=label,
        )

    def _launch_error(self, error: ApiError, offer: Offer) -> ProviderError:
        code = _error_code(error)
        if code in _CAPACITY_CODES:
            what = "has reached its instance quota" if code == "global/quota-exceeded" else "has no capacity"
            return NoCapacity(
                f"Lambda Cloud {what} for {offer.offer} in {offer.region} ({error.detail or code}). "
                "Try another region, instance type or provider.",
                provider=self.name,
                status=error.status,
            )
        if code == "global/account-inactive":
            return InsufficientBalance(
                f"Lambda Cloud says the account is inactive ({error.detail}). Check billing at "
                "https://cloud.lambda.ai before launching again.",
                provider=self.name,
                status=error.status,
            )
        return error

    def _instance(self, data: dict[str, Any]) -> Instance:
        status = str(data.get("status") or "")
        instance_type = data.get("instance_type") or {}
        return Instance(
            provider=self.name,
            instance_id=str(data.get("id")),
            state=_STATES.get(status, "unknown"),
            host=data.get("ip") or None,
            port=22,
            user=self.ssh_user,
            offer=instance_type.get("name") if isinstance(instance_type, dict) else None,
            label=data.get("name"),
        )

    def get_instance(self, instance_id: str) -> Instance | None:
        try:
            answer = self._http.get(f"/instances/{instance_id}")
        except NotFound:
            return None
        return self._instance(self._field(answer, "data", dict, f"GET /instances/{instance_id}"))

    def terminate(self, instance_id: str) -> None:
        try:
            self._http.post("/instance-operations/terminate", {"instance_ids": [instance_id]})
        except NotFound:
            return  # already gone
        except ApiError as error:
            if _error_code(error) == "global/object-does-not-exist":
                return
            raise

    def list_ours(self, label_prefix: str = LABEL_PREFIX) -> list[Instance]:
        rows = self._field(self._http.get("/instances"), "data", list, "GET /instances")
        instances = [self._instance(row) for row in rows if isinstance(row, dict)]
        return [instance for instance in instances if (instance.label or "").startswith(label_prefix)]

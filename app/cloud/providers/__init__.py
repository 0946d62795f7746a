"""GPU rental adapters: Lambda Cloud, Vast.ai and RunPod behind one :class:`Provider` interface.

API keys come from the system keyring (service ``scriba``; entries ``lambda_api_key``, ``vast_api_key``,
``runpod_api_key``) or, for a headless machine without a keyring, from the environment (``SCRIBA_LAMBDA_API_KEY``,
``SCRIBA_VAST_API_KEY``, ``SCRIBA_RUNPOD_API_KEY``; the environment wins, as for the Hugging Face token). They are
handed to the adapters as parameters: nothing here reads a settings file, and no key is ever written anywhere.
"""

from __future__ import annotations

import os
from typing import Any

from app.cloud.providers.base import (
    LABEL_PREFIX,
    ApiError,
    AuthError,
    InsufficientBalance,
    LaunchFailed,
    LaunchTimeout,
    NoCapacity,
    NotFound,
    Provider,
    ProviderError,
    RateLimited,
    TerminateFailed,
    missing_key_error,
    normalize_gpu_name,
)
from app.cloud.providers.http import HttpClient
from app.cloud.providers.lambda_cloud import LambdaCloud
from app.cloud.providers.runpod import RunPod
from app.cloud.providers.vast import VastAI
from app.core.secrets import get_secret

PROVIDER_CLASSES: dict[str, type[LambdaCloud | VastAI | RunPod]] = {
    LambdaCloud.name: LambdaCloud,
    VastAI.name: VastAI,
    RunPod.name: RunPod,
}


def key_env_name(provider: str) -> str:
    """The environment variable that may carry ``provider``'s API key (``SCRIBA_VAST_API_KEY``)."""
    return f"SCRIBA_{provider.upper()}_API_KEY"


def api_key(cls: type[Provider]) -> str | None:
    """The provider's key from the environment, else from the keyring; None when neither has one."""
    from_env = os.environ.get(key_env_name(cls.name), "").strip()
    return from_env or get_secret(cls.key_name)


def provider_from_keyring(name: str, **options: Any) -> Provider:
    """The adapter ``name`` with its key from the keyring; :class:`AuthError` (saying where to store the key)
    when none is set. ``options`` go to the adapter's constructor (base_url, sleep, image …)."""
    try:
        cls = PROVIDER_CLASSES[name]
    except KeyError:
        raise ValueError(f"unknown provider {name!r}; known: {', '.join(sorted(PROVIDER_CLASSES))}") from None
    key = api_key(cls)
    if not key:
        raise missing_key_error(cls.title, cls.key_name, cls.name)
    return cls(key, **options)


def configured_providers(**options: Any) -> dict[str, Provider]:
    """Every provider whose key is in the keyring, by name (what the ledger's start-up sweep needs)."""
    providers: dict[str, Provider] = {}
    for name, cls in PROVIDER_CLASSES.items():
        key = api_key(cls)
        if key:
            providers[name] = cls(key, **options)
    return providers


__all__ = [
    "LABEL_PREFIX",
    "PROVIDER_CLASSES",
    "ApiError",
    "AuthError",
    "HttpClient",
    "InsufficientBalance",
    "LambdaCloud",
    "LaunchFailed",
    "LaunchTimeout",
    "NoCapacity",
    "NotFound",
    "Provider",
    "ProviderError",
    "RateLimited",
    "RunPod",
    "TerminateFailed",
    "VastAI",
    "api_key",
    "configured_providers",
    "key_env_name",
    "normalize_gpu_name",
    "provider_from_keyring",
]

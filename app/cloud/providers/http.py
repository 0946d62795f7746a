"""A small JSON-over-HTTPS client for the providers' REST APIs, on httpx.

What it takes care of, so that the adapters do not:

* the bearer key: sent in a header that httpx drops when a redirect leaves the origin (scheme, host, port), kept
  out of ``repr``, logs and every error message (anything a provider echoes back is redacted);
* retries, decided in one place (:class:`RetryPolicy`): HTTP 429 (honouring ``Retry-After``) always; 5xx answers,
  timeouts and dropped connections only for requests that are safe to repeat; a connection that could not be
  opened for any request, since nothing was sent. A request that creates something (a launch) is never repeated
  once it may have reached the provider, because the first one may have worked: it raises with ``maybe_created``
  set instead, and the caller looks for the machine by its label;
* typed errors: 401/403 :class:`AuthError`, 404 :class:`NotFound`, other 4xx :class:`ApiError` with the
  provider's JSON attached, 429 :class:`RateLimited`.

``sleep`` is injected so that tests do not wait; ``base_url`` is a parameter so tests point it at a local
replay server.
"""

from __future__ import annotations

import email.utils
import functools
import json
import logging
import ssl
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import httpx

from app.cloud.providers.base import (
    ApiError,
    NotFound,
    ProviderError,
    RateLimited,
    missing_key_error,
    rejected_key_error,
)

if TYPE_CHECKING:
    from app.cloud.providers.base import Provider

log = logging.getLogger(__name__)

USER_AGENT = "scriba-cloud/1"
_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
_REDACTED = "[redacted]"
# Raised before a byte of the request left this machine: repeating it cannot create anything twice.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# The request may have reached the provider and the answer was lost on the way back (or never came).
_MAYBE_SENT = (httpx.ReadError, httpx.WriteError, httpx.ReadTimeout, httpx.WriteTimeout, httpx.RemoteProtocolError)


@functools.cache
def _tls_context() -> ssl.SSLContext:
    # Loading the CA bundle takes tens of milliseconds: once per process, not once per provider object.
    return httpx.create_ssl_context()


def _check_base_url(base_url: str) -> None:
    """The key must never travel in clear text over a network: plain http only to this machine (tests)."""
    parts = urllib.parse.urlsplit(base_url)
    if parts.scheme == "https" and parts.hostname:
        return
    if parts.scheme == "http" and parts.hostname in _LOOPBACK_HOSTS:
        return
    raise ValueError(f"provider base URL must be https:// (plain http only to localhost): {base_url!r}")


def _encode_params(params: Mapping[str, Any]) -> str:
    """Query values the way the providers document them: JSON for objects and lists (Vast's ``q=``), plain text
    for strings and numbers."""

    def encode(value: Any) -> str:
        if isinstance(value, str):
            return value
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (int, float)):
            return str(value)
        return json.dumps(value, separators=(",", ":"))

    return urllib.parse.urlencode({key: encode(value) for key, value in params.items() if value is not None})


def parse_retry_after(value: str | None, now: Callable[[], float] = time.time) -> float | None:
    """``Retry-After`` is either seconds or an HTTP date (RFC 9110)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, when.timestamp() - now())


def error_detail(body: Any) -> str:
    """The human part of a provider's error body: Lambda ``{"error": {"message", "suggestion"}}``, Vast
    ``{"error", "msg"}``, RunPod (RFC 9457) ``{"title", "detail"}``."""
    if isinstance(body, str):
        return body.strip()[:200]
    if not isinstance(body, dict):
        return ""
    error = body.get("error")
    if isinstance(error, dict):
        parts = [str(error.get(key)) for key in ("message", "suggestion") if error.get(key)]
        return " ".join(parts)
    for key in ("detail", "msg", "message"):
        if body.get(key):
            text = str(body[key])
            if isinstance(error, str) and error and error not in text:
                text = f"{error}: {text}"
            return text
    if isinstance(error, str):
        return error
    return str(body.get("title") or "")


@dataclass(frozen=True)
class RetryPolicy:
    """Which failures are tried again, and after how long. ``attempt`` counts from 1 (the first try)."""

    max_attempts: int = 5
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    # A provider that asks for a longer pause than this is told "later" to the caller instead of freezing it.
    max_retry_after_s: float = 120.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")

    def backoff(self, attempt: int) -> float:
        # One client per user and provider: no herd to spread, so plain doubling (no jitter) keeps tests exact.
        return float(min(self.max_backoff_s, self.backoff_s * (2 ** (attempt - 1))))

    def after_status(self, attempt: int, status: int, retry_after: float | None, *, idempotent: bool) -> float | None:
        """Seconds to wait before trying again after an HTTP error ``status``; None: give up now."""
        if attempt >= self.max_attempts:
            return None
        honoured = retry_after if retry_after is not None and retry_after <= self.max_retry_after_s else None
        if status == 429:
            # Refused before anything was done, so even a create may be sent again; a long wait goes to the caller.
            if retry_after is not None and honoured is None:
                return None
            return honoured if honoured is not None else self.backoff(attempt)
        if status >= 500 and idempotent:
            return honoured if honoured is not None else self.backoff(attempt)
        return None

    def after_error(self, attempt: int, error: httpx.TransportError, *, idempotent: bool) -> float | None:
        """Seconds to wait before trying again after a request got no answer; None: give up now."""
        if attempt >= self.max_attempts:
            return None
        if isinstance(error, _NOT_SENT) or (idempotent and isinstance(error, _MAYBE_SENT)):
            return self.backoff(attempt)
        return None


def provider_client(
    provider: Provider, base_url: str, api_key: str, timeout_s: float, max_attempts: int, sleep: Callable[[float], None]
) -> HttpClient:
    """An adapter's HTTP client: its key, its name in error messages, the injected sleep for back-offs."""
    return HttpClient(
        base_url,
        api_key,
        provider=provider.name,
        title=provider.title,
        key_name=provider.key_name,
        timeout_s=timeout_s,
        max_attempts=max_attempts,
        sleep=sleep,
    )


class HttpClient:
    """JSON requests to one provider API with one bearer key. Safe to share between threads (as httpx's client
    is)."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        provider: str,
        title: str,
        key_name: str,
        timeout_s: float = 30.0,
        max_attempts: int = 5,
        backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
        max_retry_after_s: float = 120.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        _check_base_url(base_url)
        if not api_key or not api_key.strip():
            raise missing_key_error(title, key_name, provider)
        self.policy = RetryPolicy(
            max_attempts=max_attempts,
            backoff_s=backoff_s,
            max_backoff_s=max_backoff_s,
            max_retry_after_s=max_retry_after_s,
        )
        self.base_url = base_url.rstrip("/")
        self.provider = provider
        self.title = title
        self.key_name = key_name
        self.timeout_s = timeout_s
        self._key = api_key.strip()
        self._sleep = sleep
        # Redirects are followed as urllib did; httpx drops Authorization when one leaves the origin.
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout_s),
            verify=_tls_context(),
            follow_redirects=True,
            headers={"Accept": "application/json", "User-Agent": USER_AGENT},
        )

    def __repr__(self) -> str:
        return f"HttpClient(provider={self.provider!r}, base_url={self.base_url!r})"

    def close(self) -> None:
        self._client.close()

    # ------------------------------------------------------------------------------------------- verbs

    def get(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        return self.request("GET", path, params=params)

    def post(self, path: str, body: Any = None, *, idempotent: bool = True) -> Any:
        return self.request("POST", path, body=body, idempotent=idempotent)

    def put(self, path: str, body: Any = None, *, idempotent: bool = True) -> Any:
        return self.request("PUT", path, body=body, idempotent=idempotent)

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        idempotent: bool = True,
    ) -> Any:
        """Send, retry what :class:`RetryPolicy` allows, and return the parsed JSON (None for an empty body).

        ``idempotent=False`` marks a request that creates something: it is repeated after a 429 or a connection
        that could not be opened (the provider did nothing), never after a 5xx, a timeout or a lost answer.
        """
        url = self.base_url + path
        if params:
            url += ("&" if "?" in url else "?") + _encode_params(params)
        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = {"Authorization": f"Bearer {self._key}"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        where = f"{method} {path}"
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._client.request(method, url, content=data, headers=headers)
            except httpx.TransportError as error:
                reason = self._redact(str(error) or type(error).__name__)
                delay = self.policy.after_error(attempt, error, idempotent=idempotent)
                if delay is not None:
                    log.info("%s: %s failed (%s); retry %d in %.1f s", self.provider, where, reason, attempt, delay)
                    self._sleep(delay)
                    continue
                raise ProviderError(
                    f"{self.title} could not be reached ({where}: {reason}). Check the network connection "
                    "and try again.",
                    provider=self.provider,
                    maybe_created=not idempotent and not isinstance(error, _NOT_SENT),
                ) from None
            except httpx.HTTPError as error:  # a redirect loop, a body that cannot be decoded
                raise ProviderError(
                    f"{self.title} answered {where} in a way Scriba cannot follow "
                    f"({self._redact(str(error) or type(error).__name__)}). Try again later or report this.",
                    provider=self.provider,
                    maybe_created=not idempotent,
                ) from None
            status = response.status_code
            log.debug("%s: %s -> HTTP %d", self.provider, where, status)
            if status < 400:
                return self._parse(response.content, where)

            parsed = self._parse_quietly(response.content)
            detail = self._redact(error_detail(parsed))
            retry_after = parse_retry_after(response.headers.get("retry-after"))
            delay = self.policy.after_status(attempt, status, retry_after, idempotent=idempotent)
            if delay is not None:
                log.info("%s: %s HTTP %d; retry %d in %.1f s", self.provider, where, status, attempt, delay)
                self._sleep(delay)
                continue
            raise self._status_error(status, where, detail, parsed, retry_after, idempotent=idempotent)

    # ------------------------------------------------------------------------------------------- internals

    def _status_error(
        self, status: int, where: str, detail: str, parsed: Any, retry_after: float | None, *, idempotent: bool
    ) -> ProviderError:
        why = f": {detail}" if detail else ""
        if status == 429:
            wait = f" It asked to wait {retry_after:.0f} s." if retry_after is not None else ""
            return RateLimited(
                f"{self.title} is limiting the request rate (HTTP 429 on {where}).{wait} Try again later.",
                provider=self.provider,
                retry_after_s=retry_after,
            )
        if status >= 500:
            return ProviderError(
                f"{self.title} failed to answer {where} (HTTP {status}{why}). This is on the provider's side; "
                "try again in a few minutes.",
                provider=self.provider,
                status=status,
                maybe_created=not idempotent,
            )
        if status in (401, 403):
            return rejected_key_error(self.title, self.key_name, self.provider, status, detail)
        error_type = NotFound if status == 404 else ApiError
        return error_type(
            f"{self.title} refused {where} (HTTP {status}{why}).",
            provider=self.provider,
            status=status,
            body=parsed,
            detail=detail,
        )

    def _redact(self, text: str) -> str:
        return text.replace(self._key, _REDACTED) if self._key in text else text

    def _parse(self, payload: bytes, where: str) -> Any:
        if not payload.strip():
            return None
        try:
            return json.loads(payload)
        except ValueError:
            raise ProviderError(
                f"{self.title} answered {where} with something that is not JSON; its API may have changed. "
                "Update Scriba or report this.",
                provider=self.provider,
            ) from None

    @staticmethod
    def _parse_quietly(payload: bytes) -> Any:
        try:
            return json.loads(payload) if payload.strip() else None
        except ValueError:
            return payload[:200].decode("utf-8", "replace")


def today_iso() -> str:
    """The date a live price was read, as the Offer rows record it."""
    return datetime.now(timezone.utc).date().isoformat()

"""A small JSON-over-HTTPS client for the providers' REST APIs, on the standard library (no new dependency).

What it takes care of, so that the adapters do not:

* the bearer key: sent as an *unredirected* header (a redirect to another host never carries it), kept out of
  ``repr``, logs and every error message (anything a provider echoes back is redacted);
* retries with exponential backoff for HTTP 429 (honouring ``Retry-After``) and, for requests that are safe
  to repeat, for 5xx answers and dropped connections. A request that creates something (a launch) is never
  repeated after a 5xx or a lost answer, because the first one may have worked: it raises with
  ``maybe_created`` set instead, and the caller looks for the machine by its label;
* typed errors: 401/403 :class:`AuthError`, 404 :class:`NotFound`, other 4xx :class:`ApiError` with the
  provider's JSON attached, 429 :class:`RateLimited`.

``sleep`` is injected so that tests do not wait; ``base_url`` is a parameter so tests point it at a local
replay server.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import logging
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any

from app.cloud.providers.base import (
    ApiError,
    NotFound,
    ProviderError,
    RateLimited,
    missing_key_error,
    rejected_key_error,
)

log = logging.getLogger(__name__)

USER_AGENT = "scriba-cloud/1"
_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
_REDACTED = "[redacted]"


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


class HttpClient:
    """JSON requests to one provider API with one bearer key. Safe to share between threads."""

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
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.base_url = base_url.rstrip("/")
        self.provider = provider
        self.title = title
        self.key_name = key_name
        self.timeout_s = timeout_s
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        # A provider that asks for a longer pause than this is told "later" to the caller instead of freezing it.
        self.max_retry_after_s = max_retry_after_s
        self._key = api_key.strip()
        self._sleep = sleep
        self._opener = urllib.request.build_opener()

    def __repr__(self) -> str:
        return f"HttpClient(provider={self.provider!r}, base_url={self.base_url!r})"

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
        """Send, retry what may be retried, and return the parsed JSON (None for an empty body).

        ``idempotent=False`` marks a request that creates something: it is repeated after a 429 (the provider
        refused it before doing anything) but never after a 5xx or a lost answer.
        """
        url = self.base_url + path
        if params:
            url += ("&" if "?" in url else "?") + _encode_params(params)
        data = None if body is None else json.dumps(body).encode("utf-8")
        where = f"{method} {path}"
        attempt = 0
        while True:
            attempt += 1
            try:
                status, headers, payload = self._send(method, url, data)
            except (urllib.error.URLError, OSError, http.client.HTTPException) as error:
                reason = self._redact(str(getattr(error, "reason", None) or error) or type(error).__name__)
                if idempotent and attempt < self.max_attempts:
                    delay = self._backoff(attempt)
                    log.info("%s: %s failed (%s); retry %d in %.1f s", self.provider, where, reason, attempt, delay)
                    self._sleep(delay)
                    continue
                raise ProviderError(
                    f"{self.title} could not be reached ({where}: {reason}). Check the network connection "
                    "and try again.",
                    provider=self.provider,
                    maybe_created=not idempotent,
                ) from None
            log.debug("%s: %s -> HTTP %d", self.provider, where, status)
            if status < 400:
                return self._parse(payload, where)

            parsed = self._parse_quietly(payload)
            detail = self._redact(error_detail(parsed))
            retry_after = parse_retry_after(headers.get("retry-after"))
            if status == 429:
                if attempt < self.max_attempts and (retry_after is None or retry_after <= self.max_retry_after_s):
                    delay = retry_after if retry_after is not None else self._backoff(attempt)
                    log.info("%s: %s rate-limited (HTTP 429); retry %d in %.1f s", self.provider, where, attempt, delay)
                    self._sleep(delay)
                    continue
                wait = f" It asked to wait {retry_after:.0f} s." if retry_after is not None else ""
                raise RateLimited(
                    f"{self.title} is limiting the request rate (HTTP 429 on {where}).{wait} Try again later.",
                    provider=self.provider,
                    retry_after_s=retry_after,
                )
            if status >= 500:
                if idempotent and attempt < self.max_attempts:
                    delay = self._backoff(attempt)
                    if retry_after is not None and retry_after <= self.max_retry_after_s:
                        delay = retry_after
                    log.info("%s: %s HTTP %d; retry %d in %.1f s", self.provider, where, status, attempt, delay)
                    self._sleep(delay)
                    continue
                why = f": {detail}" if detail else ""
                raise ProviderError(
                    f"{self.title} failed to answer {where} (HTTP {status}{why}). This is on the provider's side; "
                    "try again in a few minutes.",
                    provider=self.provider,
                    status=status,
                    maybe_created=not idempotent,
                )
            if status in (401, 403):
                raise rejected_key_error(self.title, self.key_name, self.provider, status, detail)
            why = f": {detail}" if detail else ""
            error_type = NotFound if status == 404 else ApiError
            raise error_type(
                f"{self.title} refused {where} (HTTP {status}{why}).",
                provider=self.provider,
                status=status,
                body=parsed,
                detail=detail,
            )

    # ------------------------------------------------------------------------------------------- internals

    def _send(self, method: str, url: str, data: bytes | None) -> tuple[int, Mapping[str, str], bytes]:
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Accept", "application/json")
        request.add_header("User-Agent", USER_AGENT)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        # Unredirected: urllib copies ordinary headers onto a redirected request, possibly to another host.
        request.add_unredirected_header("Authorization", f"Bearer {self._key}")
        try:
            with self._opener.open(request, timeout=self.timeout_s) as response:
                return response.status, self._headers(response.headers), response.read()
        except urllib.error.HTTPError as error:
            with error:
                return error.code, self._headers(error.headers), error.read()

    @staticmethod
    def _headers(headers: Any) -> dict[str, str]:
        return {str(key).lower(): str(value) for key, value in (headers.items() if headers else [])}

    def _backoff(self, attempt: int) -> float:
        # One client per user and provider: no herd to spread, so plain doubling (no jitter) keeps tests exact.
        return float(min(self.max_backoff_s, self.backoff_s * (2 ** (attempt - 1))))

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

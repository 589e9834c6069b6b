"""A ``Retriever`` over HTTP: ``effirag serve retrieval``'s ``/search``, so rollouts on many machines (or processes)
share one loaded index instead of each holding its own.

:class:`RemoteRetriever` returns what the in-process :class:`~effirag.retrieval.facade.EffiRetriever` returns for
the same call on the same index (items, scores, titles, kinds; token counts are the server's tokenizer's), so an
agent run gives the same trajectory either way. Transport errors, 429 and 5xx are retried with exponential backoff
(at least the server's ``Retry-After``); any other error answer is raised at once with the server's message.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import httpx

from effirag.errors import BackendError, ConfigError
from effirag.retrieval.base import RetrievalMode, RetrievalResult
from effirag.types import RetrievedItem

log = logging.getLogger(__name__)


class RemoteRetriever:
    """``RemoteRetriever("http://127.0.0.1:8000", token=None)``: the ``Retriever`` protocol through ``/search``."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 4,
        backoff_s: float = 0.5,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ConfigError("RemoteRetriever", "url", url, "must start with http:// or https://")
        if max_retries < 0:
            raise ConfigError("RemoteRetriever", "max_retries", max_retries, "must be >= 0")
        self.url = url.rstrip("/")
        self.max_retries, self.backoff_s = max_retries, backoff_s
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._client = httpx.Client(timeout=timeout_s, headers=headers)

    def close(self) -> None:
        self._client.close()

    def retrieve(
        self,
        query: str,
        mode: RetrievalMode | str = RetrievalMode.PASSAGE,
        k: int = 5,
        entities: Sequence[str] | None = None,
        offset: int = 0,
    ) -> RetrievalResult:
        body: dict[str, Any] = {"query": query, "mode": str(mode), "k": k, "offset": offset}
        if entities is not None:
            body["entities"] = list(entities)
        data = self._post("/search", body)
        try:
            items = [RetrievedItem.from_dict(d) for d in data["items"]]
            return RetrievalResult(items, dict(data["timings"]), dict(data.get("extras", {})))
        except (KeyError, TypeError, ValueError) as e:
            raise BackendError(f"{self.url}/search answered an unexpected body ({type(e).__name__}: {e})") from e

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        url, attempts, last = self.url + path, self.max_retries + 1, ""
        for attempt in range(attempts):
            delay = self.backoff_s * (2**attempt)
            try:
                r = self._client.post(url, json=body)
            except httpx.TransportError as e:
                last = f"cannot reach the retrieval server ({type(e).__name__}: {e})"
            else:
                if r.status_code == 200:
                    data = r.json()
                    if not isinstance(data, dict):
                        raise BackendError(f"POST {url} answered {str(data)[:200]}")
                    return data
                last = f"HTTP {r.status_code}: {_message(r)}"
                if r.status_code != 429 and r.status_code < 500:
                    raise BackendError(f"POST {url} answered {last}")
                delay = max(delay, _retry_after(r))
            if attempt + 1 < attempts:
                log.warning("POST %s: %s; retry %d/%d in %.1fs", url, last, attempt + 1, attempts - 1, delay)
                time.sleep(delay)
        raise BackendError(f"POST {url} failed after {attempts} attempt(s): {last}")


def _message(r: httpx.Response) -> str:
    try:
        return str(r.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return r.text[:200]


def _retry_after(r: httpx.Response) -> float:
    try:
        return min(60.0, max(0.0, float(r.headers.get("retry-after", 0))))
    except ValueError:
        return 0.0

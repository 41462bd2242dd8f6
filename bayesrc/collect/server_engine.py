"""The ``server`` engine: an item's K samples drawn as seeded requests to an endpoint, ``concurrency`` at a time."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

from bayesrc.collect.engines import ItemJob
from bayesrc.collect.sampling import Sample, Sampling
from bayesrc.collect.server_client import ServerClient


class ServerEngine:
    """Draws an item's K samples as K seeded requests (or, ``per_request`` = K, one request of K choices),
    ``concurrency`` at a time."""

    name = "server"

    def __init__(
        self,
        client: ServerClient,
        model: str,
        sampling: Sampling,
        pool: ThreadPoolExecutor,
        api: str = "completions",
        per_request: int = 1,
    ):
        self.client, self.model, self.sampling, self.pool, self.api, self.per_request = (
            client,
            model,
            sampling,
            pool,
            api,
            per_request,
        )
        self.fingerprint: str | None = None

    def _requests(self, prompt: str | list[dict], seeds: list[int]) -> list:
        """An item's requests in flight, each a future of its ``(seed, answer)`` pairs: one request per seed, or
        (``per_request`` > 1) one request of K choices under the item's first seed."""
        if self.per_request > 1:
            return [self.pool.submit(self._choices, prompt, seeds)]
        return [self.pool.submit(self._one, prompt, s) for s in seeds]

    def _one(self, prompt: str | list[dict], seed: int) -> list[tuple[int, dict]]:
        r = (
            self.client.chat(self.model, prompt, seed, self.sampling)[0]
            if self.api == "chat"
            else self.client.complete(self.model, prompt, seed, self.sampling)
        )
        return [(seed, r)]

    def _choices(self, messages: list[dict], seeds: list[int]) -> list[tuple[int, dict]]:
        return [(seeds[0], r) for r in self.client.chat(self.model, messages, seeds[0], self.sampling, len(seeds))]

    def draw_items(self, jobs: Iterable[ItemJob]) -> Iterator[tuple[int, list[Sample]]]:
        """Yield ``(index, [Sample, ...])`` per item as its K requests complete, in the jobs' order (the
        :class:`~bayesrc.collect.engines.Engine` protocol; the letters are the run's to read).

        Only a few items are in flight at a time, so a failure loses little finished work.
        """
        by_index = {j.index: j for j in jobs}
        order, first = list(by_index), next(iter(by_index.values()), None)
        ahead = max(2, 2 * self.pool._max_workers // max(1, len(first.seeds) if first else 1) + 1)
        futures: dict[int, list] = {}

        def submit(i: int) -> None:
            futures[i] = self._requests(by_index[i].prompt, by_index[i].seeds)

        try:
            for j, i in enumerate(order):
                for nxt in order[j : j + ahead]:
                    if nxt not in futures:
                        submit(nxt)
                out = []
                for k, (seed, r) in enumerate(pair for fut in futures[i] for pair in fut.result()):
                    self.fingerprint = self.fingerprint or r["fingerprint"]
                    finish = "stop" if r["finish"] == "stop" else "length"
                    out.append(Sample(k, seed, r["text"], int(r["n_tokens"] or 0), finish))
                del futures[i]  # only now: a failure above must cancel this item's other requests too
                yield i, out
        except BaseException:
            self.client.abandon()  # the run stops: requests in flight give up instead of waiting out their retries
            raise
        finally:
            for futs in futures.values():
                for f in futs:
                    f.cancel()

    def close(self) -> None:
        """Nothing to free: the requests' pool is the run's (``with`` around the drawing)."""

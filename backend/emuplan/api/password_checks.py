"""Argon2 on the server's cores: one check per core at a time, one per address, addresses that have not
failed first.

A check costs ~50 ms of CPU and 64 MiB on an idle machine (0.4 s on a loaded one). Run on the server's
thread pool, a flood of sign-ins took every thread and every core: pages waited 12 s. Here the requests
waiting for a check are coroutines holding no thread; an address gets one check at a time (a second
sign-in from it meanwhile is told to retry: nobody types two passwords at once), and they wait in two
queues: an address with no recent failure (the owner's, typing once) is served before addresses that
have failed (a guesser's second try and after). So a flood from a few machines delays a real sign-in by
about one check per flooding machine, not by one per request it sends.
"""

import asyncio
import os
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from anyio import CapacityLimiter, to_thread
from fastapi import Request

from emuplan.store.accounts import SignInRateLimited

T = TypeVar("T")
RETRY_AFTER_S = 1


class PasswordChecks:
    """One per app, made inside its event loop (its futures and limiter belong to that loop)."""

    def __init__(self, slots: int):
        self.free = slots
        self.threads = CapacityLimiter(slots)
        self.addresses: set[str] = set()  # with a check waiting or running
        # [0]: addresses without a recent failure, [1]: addresses that have failed.
        self.waiting: tuple[deque[asyncio.Future], deque[asyncio.Future]] = (deque(), deque())

    @contextmanager
    def one_at_a_time(self, address: str) -> Iterator[None]:
        """Around everything a check from ``address`` does; raises ``SignInRateLimited`` at once, before any
        database read, while another check from it waits or runs."""
        if address in self.addresses:
            raise SignInRateLimited(
                "A password from your address is being checked already: try again in 1 s.", RETRY_AFTER_S
            )
        self.addresses.add(address)
        try:
            yield
        finally:
            self.addresses.discard(address)

    async def run(self, failed_before: bool, function: Callable[..., T], *args) -> T:
        """``function(*args)`` on a thread once a core is free; ``failed_before``: the address has recent
        failures, so it waits behind every address that has none."""
        await self._turn(failed_before)
        try:
            return await to_thread.run_sync(function, *args, limiter=self.threads)
        finally:
            self._next()

    async def _turn(self, failed_before: bool) -> None:
        if self.free and not any(self.waiting):
            self.free -= 1
            return
        queue = self.waiting[failed_before]
        turn = asyncio.get_running_loop().create_future()
        queue.append(turn)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self._next()  # given the slot just as it was cancelled: pass it on
            elif turn in queue:
                queue.remove(turn)
            raise

    def _next(self) -> None:
        """Hand the slot to the first waiting in the first queue, or free it."""
        for queue in self.waiting:
            while queue:
                turn = queue.popleft()
                if not turn.done():
                    turn.set_result(None)
                    return
        self.free += 1


def password_checks(request: Request) -> PasswordChecks:
    state = request.app.state
    if not hasattr(state, "password_checks"):
        state.password_checks = PasswordChecks(os.cpu_count() or 1)
    return state.password_checks

"""Group commit: the writes that concurrent calls on one event loop make in one turn of the loop
are committed together at the start of the next turn, in one transaction with one flush to disk.
The durable effect stores and ledgers use it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeAlias


class _Alone:
    """A queued write's outcome when it could not be committed with the others and nothing of
    it was written: its caller runs it on its own."""


RUN_ALONE: Final = _Alone()
Write: TypeAlias = Callable[[], bool]
WriteOutcome: TypeAlias = "bool | _Alone | BaseException"


class GroupCommit:
    """Commits the writes (an effect store's conditional ``_insert`` and ``_swap``, a ledger's
    rows) that concurrent calls on one event loop make in one turn of the loop together, at the
    start of the next turn: one transaction, one flush to disk. Every caller resumes only after
    that commit, so a write is as durable when its caller proceeds as if it had been committed
    alone.

    ``commit_together(writes)`` runs on the loop thread and returns one outcome per write (its
    row count test, ``RUN_ALONE``, or the error it raised), or ``None`` when it cannot run now
    (the connection is in use elsewhere): then every write goes to ``call(write)``, the store's
    usual way to run one operation. Waiting a turn costs a lone caller two turns of the loop,
    so while commits keep holding a single write, writes go straight to ``call`` and only
    every ``LONE_PROBE``-th one waits to see whether others come along.
    """

    LONE_PROBE: Final = 16

    def __init__(
        self,
        commit_together: Callable[[list[Write]], list[WriteOutcome] | None],
        call: Callable[[Write], Awaitable[bool]] | None = None,
    ) -> None:
        self._commit_together = commit_together
        self._call = call
        self._queued: dict[asyncio.AbstractEventLoop, list[tuple[Write, asyncio.Future[Any]]]]
        self._queued = {}
        # How many writes in a row met no company, on the loop that made them.
        self._lone_loop: asyncio.AbstractEventLoop | None = None
        self._lone_writes = 0

    async def write(self, fn: Write) -> bool:
        """Commit ``fn`` with the writes of concurrent calls, or through ``call`` alone (a group
        made without ``call``, as the ledgers make theirs, queues with ``enqueue`` only)."""
        call = self._call
        if call is None:
            raise RuntimeError("this GroupCommit was made without a call for lone writes")
        loop = asyncio.get_running_loop()
        if self.goes_alone(loop):
            return await call(fn)
        outcome = await self.enqueue(loop, fn)
        if outcome is RUN_ALONE:
            return await call(fn)
        return bool(outcome)

    def loop_to_queue_on(self) -> asyncio.AbstractEventLoop | None:
        """The running event loop, when a write made now should wait for its next commit;
        ``None`` when it should be done at once: outside an event loop, or alone (see
        ``goes_alone``)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        return None if self.goes_alone(loop) else loop

    def goes_alone(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Whether a write made on ``loop`` now should skip the queue: nothing is queued and
        recent commits held one write each (every ``LONE_PROBE``-th write still waits)."""
        if loop in self._queued or self._lone_loop is not loop:
            return False
        if not self._lone_writes % self.LONE_PROBE:
            return False  # the probe: it waits, and its commit counts it
        self._lone_writes += 1
        return True

    def enqueue(self, loop: asyncio.AbstractEventLoop, fn: Write) -> asyncio.Future[Any]:
        """Queue ``fn`` for the commit at the start of ``loop``'s next turn; the future gets its
        outcome. A write whose future is cancelled before that commit is left out of it."""
        done: asyncio.Future[Any] = loop.create_future()
        queue = self._queued.get(loop)
        if queue is None:
            queue = self._queued[loop] = []
            loop.call_soon(self._commit, loop)
        queue.append((fn, done))
        return done

    def flush(self) -> None:
        """Commit now what the calling thread's running event loop has queued (the commit
        scheduled for its next turn then finds nothing). Only that loop's queue: futures may only
        be resolved from their own loop's thread."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if loop in self._queued:
            self._commit(loop)

    def _commit(self, loop: asyncio.AbstractEventLoop) -> None:
        batch = [item for item in self._queued.pop(loop, []) if not item[1].cancelled()]
        if not batch:
            return
        if len(batch) > 1:
            self._lone_loop, self._lone_writes = None, 0
        elif self._lone_loop is loop:
            self._lone_writes += 1
        else:
            self._lone_loop, self._lone_writes = loop, 1
        outcomes: list[WriteOutcome] | None
        try:
            outcomes = self._commit_together([fn for fn, _done in batch])
        except Exception as err:  # never leave a caller waiting
            outcomes = [err] * len(batch)
        if outcomes is None:
            outcomes = [RUN_ALONE] * len(batch)
        for (_fn, done), outcome in zip(batch, outcomes, strict=True):
            if done.cancelled():
                continue
            if isinstance(outcome, BaseException):
                done.set_exception(outcome)
            else:
                done.set_result(outcome)

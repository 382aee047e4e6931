"""``relay.api.broadcast``: every waiter is woken, a batch per turn of the event loop, so
other work (an SDK's poll) runs between batches instead of after all of them."""

from __future__ import annotations

import asyncio

from relay.api.broadcast import BATCH, Broadcast


async def test_everyone_is_woken_and_other_work_runs_in_between() -> None:
    broadcast, woken = Broadcast(), []
    count = BATCH * 10

    async def waiter(i: int) -> None:
        await broadcast.wait()
        woken.append(i)

    tasks = [asyncio.create_task(waiter(i)) for i in range(count)]
    await asyncio.sleep(0)
    assert len(broadcast) == count
    broadcast.wake()
    other = asyncio.get_running_loop().create_future()

    async def poll() -> None:  # arrives just after the change
        await asyncio.sleep(0)
        other.set_result(len(woken))

    await asyncio.gather(*tasks, poll())
    assert sorted(woken) == list(range(count))
    assert other.result() < count / 2  # served long before the last stream
    assert len(broadcast) == 0


async def test_a_waiter_that_gives_up_is_forgotten() -> None:
    broadcast = Broadcast()
    task = asyncio.create_task(broadcast.wait())
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert len(broadcast) == 0
    broadcast.wake()  # nothing to wake, nothing fails

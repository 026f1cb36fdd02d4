"""The dynamic batcher alone: a lone request does not wait for company; concurrent
requests are merged into one forward."""
import asyncio
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ember.serve.batching import DynamicBatcher
from ember.serve.metrics import Metrics
from ember.serve.tensors import Batch


def _batcher(calls, max_wait_ms):
    def run_batch(arrays):
        calls.append(arrays["x"].shape[0])
        return {"y": arrays["x"] * 2}
    return DynamicBatcher(run_batch, ThreadPoolExecutor(1), Metrics(), max_batch_size=8,
                          max_wait_ms=max_wait_ms)


def _request(value):
    return Batch({"x": np.full((1, 2), value, np.float32)}, 1, False)


def test_a_lone_request_runs_without_waiting_out_max_wait():
    calls = []

    async def main():
        batcher = _batcher(calls, max_wait_ms=60_000)  # a minute: never waited out here
        await batcher.start()
        out = await asyncio.wait_for(batcher.submit(_request(3.0)), timeout=30)
        await batcher.close()
        return out

    out = asyncio.run(main())
    np.testing.assert_array_equal(out["y"], [[6.0, 6.0]])
    assert calls == [1]


def test_concurrent_requests_share_one_forward():
    calls = []

    async def main():
        batcher = _batcher(calls, max_wait_ms=50)
        await batcher.start()
        outs = await asyncio.gather(*[batcher.submit(_request(float(i))) for i in range(5)])
        await batcher.close()
        return outs

    outs = asyncio.run(main())
    assert [float(o["y"][0, 0]) for o in outs] == [0.0, 2.0, 4.0, 6.0, 8.0]
    assert calls == [5]

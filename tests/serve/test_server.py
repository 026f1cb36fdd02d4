"""A real uvicorn server on a loopback port: predictions, errors, a concurrent load with
dynamic batching, generation, and graceful shutdown (in a thread, and `ember serve` in
a subprocess stopped by SIGTERM)."""
import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

import ember  # noqa: E402
from ember.serve import create_app, generate  # noqa: E402

from .conftest import ThreadedServer, free_port  # noqa: E402
from .models import slow_mlp  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _metric(text: str, line_start: str) -> float:
    for line in text.splitlines():
        if line.startswith(line_start + " "):
            return float(line.split()[-1])
    raise AssertionError(f"no metric {line_start!r} in:\n{text}")


def _in_threads(n: int, work, timeout: float = 20.0) -> list:
    """Run ``work(i)`` in ``n`` threads released together; their results in order."""
    results, barrier = [None] * n, threading.Barrier(n)

    def run(i):
        barrier.wait()
        try:
            results[i] = work(i)
        except Exception as exc:  # noqa: BLE001 - reported below
            results[i] = exc
    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    assert not any(t.is_alive() for t in threads), "clients hung"
    return results


def test_predictions_errors_and_batching_under_load(cnn_dir):
    directory, model = cnn_dir
    images = np.random.default_rng(0).standard_normal((32, 1, 8, 8)).astype(np.float32)
    with ember.no_grad():
        want = model(ember.from_numpy(images)).numpy()
    app = create_app(directory, max_batch_size=32, max_wait_ms=20, max_body_bytes=20000)
    with ThreadedServer(app) as server, httpx.Client(base_url=server.url,
                                                     timeout=10) as client:
        def predict(i, c=client):
            r = c.post("/v1/predict", json={"inputs": {"image": {
                "data": images[i].ravel().tolist(), "shape": [1, 8, 8]}}})
            return r.status_code, r.json()

        status, body = predict(0)
        assert status == 200
        np.testing.assert_allclose(np.array(body["outputs"]["output"]["data"]), want[0],
                                   rtol=1e-5, atol=1e-6)

        bad = [client.post("/v1/predict", content=b"{oops"),
               client.post("/v1/predict", json={"inputs": {"image": [[[0.0] * 8] * 7]}}),
               client.post("/v1/predict", json={"inputs": {"image": {
                   "data": [[[0] * 8] * 8], "dtype": "int32"}}}),
               client.post("/v1/predict", json={"inputs": {"image": [[[0.0] * 8] * 8] * 200}}),
               client.get("/v1/nothing"), client.delete("/v1/predict")]
        assert [r.status_code for r in bad] == [400, 422, 422, 413, 404, 405]
        assert all(r.json()["error"] for r in bad)
        assert "expected shape [null, 1, 8, 8]" in bad[1].json()["error"]
        assert "expected dtype float32, got 'int32'" in bad[2].json()["error"]
        assert predict(1)[0] == 200  # still serving

        # 32 concurrent clients, 2 requests each, on loopback
        started = time.monotonic()
        with httpx.Client(base_url=server.url, timeout=10,
                          limits=httpx.Limits(max_connections=40)) as pool:
            results = _in_threads(32, lambda i: [predict(i, pool), predict(i, pool)])
        assert time.monotonic() - started < 20
        for i, pair in enumerate(results):
            assert not isinstance(pair, Exception), pair
            for status, body in pair:
                assert status == 200, body
                np.testing.assert_allclose(np.array(body["outputs"]["output"]["data"]),
                                           want[i], rtol=1e-5, atol=1e-6)
        text = client.get("/metrics").text
    forwards = _metric(text, "ember_batch_requests_count")
    alone = _metric(text, 'ember_batch_requests_bucket{le="1.0"}')
    assert alone < forwards, "no forward merged two or more requests"
    assert _metric(text, "ember_batch_size_sum") == 66  # 64 + the 2 single requests
    assert _metric(text, 'ember_requests_total{route="/v1/predict",method="POST",'
                         'status="200"}') == 66


def test_shutdown_with_requests_in_flight_loses_none():
    app = create_app(slow_mlp([8, 4], delay=0.25), example_inputs=ember.zeros(1, 8),
                     max_batch_size=2, max_wait_ms=1, warmup=False)
    server = ThreadedServer(app).__enter__()
    state = app.state.ember
    try:
        def request(i):
            return httpx.post(f"{server.url}/v1/predict", json=[[float(i)] * 8],
                              timeout=15).status_code
        results = []
        clients = threading.Thread(target=lambda: results.extend(_in_threads(8, request)))
        clients.start()
        deadline = time.monotonic() + 10
        while state.in_flight < 8 and time.monotonic() < deadline:
            time.sleep(0.005)
        assert state.in_flight == 8
        server.stop()  # as on SIGTERM: stop accepting, finish what is in flight
        clients.join(20)
        assert results == [200] * 8
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{server.url}/healthz", timeout=2)
    finally:
        server.__exit__()


def test_generation_over_http(gpt_model):
    want = generate(gpt_model, list(b"ember"), 16, use_cache=False)
    with ThreadedServer(create_app(gpt_model)) as server:
        body = {"prompt": "ember", "max_new_tokens": 16}
        plain = httpx.post(f"{server.url}/v1/generate", json=body, timeout=10).json()
        with httpx.stream("POST", f"{server.url}/v1/generate", json={**body, "stream": True},
                          timeout=10) as r:
            events = [json.loads(line[6:]) for line in r.iter_lines()
                      if line.startswith("data: ")]
    assert plain["tokens"] == want
    assert [e["token"] for e in events[:-1]] == want and events[-1]["tokens"] == want


def test_ember_serve_cli_stops_gracefully_on_sigterm(tmp_path):
    model = slow_mlp([8, 4], delay=0.4)
    ember.save_pretrained(model, tmp_path, {"import": "tests.serve.models:slow_mlp",
                                            "options": {"sizes": [8, 4], "delay": 0.4}},
                          example_inputs=ember.zeros(1, 8))
    port = free_port()
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-m", "ember", "serve", str(tmp_path), "--port",
                            str(port), "--allow-import", "--max-batch-size", "1",
                            "--log-level", "warning"], cwd=ROOT, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, proc.stdout.read().decode()
            assert time.monotonic() < deadline, "ember serve did not become ready"
            time.sleep(0.1)
        x = [[0.1 * i for i in range(8)]]
        with ember.no_grad():
            want = model(ember.tensor(x)).numpy()
        results = []

        def call():
            r = httpx.post(f"{url}/v1/predict", json=x, timeout=15)
            results.append((r.status_code, r.json()))
        threads = [threading.Thread(target=call) for _ in range(3)]
        for t in threads:
            t.start()
        time.sleep(0.3)  # the requests are in flight (3 forwards of 0.4 s, one at a time)
        proc.send_signal(signal.SIGTERM)
        for t in threads:
            t.join(15)
        # uvicorn re-raises the signal once it has shut down cleanly
        assert proc.wait(15) in (0, -signal.SIGTERM)
        assert [s for s, _ in results] == [200] * 3
        for _, body in results:
            np.testing.assert_allclose(body["outputs"]["output"]["data"], want, rtol=1e-5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

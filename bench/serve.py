"""Serving throughput and latency: ``ember serve`` (uvicorn + Starlette) under 1, 8 and
32 concurrent clients, with dynamic batching on and off.

    python bench/serve.py                       # ~100 s on 2 shared cores
    python bench/serve.py --duration 10         # seconds of load per point (default 4)
    python bench/serve.py --clients 1 8 32      # concurrency levels (the default)
    python bench/serve.py --models cnn          # only the Digits CNN (default: cnn gpt)
    python bench/serve.py --blas-threads 1      # the server's OpenBLAS on one thread

Models: the Digits CNN (``ember.config.models.cnn(image_size=8, padding=1)``: conv
1→32, conv 32→64, linear 256→128→10 on 8×8 images) and the DESIGN.md gpt
(``ember.models.GPT()``: vocab 256, context 64, d_model 128, 4 heads, 2 blocks), both
untrained (seeded), saved with ``ember.save_pretrained`` into a temporary folder.
Endpoints: ``/v1/predict`` for both (one 1×1×8×8 image; one 16-token sequence, whose
reply is 16×256 logits), and ``/v1/generate`` for the gpt (an 8-token prompt,
``--new-tokens`` 8 new tokens, greedy, not streamed).

Each model and batching setting gets its own server: a subprocess running
``ember.serve.serve`` on a free 127.0.0.1 port (log level ``warning``, so no access log),
so the load generator does not share the server's GIL (it does share the machine's
cores: on 2 cores the client's CPU time is part of the picture, and the table shows
it). ``--blas-threads N`` sets OPENBLAS_NUM_THREADS (and OMP_NUM_THREADS) to N in the
server's environment; by default they are left as they are, as for ``ember serve``.
Batching on is ``max_batch_size=32, max_wait_ms=5``; off is ``max_batch_size=1``.
Once ``/readyz`` says ready, each endpoint is checked (one reply parsed) and warmed up
(1 s at the highest concurrency), then driven for ``--duration`` seconds per
concurrency level by an asyncio load generator: ``N`` coroutines sharing one
``httpx.AsyncClient`` with ``N`` keep-alive connections, each sending its next request as
soon as the last one is answered (a closed loop). Request bodies are serialised once.

Per point: requests answered with 200 per second (over the time from the start to the
last reply), the median and 99th-percentile latency seen by the client, the mean batch
size (``ember_batch_size`` sum/count in ``/metrics``, before and after the point; only
predict forwards are counted, generation steps are not batched), failed requests (an
error or a status other than 200; must be 0), the server's own mean request time
(``ember_request_duration_seconds``), and the CPU time per request of the server process
(from /proc) and of the load generator. "on/off" is the throughput with batching over
the throughput without, at the same concurrency, from the same run. The machine is
shared: quote ratios and medians, not lone figures.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Callable

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

CNN_OPTIONS = {"image_size": 8, "padding": 1}
PREDICT_TOKENS = 16  # sequence length of a gpt predict request
PROMPT_TOKENS = 8    # prompt length of a gpt generate request
WARMUP_S = 1.0
SERVER_CODE = """
import sys
import ember.serve
ember.serve.serve(sys.argv[1], host="127.0.0.1", port=int(sys.argv[2]),
                  log_level="warning", max_batch_size=int(sys.argv[3]),
                  max_wait_ms=float(sys.argv[4]))
"""


# Models and requests --------------------------------------------------------------------
def save_models(folder: str, names: list[str]) -> dict[str, str]:
    """Save the models as model directories; {name: directory}."""
    import ember
    from ember.config.models import cnn
    dirs = {}
    if "cnn" in names:
        ember.manual_seed(0)
        dirs["cnn"] = os.path.join(folder, "cnn")
        ember.save_pretrained(cnn(**CNN_OPTIONS).eval(), dirs["cnn"],
                              {"name": "cnn", **CNN_OPTIONS},
                              example_inputs=ember.zeros(1, 1, 8, 8), input_names=["image"])
    if "gpt" in names:
        ember.manual_seed(0)
        dirs["gpt"] = os.path.join(folder, "gpt")
        ember.save_pretrained(ember.models.GPT().eval(), dirs["gpt"], {"name": "gpt"})
    return dirs


def endpoints(model: str, new_tokens: int) -> list[tuple[str, str, bytes, Callable[[dict], bool]]]:
    """(label, path, body, check) per endpoint of a model; ``check`` validates a parsed
    reply."""
    rng = np.random.default_rng(0)
    if model == "cnn":
        image = (rng.random((1, 1, 8, 8)) * 16).astype(np.float32)
        body = {"inputs": {"image": {"data": image.ravel().tolist(), "shape": [1, 1, 8, 8],
                                     "dtype": "float32"}}}
        return [("predict", "/v1/predict", json.dumps(body).encode(),
                 lambda r: r["outputs"]["output"]["shape"] == [1, 10])]
    tokens = rng.integers(0, 256, PREDICT_TOKENS).tolist()
    predict = {"inputs": {"tokens": {"data": [tokens], "shape": [1, PREDICT_TOKENS],
                                     "dtype": "int64"}}}
    prompt = rng.integers(0, 256, PROMPT_TOKENS).tolist()
    generate = {"prompt": prompt, "max_new_tokens": new_tokens, "temperature": 0}
    return [("predict", "/v1/predict", json.dumps(predict).encode(),
             lambda r: r["outputs"]["output"]["shape"] == [1, PREDICT_TOKENS, 256]),
            (f"generate {new_tokens}", "/v1/generate", json.dumps(generate).encode(),
             lambda r: len(r["tokens"]) in (new_tokens, PROMPT_TOKENS + new_tokens))]


# The server -----------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``ember.serve.serve`` of a model directory in a subprocess on a free port."""

    def __init__(self, directory: str, max_batch_size: int, max_wait_ms: float,
                 blas_threads: int | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
        if blas_threads is not None:
            env["OPENBLAS_NUM_THREADS"] = env["OMP_NUM_THREADS"] = str(blas_threads)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SERVER_CODE, directory, str(self.port),
             str(max_batch_size), str(max_wait_ms)], env=env, cwd=ROOT)

    def wait_ready(self, timeout: float = 60.0) -> None:
        import httpx
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited with status {self.proc.returncode}")
            try:
                if httpx.get(self.url + "/readyz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError("the server did not get ready")

    def cpu_seconds(self) -> float:
        """User + system CPU time of the server process so far."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def metric_sums(url: str) -> dict[str, float]:
    """The histograms' ``_sum`` and ``_count`` lines of /metrics, keyed
    ``name{labels}_sum`` (``ember_request_duration_seconds{route="/v1/predict"}_sum``)."""
    import httpx
    text = httpx.get(url + "/metrics", timeout=10).text
    out = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        base, brace, labels = name.partition("{")
        for suffix in ("_sum", "_count"):
            if line.startswith("ember_") and base.endswith(suffix):
                out[base[:-len(suffix)] + brace + labels + suffix] = float(value)
    return out


def delta_mean(before: dict, after: dict, name: str) -> float | None:
    """Mean of a histogram over the observations between two snapshots."""
    count = after.get(name + "_count", 0) - before.get(name + "_count", 0)
    if count <= 0:
        return None
    return (after.get(name + "_sum", 0) - before.get(name + "_sum", 0)) / count


# The load generator ---------------------------------------------------------------------
async def drive(url: str, path: str, body: bytes, clients: int, duration: float) -> dict:
    """``clients`` closed-loop clients for ``duration`` seconds: latencies of the
    answered requests, failures by kind, and the elapsed time."""
    import httpx
    headers = {"content-type": "application/json"}
    latencies: list[float] = []
    failures: dict[str, int] = {}
    # one AsyncClient (one keep-alive connection) per simulated client: a shared pool
    # of 32 connections costs the load generator several times more CPU per request
    clients_ = [httpx.AsyncClient(base_url=url, timeout=60) for _ in range(clients)]
    try:
        start = time.perf_counter()
        deadline = start + duration
        last = [start]

        async def one_client(client: httpx.AsyncClient) -> None:
            while time.perf_counter() < deadline:
                t0 = time.perf_counter()
                try:
                    r = await client.post(path, content=body, headers=headers)
                    kind = None if r.status_code == 200 else f"HTTP {r.status_code}"
                except httpx.HTTPError as exc:
                    kind = type(exc).__name__
                t1 = time.perf_counter()
                last[0] = max(last[0], t1)
                if kind is None:
                    latencies.append(t1 - t0)
                else:
                    failures[kind] = failures.get(kind, 0) + 1

        await asyncio.gather(*(one_client(c) for c in clients_))
    finally:
        for client in clients_:
            await client.aclose()
    return {"latencies": latencies, "failures": failures, "elapsed": last[0] - start}


def measure(server: Server, path: str, body: bytes, clients: int, duration: float) -> dict:
    before, cpu0, ours0 = metric_sums(server.url), server.cpu_seconds(), time.process_time()
    run = asyncio.run(drive(server.url, path, body, clients, duration))
    ours, cpu = time.process_time() - ours0, server.cpu_seconds() - cpu0
    after = metric_sums(server.url)
    lat = np.array(run["latencies"]) * 1e3
    n = len(lat)
    served = f'ember_request_duration_seconds{{route="{path}"}}'
    return {"clients": clients, "requests": n,
            "rps": n / run["elapsed"] if run["elapsed"] > 0 else 0.0,
            "p50": float(np.percentile(lat, 50)) if n else float("nan"),
            "p99": float(np.percentile(lat, 99)) if n else float("nan"),
            "batch": delta_mean(before, after, "ember_batch_size"),
            "failed": sum(run["failures"].values()), "failures": run["failures"],
            "server_ms": (delta_mean(before, after, served) or float("nan")) * 1e3,
            "server_cpu": cpu / max(n, 1) * 1e3, "client_cpu": ours / max(n, 1) * 1e3}


def check(server: Server, path: str, body: bytes, valid) -> None:
    import httpx
    r = httpx.post(server.url + path, content=body, timeout=60,
                   headers={"content-type": "application/json"})
    if r.status_code != 200 or not valid(r.json()):
        raise RuntimeError(f"{path}: unexpected reply {r.status_code} {r.text[:200]}")


# Main -----------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=4.0,
                        help="seconds of load per point (default 4)")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32],
                        help="concurrency levels (default 1 8 32)")
    parser.add_argument("--models", nargs="+", choices=("cnn", "gpt"), default=["cnn", "gpt"])
    parser.add_argument("--new-tokens", type=int, default=8,
                        help="new tokens per /v1/generate request (default 8)")
    parser.add_argument("--max-batch-size", type=int, default=32,
                        help="max_batch_size with batching on (default 32)")
    parser.add_argument("--max-wait-ms", type=float, default=5.0,
                        help="max_wait_ms (default 5)")
    parser.add_argument("--blas-threads", type=int, default=None,
                        help="OPENBLAS_NUM_THREADS/OMP_NUM_THREADS of the server (default: "
                             "as inherited)")
    args = parser.parse_args()
    settings = [("on", args.max_batch_size), ("off", 1)]

    rows = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ember-bench-serve-") as folder:
        dirs = save_models(folder, args.models)
        for model in args.models:
            for label, max_batch in settings:
                server = Server(dirs[model], max_batch, args.max_wait_ms, args.blas_threads)
                try:
                    server.wait_ready()
                    for name, path, body, valid in endpoints(model, args.new_tokens):
                        check(server, path, body, valid)
                        asyncio.run(drive(server.url, path, body, max(args.clients),
                                          WARMUP_S))
                        for clients in args.clients:
                            point = measure(server, path, body, clients, args.duration)
                            point.update(model=model, endpoint=name, batching=label)
                            rows.append(point)
                            print(f"{model:4} {name:11} batching {label:3} {clients:3} "
                                  f"clients: {point['rps']:8.1f} req/s  p50 "
                                  f"{point['p50']:7.2f} ms  p99 {point['p99']:7.2f} ms  "
                                  f"failed {point['failed']}", flush=True)
                finally:
                    server.stop()
    print_table(rows, args, time.perf_counter() - started)


def print_table(rows: list[dict], args, wall: float) -> None:
    rps = {(r["model"], r["endpoint"], r["batching"], r["clients"]): r["rps"] for r in rows}
    head = ("model", "endpoint", "batching", "clients", "requests", "req/s", "on/off",
            "p50 ms", "p99 ms", "mean batch", "failed", "server ms", "srv CPU ms/req",
            "client CPU ms/req")
    lines = []
    for r in sorted(rows, key=lambda r: (args.models.index(r["model"]), r["endpoint"],
                                         r["clients"], r["batching"] != "on")):
        off = rps.get((r["model"], r["endpoint"], "off", r["clients"]))
        ratio = f"{r['rps'] / off:.2f}x" if r["batching"] == "on" and off else ""
        lines.append((r["model"], r["endpoint"], r["batching"], str(r["clients"]),
                      str(r["requests"]), f"{r['rps']:.1f}", ratio, f"{r['p50']:.2f}",
                      f"{r['p99']:.2f}", "-" if r["batch"] is None else f"{r['batch']:.2f}",
                      str(r["failed"]) + (f" {r['failures']}" if r["failed"] else ""),
                      f"{r['server_ms']:.2f}", f"{r['server_cpu']:.2f}",
                      f"{r['client_cpu']:.2f}"))
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(head)]
    print(f"\nember serve on 127.0.0.1: batching on = max_batch_size {args.max_batch_size}, "
          f"max_wait_ms {args.max_wait_ms:g}; off = max_batch_size 1; {args.duration:g} s "
          f"per point; server BLAS threads "
          f"{args.blas_threads or os.environ.get('OPENBLAS_NUM_THREADS', 'default')}; "
          f"{os.cpu_count()} CPUs; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; {wall:.0f} s in all")
    print("| " + " | ".join(h.ljust(w) for h, w in zip(head, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for line in lines:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(line, widths)) + " |")
    failed = sum(r["failed"] for r in rows)
    if failed:
        print(f"\n{failed} requests failed")
        sys.exit(1)


if __name__ == "__main__":
    main()

"""The app through Starlette's TestClient: predictions, validation, errors, limits,
metrics, OpenAPI and generation."""
import json
import threading
import warnings

import numpy as np
import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")
with warnings.catch_warnings():  # it prefers httpx2 now; httpx still works
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient  # noqa: E402

import ember  # noqa: E402
from ember.serve import create_app, generate  # noqa: E402

from .models import slow_mlp  # noqa: E402


@pytest.fixture(scope="module")
def mlp_client(mlp_dir):
    with TestClient(create_app(mlp_dir[0])) as client:
        yield client, mlp_dir[1]


def _output(response):
    assert response.status_code == 200, response.text
    out = response.json()["outputs"]["output"]
    return np.array(out["data"], dtype=out["dtype"]).reshape(out["shape"])


def test_predict_matches_the_model(mlp_client):
    client, model = mlp_client
    x = np.random.default_rng(0).standard_normal((3, 64)).astype(np.float32)
    want = model(ember.from_numpy(x)).detach().numpy()
    tensor = {"data": x.ravel().tolist(), "shape": [3, 64], "dtype": "float32"}
    close = dict(rtol=1e-5, atol=1e-6)  # (BLAS may sum in another order per batch size)
    np.testing.assert_allclose(_output(client.post("/v1/predict", json={
        "inputs": {"input": tensor}})), want, **close)
    np.testing.assert_allclose(_output(client.post("/v1/predict", json=x.tolist())), want,
                               **close)
    # one example without the batch dim gives one output without it
    single = _output(client.post("/v1/predict", json=x[0].tolist()))
    assert single.shape == (10,)
    np.testing.assert_allclose(single, want[0], **close)


def test_cnn_named_input(cnn_dir):
    directory, model = cnn_dir
    x = np.random.default_rng(1).standard_normal((2, 1, 8, 8)).astype(np.float32)
    with TestClient(create_app(directory)) as client:
        got = _output(client.post("/v1/predict", json={"inputs": {"image": {
            "data": x.tolist()}}}))
        wrong = client.post("/v1/predict", json={"inputs": {"image": {
            "data": x[:, :, :7].tolist()}}})
    np.testing.assert_allclose(got, model(ember.from_numpy(x)).detach().numpy(), rtol=1e-6)
    assert wrong.status_code == 422
    assert wrong.json()["error"] == ("input 'image': expected shape [null, 1, 8, 8] (null: "
                                     "any size), got [2, 1, 7, 8]")


@pytest.mark.parametrize("body, status, message", [
    (b"{\"inputs\": ", 400, "not valid JSON"),
    (b"\xff\xfe", 400, "not valid JSON"),
    (json.dumps([[0.0] * 63]), 422, "input 'input': expected shape [null, 64]"),
    (json.dumps({"inputs": {"input": {"data": [[1] * 64], "dtype": "int64"}}}), 422,
     "input 'input': expected dtype float32, got 'int64'"),
    (json.dumps([[True] * 64]), 422, "expected dtype float32, got bool values"),
    (json.dumps([["a"] * 64]), 422, "expected dtype float32, got non-number values"),
    (json.dumps([[0.0] * 64, [0.0]]), 422, "ragged"),
    (json.dumps({"inputs": {"x": [[0.0] * 64]}}), 422, "missing ['input'], unknown ['x']"),
    (json.dumps({"inputs": {"input": {"data": [0.0] * 64, "shape": [2, 64]}}}), 422,
     "needs 128 values, data has 64"),
    (json.dumps({"inputs": {"input": {"data": [0.0] * 64, "shape": [2 ** 32] * 4}}}), 422,
     f"needs {2 ** 128} values, data has 64"),
    (json.dumps({"data": [1]}), 422, "the body must be"),
])
def test_bad_requests_get_4xx_and_the_server_goes_on(mlp_client, body, status, message):
    client, _ = mlp_client
    response = client.post("/v1/predict", content=body,
                           headers={"content-type": "application/json"})
    assert response.status_code == status
    assert message in response.json()["error"]
    assert client.post("/v1/predict", json=[[0.0] * 64]).status_code == 200


def test_routes_methods_and_size_limits(mlp_dir):
    with TestClient(create_app(mlp_dir[0], max_body_bytes=1000)) as client:
        missing = client.get("/v2/predict")
        assert missing.status_code == 404 and "/v1/predict" in missing.json()["error"]
        wrong = client.get("/v1/predict")
        assert wrong.status_code == 405
        assert wrong.json()["error"] == "GET is not allowed on /v1/predict; use POST"
        big = client.post("/v1/predict", json=[[0.0] * 640])
        assert big.status_code == 413 and "limit is 1000" in big.json()["error"]

        def chunks():  # no Content-Length: counted as it streams
            for _ in range(20):
                yield b" " * 100
        streamed = client.post("/v1/predict", content=chunks())
        assert streamed.status_code == 413 and "1000 bytes" in streamed.json()["error"]
        assert client.post("/v1/predict", json=[[0.5] * 64]).status_code == 200


def test_health_readiness_openapi_and_model_info(mlp_dir):
    app = create_app(mlp_dir[0])
    client = TestClient(app)
    assert client.get("/readyz").status_code == 503  # lifespan not run: not warmed up
    with client:
        assert client.get("/healthz").json() == {"status": "ok"}
        assert client.get("/readyz").json() == {"status": "ready"}
        schema = client.get("/openapi.json").json()
        info = client.get("/v1/model").json()
    assert schema["openapi"].startswith("3.")
    assert set(schema["paths"]) >= {"/v1/predict", "/healthz", "/readyz", "/metrics"}
    assert "/v1/generate" not in schema["paths"]
    body = schema["paths"]["/v1/predict"]["post"]["requestBody"]["content"]
    assert "input" in json.dumps(body)
    assert info["inputs"] == [{"name": "input", "shape": [None, 64], "dtype": "float32"}]


def test_metrics_count_requests_by_route_and_status(mlp_dir):
    with TestClient(create_app(mlp_dir[0])) as client:
        for _ in range(3):
            client.post("/v1/predict", json=[[0.0] * 64])
        client.post("/v1/predict", content=b"nope")
        client.get("/missing")
        response = client.get("/metrics")
    text = response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert 'ember_requests_total{route="/v1/predict",method="POST",status="200"} 3' in text
    assert 'ember_requests_total{route="/v1/predict",method="POST",status="400"} 1' in text
    assert 'ember_requests_total{route="unmatched",method="GET",status="404"} 1' in text
    assert 'ember_request_duration_seconds_count{route="/v1/predict"} 4' in text
    assert 'ember_batch_size_count 3' in text  # one forward each (the warm-up isn't one)
    assert "# TYPE ember_batch_size histogram" in text


def test_concurrency_limit_gives_503():
    model = slow_mlp([8, 4], delay=0.4)
    app = create_app(model, example_inputs=ember.zeros(1, 8), max_concurrency=1,
                     warmup=False)
    with TestClient(app) as client:
        results = []
        slow = threading.Thread(target=lambda: results.append(
            client.post("/v1/predict", json=[[0.0] * 8]).status_code))
        slow.start()
        while app.state.ember.in_flight == 0 and slow.is_alive():
            threading.Event().wait(0.01)
        refused = client.post("/v1/predict", json=[[0.0] * 8])
        slow.join()
        assert refused.status_code == 503 and "max_concurrency" in refused.json()["error"]
        assert results == [200]
        assert client.post("/v1/predict", json=[[0.0] * 8]).status_code == 200


def test_model_failure_is_a_500_with_the_reason():
    model = ember.config.models.mlp([8, 4])
    app = create_app(model, inputs=[ember.pretrained.InputSpec("x", (None, None),
                                                               "float32")], warmup=False)
    with TestClient(app) as client:
        response = client.post("/v1/predict", json=[[0.0] * 5])
        assert response.status_code == 500
        assert "the model failed" in response.json()["error"]
        assert client.post("/v1/predict", json=[[0.0] * 8]).status_code == 200


@pytest.fixture(scope="module")
def gpt_client(gpt_model):
    with TestClient(create_app(gpt_model)) as client:
        yield client


def test_generate_greedy_matches_uncached(gpt_client, gpt_model):
    response = gpt_client.post("/v1/generate", json={"prompt": "Hi", "max_new_tokens": 12})
    assert response.status_code == 200
    want = generate(gpt_model, list(b"Hi"), 12, use_cache=False)
    assert response.json()["tokens"] == want
    assert response.json()["text"] == bytes(want).decode("utf-8", errors="replace")
    ids = gpt_client.post("/v1/generate", json={"prompt": [72, 105], "max_new_tokens": 12})
    assert ids.json()["tokens"] == want


def test_generate_stream_gives_the_same_tokens(gpt_client):
    body = {"prompt": [5, 6, 7], "max_new_tokens": 10, "temperature": 0.8, "top_k": 20,
            "top_p": 0.9, "seed": 3}
    plain = gpt_client.post("/v1/generate", json=body).json()["tokens"]
    with gpt_client.stream("POST", "/v1/generate", json={**body, "stream": True}) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(line[len("data: "):]) for line in r.iter_lines()
                  if line.startswith("data: ")]
    assert [e["token"] for e in events[:-1]] == plain
    assert events[-1]["done"] is True and events[-1]["tokens"] == plain


@pytest.mark.parametrize("body, message", [
    ({"prompt": [1], "max_new_tokens": 100}, "context of 48"),
    ({"prompt": {"a": 1}}, "'prompt' must be"),
    ({"prompt": [1], "temperature": "hot"}, "'temperature' must be a number"),
    ({"prompt": [1], "top_p": 1.5}, "top_p must be in (0, 1]"),
    ({"prompt": [1], "beams": 4}, "unknown keys ['beams']"),
    ({"prompt": [999]}, "[0, 256)"),
    ({"prompt": [1], "temperature": 1.0, "seed": -5}, "seed must be an int >= 0"),
])
def test_generate_validation(gpt_client, body, message):
    response = gpt_client.post("/v1/generate", json=body)
    assert response.status_code == 422 and message in response.json()["error"]


def test_generate_refused_for_a_non_generating_model(mlp_client):
    response = mlp_client[0].post("/v1/generate", json={"prompt": [1]})
    assert response.status_code == 404 and "does not generate" in response.json()["error"]

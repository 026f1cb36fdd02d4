import socket
import threading
import time

import pytest

import ember
from ember.config.models import cnn, mlp

def pytest_collection_modifyitems(items):
    # Starlette's TestClient warns that it will move from httpx to httpx2.
    for item in items:
        if "tests/serve" in str(item.fspath):
            item.add_marker(pytest.mark.filterwarnings(
                "ignore:Using `httpx` with `starlette.testclient`"))


MLP_SIZES = [64, 32, 10]


@pytest.fixture(scope="session")
def mlp_dir(tmp_path_factory):
    """(directory, model) of a saved 64-32-10 MLP."""
    ember.manual_seed(0)
    model = mlp(MLP_SIZES).eval()
    directory = tmp_path_factory.mktemp("mlp")
    ember.save_pretrained(model, directory, {"name": "mlp", "sizes": MLP_SIZES},
                          example_inputs=ember.zeros(1, 64))
    return directory, model


@pytest.fixture(scope="session")
def cnn_dir(tmp_path_factory):
    """(directory, model) of a saved Digits CNN (8x8 inputs)."""
    ember.manual_seed(1)
    options = {"image_size": 8, "padding": 1, "channels": [8, 16], "hidden": 32}
    model = cnn(**options).eval()
    directory = tmp_path_factory.mktemp("cnn")
    ember.save_pretrained(model, directory, {"name": "cnn", **options},
                          example_inputs=ember.zeros(1, 1, 8, 8), input_names=["image"])
    return directory, model


@pytest.fixture(scope="session")
def gpt_model():
    ember.manual_seed(2)
    return ember.models.GPT(vocab_size=256, context=48, d_model=32, n_heads=4,
                            n_layers=2).eval()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ThreadedServer:
    """A real uvicorn server on a free loopback port, in a thread."""

    def __init__(self, app, graceful_timeout: int = 10) -> None:
        import uvicorn
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on",
            timeout_graceful_shutdown=graceful_timeout))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> "ThreadedServer":
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(20)
        assert not self.thread.is_alive(), "uvicorn did not stop"

    def __exit__(self, *exc) -> None:
        if self.thread.is_alive():
            self.stop()

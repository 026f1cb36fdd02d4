"""The reference training steps of DESIGN.md (mlp, cnn, gpt), written once against a
torch-like API so the same code builds the ember model and the PyTorch model."""
from __future__ import annotations

import numpy as np

V, T, D, H, L = 256, 64, 128, 4, 2  # gpt: vocab, context, width, heads, blocks


def batch(workload: str):
    """The workload's inputs and targets as NumPy arrays (the same for every framework)."""
    rng = np.random.default_rng(0)
    if workload == "mlp":
        return rng.standard_normal((128, 784), dtype=np.float32), rng.integers(0, 10, 128)
    if workload == "cnn":
        return rng.standard_normal((64, 1, 28, 28), dtype=np.float32), rng.integers(0, 10, 64)
    x = rng.integers(0, V, (16, T + 1))
    return x[:, :-1], x[:, 1:]


def build(lib, workload: str, gpt_shape: tuple = (V, T, D, H, L)):
    """(model, optimizer, loss_fn) for ``lib`` (``ember`` or ``torch``); ``gpt_shape``
    (vocab, context, width, heads, blocks) sizes the gpt workload's model."""
    nn, F = lib.nn, lib.nn.functional
    V, T, D, H, L = gpt_shape

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.qkv, self.proj = nn.LayerNorm(D), nn.Linear(D, 3 * D), nn.Linear(D, D)
            self.ln2, self.fc1, self.fc2 = nn.LayerNorm(D), nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)
            q, k, v = [z.view(b, t, H, D // H).transpose(1, 2) for z in (q, k, v)]
            att = (q @ k.transpose(-2, -1)) / (D // H) ** 0.5
            mask = lib.triu(lib.ones(t, t, dtype=lib.bool, device=x.device), 1)
            att = att.masked_fill(mask, float("-inf")).softmax(-1)
            y = (att @ v).transpose(1, 2).reshape(b, t, D)
            x = x + self.proj(y)
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(V, D)
            self.pos = nn.Parameter(lib.zeros(T, D) + 0.02 * lib.randn(T, D))
            self.blocks = nn.Sequential(*[Block() for _ in range(L)])
            self.ln, self.head = nn.LayerNorm(D), nn.Linear(D, V)

        def forward(self, idx):
            return self.head(self.ln(self.blocks(self.tok(idx) + self.pos)))

    if workload == "mlp":
        model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                              nn.Linear(512, 10))
    elif workload == "cnn":
        model = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                              nn.Linear(1600, 128), nn.ReLU(), nn.Linear(128, 10))
    else:
        model = GPT()
    optim = lib.optim.AdamW if workload == "gpt" else lib.optim.Adam
    optimizer = optim(model.parameters(), lr=1e-3)

    def loss_fn(x, y):
        out = model(x)
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
    return model, optimizer, loss_fn


def make_step(lib, workload: str):
    """A zero-argument function running one training step of ``workload`` in ``lib``."""
    lib.manual_seed(0)
    model, optimizer, loss_fn = build(lib, workload)
    x_np, y_np = batch(workload)
    return step_function(optimizer, loss_fn, lib.from_numpy(x_np), lib.from_numpy(y_np))


def step_function(optimizer, loss_fn, x, y):
    """A zero-argument function running one training step on the batch ``(x, y)``."""
    def step():
        optimizer.zero_grad()
        loss = loss_fn(x, y)
        loss.backward()
        optimizer.step()
        return loss
    return step

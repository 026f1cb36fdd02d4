"""End to end against PyTorch: the DESIGN.md gpt workload built in both with the same
weights, trained 20 AdamW steps on the same batches, gives the same loss curve."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

V, T, D, H, L = 256, 64, 128, 4, 2


def build(lib):
    nn, F = lib.nn, lib.nn.functional

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
            mask = lib.triu(lib.ones(t, t, dtype=lib.bool), 1)
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

    return GPT()


def train(lib, model, batches):
    optimizer = lib.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for x_np, y_np in batches:
        x, y = lib.from_numpy(x_np), lib.from_numpy(y_np)
        out = model(x)
        loss = lib.nn.functional.cross_entropy(out.reshape(-1, V), y.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return np.array(losses)


def test_gpt_loss_curve_matches_torch():
    torch.manual_seed(0)
    reference = build(torch)
    model = build(ember)
    model.load_state_dict({k: ember.tensor(v.detach().numpy())
                           for k, v in reference.state_dict().items()})
    rng = np.random.default_rng(0)
    batches = []
    for _ in range(20):
        # next token = previous + a per-row step: learnable, so the loss falls
        starts, steps = rng.integers(0, V, (16, 1)), rng.integers(1, 4, (16, 1))
        tokens = (starts + steps * np.arange(T + 1)) % V
        batches.append((tokens[:, :-1], tokens[:, 1:]))
    ours, theirs = train(ember, model, batches), train(torch, reference, batches)
    assert theirs[-1] < theirs[0] - 0.5  # it learns, so the comparison means something
    np.testing.assert_allclose(ours, theirs, atol=1e-4, rtol=0)

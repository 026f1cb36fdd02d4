"""The reference training steps of training.py (mlp, cnn, gpt) written functionally for
JAX: the same shapes, the same math (PyTorch's default initialisation, exact GELU, mean
cross-entropy, Adam / AdamW with PyTorch's defaults) and the same batch, with the whole
step -- loss, gradients and optimizer update -- under one ``jax.jit``.

JAX is not a dependency of ember: run this in an environment that has ``jax[cpu]``
(see bench/run.py's ``--python-peers``).
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from training import D, H, L, T, V, batch

LR, BETAS, EPS = 1e-3, (0.9, 0.999), 1e-8
WEIGHT_DECAY = {"mlp": 0.0, "cnn": 0.0, "gpt": 1e-2}  # Adam, Adam, AdamW


# Parameters, initialised as PyTorch does -------------------------------------------------
def _uniform(rng, shape, fan_in):
    bound = 1 / math.sqrt(fan_in)
    return jnp.asarray(rng.uniform(-bound, bound, shape).astype(np.float32))


def linear(rng, n_in, n_out):
    """Weight stored (in, out), so ``x @ w`` is torch's ``x @ weight.T``."""
    return {"w": _uniform(rng, (n_in, n_out), n_in), "b": _uniform(rng, (n_out,), n_in)}


def conv(rng, c_in, c_out, k):
    fan_in = c_in * k * k
    return {"w": _uniform(rng, (c_out, c_in, k, k), fan_in), "b": _uniform(rng, (c_out,), fan_in)}


def layer_norm():
    return {"g": jnp.ones(D, jnp.float32), "b": jnp.zeros(D, jnp.float32)}


def init(workload: str):
    """The parameter tree of ``workload``."""
    rng = np.random.default_rng(0)
    if workload == "mlp":
        return [linear(rng, 784, 512), linear(rng, 512, 512), linear(rng, 512, 10)]
    if workload == "cnn":
        return {"c1": conv(rng, 1, 32, 3), "c2": conv(rng, 32, 64, 3),
                "f1": linear(rng, 1600, 128), "f2": linear(rng, 128, 10)}

    def block():
        return {"ln1": layer_norm(), "qkv": linear(rng, D, 3 * D), "proj": linear(rng, D, D),
                "ln2": layer_norm(), "fc1": linear(rng, D, 4 * D), "fc2": linear(rng, 4 * D, D)}
    return {"tok": jnp.asarray(rng.standard_normal((V, D), dtype=np.float32)),
            "pos": jnp.asarray(0.02 * rng.standard_normal((T, D), dtype=np.float32)),
            "blocks": [block() for _ in range(L)], "ln": layer_norm(), "head": linear(rng, D, V)}


# Forward passes ----------------------------------------------------------------------------
def affine(p, x):
    return x @ p["w"] + p["b"]


def conv2d(p, x):
    return jax.lax.conv(x, p["w"], (1, 1), "VALID") + p["b"][None, :, None, None]


def max_pool2(x):
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")


def norm(p, x):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / jnp.sqrt(var + 1e-5) * p["g"] + p["b"]


def block(p, x):
    b, t, _ = x.shape
    q, k, v = jnp.split(affine(p["qkv"], norm(p["ln1"], x)), 3, axis=2)
    q, k, v = [z.reshape(b, t, H, D // H).transpose(0, 2, 1, 3) for z in (q, k, v)]
    att = q @ k.transpose(0, 1, 3, 2) / (D // H) ** 0.5
    att = jax.nn.softmax(jnp.where(jnp.triu(jnp.ones((t, t), bool), 1), -jnp.inf, att), -1)
    y = (att @ v).transpose(0, 2, 1, 3).reshape(b, t, D)
    x = x + affine(p["proj"], y)
    return x + affine(p["fc2"], jax.nn.gelu(affine(p["fc1"], norm(p["ln2"], x)), approximate=False))


def forward(workload: str, p, x):
    if workload == "mlp":
        x = jax.nn.relu(affine(p[0], x))
        return affine(p[2], jax.nn.relu(affine(p[1], x)))
    if workload == "cnn":
        x = max_pool2(jax.nn.relu(conv2d(p["c1"], x)))
        x = max_pool2(jax.nn.relu(conv2d(p["c2"], x)))
        return affine(p["f2"], jax.nn.relu(affine(p["f1"], x.reshape(x.shape[0], -1))))
    x = p["tok"][x] + p["pos"]
    for q in p["blocks"]:
        x = block(q, x)
    return affine(p["head"], norm(p["ln"], x))


def loss_fn(workload: str, p, x, y):
    out = forward(workload, p, x)
    logp = jax.nn.log_softmax(out.reshape(-1, out.shape[-1]))
    return -jnp.take_along_axis(logp, y.reshape(-1, 1), 1).mean()


# The step --------------------------------------------------------------------------------
def adam(p, g, m, v, t, weight_decay):
    """One Adam(W) update of one parameter, as torch.optim.Adam / AdamW (decoupled decay)."""
    m = BETAS[0] * m + (1 - BETAS[0]) * g
    v = BETAS[1] * v + (1 - BETAS[1]) * g * g
    m_hat, v_hat = m / (1 - BETAS[0] ** t), v / (1 - BETAS[1] ** t)
    p = p * (1 - LR * weight_decay) - LR * m_hat / (jnp.sqrt(v_hat) + EPS)
    return p, m, v


def make_step(workload: str):
    """A zero-argument function running one jitted training step of ``workload`` in JAX;
    it returns the loss once computed (``block_until_ready``), so it can be timed."""
    x_np, y_np = batch(workload)
    x, y = jnp.asarray(x_np), jnp.asarray(y_np)
    zeros = lambda tree: jax.tree_util.tree_map(jnp.zeros_like, tree)
    params = init(workload)
    state = [params, zeros(params), zeros(params), jnp.zeros((), jnp.float32)]

    @jax.jit
    def train_step(p, m, v, t, x, y):
        loss, g = jax.value_and_grad(lambda p: loss_fn(workload, p, x, y))(p)
        t = t + 1
        new = jax.tree_util.tree_map(
            lambda p, g, m, v: adam(p, g, m, v, t, WEIGHT_DECAY[workload]), p, g, m, v)
        unzip = lambda i: jax.tree_util.tree_map(lambda _, r: r[i], p, new)
        return unzip(0), unzip(1), unzip(2), t, loss

    def step():
        *new_state, loss = train_step(*state, x, y)
        state[:] = new_state
        return loss.block_until_ready()
    return step

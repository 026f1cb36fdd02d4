"""TensorBoardLogger.log_graph: the traced forward written as a GraphDef, read back by
TensorBoard's own EventAccumulator."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.train import TensorBoardLogger, Trainer

from .common import F, loader, params

pytest.importorskip("tensorboardX")
event_accumulator = pytest.importorskip("tensorboard.backend.event_processing."
                                        "event_accumulator")
nn = ember.nn


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(6, 16), nn.ReLU()),
                                     nn.Sequential(nn.Linear(16, 16), nn.ReLU())])
        self.drop = nn.Dropout(0.5)
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(self.drop(x)) * 0.5


def cnn():
    return nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(4 * 3 * 3, 5))


class ItemModel(nn.Module):
    """A forward with a data-dependent branch: ember.jit cannot trace it."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        y = self.fc(x)
        return y * 2 if y.sum().item() > 0 else y


def read_graph(log_dir):
    acc = event_accumulator.EventAccumulator(str(log_dir))
    acc.Reload()
    graph = acc.Graph()
    nodes = {node.name: node for node in graph.node}
    assert len(nodes) == len(graph.node), "node names repeat"
    return nodes


def shapes(node) -> list:
    return [[d.size for d in s.dim] for s in node.attr["_output_shapes"].list.shape]


def check_edges(nodes) -> None:
    for node in nodes.values():
        for edge in node.input:
            source, _, index = edge.partition(":")
            assert source in nodes, f"{node.name} reads {edge}, which is no node"
            assert int(index or 0) < len(shapes(nodes[source]))


def write_graph(tmp_path, model, inputs):
    logger = TensorBoardLogger(tmp_path, histograms=False)
    assert logger.log_graph(model, inputs)
    logger.finalize({})
    return read_graph(tmp_path)


def test_mlp_graph(tmp_path):
    ember.manual_seed(0)
    model = MLP()
    x = ember.randn(8, 6)
    before, rng = params(model), ember.get_rng_state()
    nodes = write_graph(tmp_path, model, x)
    # 1 input, 6 parameters, the constant 0.5; linear+relu twice, dropout's mask and
    # multiply, the head's linear, the final multiply
    assert len(nodes) == 1 + 6 + 1 + 4 + 2 + 2
    names = {"blocks/0/0/weight", "blocks/0/0/bias", "blocks/1/0/weight",
             "blocks/1/0/bias", "head/weight", "head/bias"}
    assert names <= set(nodes)
    assert {nodes[n].op for n in names} == {"Parameter"}
    assert {k.replace(".", "/") for k in model.state_dict()} == names
    check_edges(nodes)
    assert nodes["input_0"].op == "Input" and shapes(nodes["input_0"]) == [[8, 6]]
    first = nodes["blocks/0/0/linear"]
    assert first.op == "linear" and shapes(first) == [[8, 16]]
    assert list(first.input) == ["input_0", "blocks/0/0/weight", "blocks/0/0/bias"]
    assert shapes(nodes["blocks/1/1/relu"]) == [[8, 16]]
    assert shapes(nodes["head/weight"]) == [[3, 16]]
    assert nodes["head/linear"].attr["dtype"].type == 1  # DT_FLOAT
    assert nodes["drop/random"].op == "random"
    assert shapes(nodes["mul"]) == [[8, 3]] and list(nodes["mul"].input)[0] == "head/linear"
    const = nodes[list(nodes["mul"].input)[1]]
    assert const.op == "Const" and const.attr["value"].s == b"0.5"
    # traced, never run: weights, random state and grads as they were
    assert all(np.array_equal(a, b) for a, b in zip(before.values(), params(model).values()))
    assert ember.get_rng_state() == rng
    assert all(p.grad is None for p in model.parameters())
    assert model(ember.randn(2, 6)).shape == (2, 3)  # still an ordinary eager model
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())


def test_cnn_graph(tmp_path):
    ember.manual_seed(0)
    model = cnn()
    stats = model[1].running_mean.numpy().copy(), int(model[1].num_batches_tracked.item())
    nodes = write_graph(tmp_path, model, ember.randn(2, 1, 8, 8))
    params_ = {"0/weight", "0/bias", "1/weight", "1/bias", "5/weight", "5/bias"}
    buffers = {"1/running_mean", "1/running_var", "1/num_batches_tracked"}
    assert params_ <= set(nodes) and buffers <= set(nodes)
    assert {nodes[n].op for n in buffers} == {"Buffer"}
    check_edges(nodes)
    inputs = [n for n in nodes.values() if n.op in ("Input", "Parameter", "Buffer")]
    assert len(inputs) == 1 + len(params_) + len(buffers)
    ops = [n for n in nodes.values() if n.op not in ("Input", "Parameter", "Buffer", "Const")]
    assert all("/" in n.name for n in ops)  # every op sits in its module's box
    by_module = {n.name.split("/")[0] for n in ops}
    assert by_module == {"0", "1", "2", "3", "4", "5"}
    conv = [n for n in ops if n.name.startswith("0/")]
    assert len(conv) == 1 and shapes(conv[0]) == [[2, 4, 6, 6]]
    assert "0/weight" in conv[0].input
    pool = [n for n in ops if n.name.startswith("3/")]
    assert shapes(pool[-1])[0] == [2, 4, 3, 3]
    flat = [n for n in ops if n.name.startswith("4/")]
    assert shapes(flat[-1]) == [[2, 36]]
    assert shapes(nodes["5/linear"]) == [[2, 5]]
    assert b"stride" in conv[0].attr["params"].s
    # the graph holds batch norm's running-statistics update; the model does not get it
    assert np.array_equal(model[1].running_mean.numpy(), stats[0])
    assert int(model[1].num_batches_tracked.item()) == stats[1]


def test_untraceable_model_is_skipped_with_a_warning(tmp_path):
    ember.manual_seed(0)
    model = ItemModel()
    logger = TensorBoardLogger(tmp_path / "tb", histograms=False, log_graph=True)
    trainer = Trainer(model, ember.optim.SGD(model.parameters(), lr=0.1), F.cross_entropy,
                      train_loader=loader(), max_steps=3, progress_bar=False,
                      eval_every_n_epochs=None, loggers=[logger])
    with pytest.warns(UserWarning, match=r"could not be traced.*item\(\)"):
        trainer.fit()
    assert trainer.global_step == 3 and np.isfinite(trainer.last_loss)
    acc = event_accumulator.EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    assert not acc.Tags()["graph"]


def test_trainer_writes_the_graph_once_on_the_first_batch(tmp_path):
    ember.manual_seed(0)
    model = MLP()
    logger = TensorBoardLogger(tmp_path, histograms=False, log_graph=True)
    calls = []
    original = logger.log_graph

    def counting(model_, inputs=None):
        calls.append(inputs[0].shape)
        return original(model_, inputs)
    logger.log_graph = counting
    trainer = Trainer(model, ember.optim.SGD(model.parameters(), lr=0.1), F.cross_entropy,
                      train_loader=loader(batch_size=8), max_epochs=2, progress_bar=False,
                      seed=3, loggers=[logger])
    trainer.fit()
    assert calls == [(8, 6)]
    nodes = read_graph(tmp_path)
    assert shapes(nodes["input_0"]) == [[8, 6]] and "head/weight" in nodes

    # the same run without the graph: the same weights (tracing changed nothing)
    ember.manual_seed(0)
    twin = MLP()
    Trainer(twin, ember.optim.SGD(twin.parameters(), lr=0.1), F.cross_entropy,
            train_loader=loader(batch_size=8), max_epochs=2, progress_bar=False,
            seed=3).fit()
    a, b = params(model), params(twin)
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_example_inputs_and_no_inputs(tmp_path):
    model = MLP()
    logger = TensorBoardLogger(tmp_path, histograms=False, example_inputs=ember.randn(3, 6))
    assert logger.log_graph(model)
    logger.finalize({})
    assert shapes(read_graph(tmp_path)["input_0"]) == [[3, 6]]
    with pytest.warns(UserWarning, match="no example inputs"):
        assert not TensorBoardLogger(tmp_path / "b").log_graph(model)


def test_an_op_never_takes_a_module_boxs_name(tmp_path):
    class Odd(nn.Module):
        def __init__(self):
            super().__init__()
            self.relu = nn.Linear(3, 3)  # a box named like the op its parent issues

        def forward(self, x):
            return F.relu(self.relu(x))

    nodes = write_graph(tmp_path, Odd(), ember.randn(2, 3))
    assert set(nodes) == {"input_0", "relu/weight", "relu/bias", "relu/linear", "relu_1"}
    assert nodes["relu_1"].op == "relu" and list(nodes["relu_1"].input) == ["relu/linear"]

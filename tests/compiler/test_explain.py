"""``explain`` and ``to_dot``: the counts they report match the graphs, the memory
estimate follows the liveness rules it states, and the DOT text is a well-formed
digraph with one node per input, constant, instruction, output and update."""
from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

import ember
from ember.compiler import explain, to_dot
from ember.compiler.explain import _fusion_section, peak_bytes, snapshot
from ember.compiler.ir import Constant, Graph, Input, Instr, Update, Value
from ember.ops import registry
from ember.ops.registry import OPS, AbstractValue

F32 = ember.float32


def _emit(g, name, *inputs, **params):
    op = OPS[name]
    out = registry.infer(op, *[AbstractValue(v.shape, v.dtype) for v in inputs], **params)
    ins = Instr(op, inputs, params, [(out.shape, out.dtype)])
    g.instrs.append(ins)
    return ins.outputs[0]


def _small_graph():
    """x -> exp -> view -> sin -> cos (output), plus a constant and an update."""
    g = Graph()
    x = Value((10,), F32)
    g.inputs.append(Input("arg", 0, x, "x"))
    c = Value((), F32)
    g.constants.append(Constant(np.asarray(2.0, np.float32), c))
    a = _emit(g, "exp", x)                  # 40 B
    v = _emit(g, "view", a, shape=(2, 5))   # shares a's memory
    b = _emit(g, "sin", v)                  # 40 B
    d = _emit(g, "mul", b, c)               # 40 B
    g.outputs = [_emit(g, "cos", d)]        # 40 B
    g.updates = [Update("data", ("arg", 0), b, "x")]
    return g


def test_peak_bytes_follows_liveness():
    g = _small_graph()
    # at sin: a (kept alive by the view it feeds) and b; at mul: b (an update, kept to the
    # end) and d; at cos: b, d and the output
    assert peak_bytes(g) == 120
    assert peak_bytes(g, free_dead=False) == 160  # every result, none freed


def test_explain_reports_traces_and_graph_sizes(capsys):
    @ember.jit
    def f(x):
        return ((x * 1 + 0).exp().neg().neg() * 2).sum()

    f(ember.ones(3))
    f(ember.ones(4))
    f(ember.ones(4))
    text = f.explain()
    assert capsys.readouterr().out.strip() == text.strip()
    spec = next(reversed(f.cache.values()))
    assert "traced 2 times (1 retrace)" in text
    assert "1. first call" in text
    assert "2. tensor argument 0 changed: float32[3] -> float32[4]" in text
    captured = re.search(r"captured: +(\d+) instructions", text)
    optimised = re.search(r"after passes: (\d+) instructions", text)
    assert int(captured.group(1)) == len(spec.original.instrs) == 7
    assert int(optimised.group(1)) == len(spec.graph.instrs) <= 3  # x*1, +0, neg(neg)
    assert "optimised graph:" in text and "fusion groups:" in text
    assert "compiled peak of intermediates" in text


def test_jit_explain_compiles_calls_and_explains(capsys):
    assert ember.jit.explain is explain
    x = ember.tensor([1.0, 2.0, 3.0])
    text = ember.jit.explain(lambda t: (t * 2).sin().sum(), x)
    assert "traced 1 time (0 retraces)" in text and "1. first call" in text
    assert text in capsys.readouterr().out


def test_explain_of_an_uncalled_function_says_what_to_do():
    with pytest.raises(ember.EmberError, match="call the function first"):
        ember.jit(lambda t: t + 1).explain()


def test_captured_graph_is_kept_as_it_was_before_the_passes():
    f = ember.jit(lambda t: (t * 1).exp() * 1)
    f(ember.ones(3))
    spec = next(iter(f.cache.values()))
    assert [i.op.name for i in spec.original.instrs] == ["mul", "exp", "mul"]
    assert len(spec.graph.instrs) < 3
    copy = snapshot(spec.original)
    copy.instrs[0].inputs = []
    assert spec.original.instrs[0].inputs  # a snapshot shares no lists


class _Kernel:
    """What a fusion pass's kernel looks like to explain: a name, its steps, code."""
    n_outputs = 1
    backend = "c"

    def __init__(self, name, steps, domain):
        self.name, self.domain = name, domain
        self.steps = [type("Step", (), {"op": OPS[s]})() for s in steps]
        self.source = f"/* {name} */\nvoid ember_kernel(void) {{}}\n"

    def describe(self):
        return f"{self.name} over {list(self.domain)}"


def test_fusion_section_lists_groups_and_generated_kernels():
    g = Graph()
    for kernel in (_Kernel("fused_add_mul", ["add", "mul"], (4, 4)),
                   _Kernel("fused_add_mul", ["add", "mul"], (8,)),
                   _Kernel("fused_exp_sum", ["exp", "sum"], (3, 5))):
        g.instrs.append(Instr(kernel, [], {}, [((), F32)]))
    g.instrs.append(Instr(OPS["neg"], [], {}, [((), F32)]))
    text = "\n".join(_fusion_section(g))
    assert "fusion groups: 3 (2 distinct)" in text
    assert "fused_add_mul x2 (2 ops: add, mul) [runs as c]" in text
    assert "over [4, 4], [8]" in text
    assert "fused_exp_sum x1 (2 ops: exp, sum)" in text
    assert "generated kernels: 2 distinct" in text
    assert "void ember_kernel(void) {}" in text
    assert "neg" not in text


def test_fusion_section_without_kernels():
    assert _fusion_section(_small_graph()) == ["fusion groups: none",
                                                "generated kernels: none"]


# DOT -----------------------------------------------------------------------------------
def _parse_dot(text):
    """(node ids, edges) of DOT text, checking the statements this writer emits."""
    lines = text.strip().splitlines()
    assert lines[0] == "digraph ember_graph {" and lines[-1] == "}"
    nodes, edges = [], []
    for line in lines[1:-1]:
        line = line.strip()
        assert line.endswith(";"), line
        edge = re.fullmatch(r'(\w+) -> (\w+) \[label="(?:[^"\\]|\\.)*"\];', line)
        node = re.fullmatch(r'(\w+) \[[^\[\]]*label="(?:[^"\\]|\\.)*"\];', line)
        if edge:
            edges.append(edge.groups())
        elif node:
            nodes.append(node.group(1))
        else:
            assert re.fullmatch(r'(rankdir=\w+|(node|edge) \[.*\]);', line), line
    assert len(nodes) == len(set(nodes))
    assert all(a in nodes and b in nodes for a, b in edges)
    return nodes, edges


def _count(nodes, prefix):
    return sum(1 for n in nodes if re.fullmatch(prefix + r"\d+", n))


def test_to_dot_has_a_node_per_input_constant_instruction_and_result(tmp_path):
    g = _small_graph()
    path = tmp_path / "graph.dot"
    text = to_dot(g, path)
    assert path.read_text() == text
    assert (tmp_path / "graph.svg").exists() == (shutil.which("dot") is not None)
    nodes, edges = _parse_dot(text)
    assert _count(nodes, "in") == len(g.inputs) == 1
    assert _count(nodes, "c") == len(g.constants) == 1
    assert _count(nodes, "i") == len(g.instrs) == 5
    assert _count(nodes, "out") == 1 and _count(nodes, "upd") == 1
    assert len(nodes) == 9
    reads = sum(len(ins.inputs) for ins in g.instrs)
    assert len(edges) == reads + len(g.outputs) + len(g.updates)
    assert ("in0", "i0") in edges and ("i2", "upd0") in edges and ("i4", "out0") in edges


def test_to_dot_of_a_compiled_function_draws_its_optimised_graph():
    f = ember.jit(lambda t: (t * 3).exp().sum())
    f(ember.ones(2, 2))
    nodes, edges = _parse_dot(to_dot(f))
    g = f.graph()
    assert _count(nodes, "i") == len(g.instrs)
    assert _count(nodes, "in") == len(g.inputs)

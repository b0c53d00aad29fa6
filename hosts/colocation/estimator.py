"""Peak-memory estimator (PMC): traverse a task's computation graph with per-operator
memory cost functions and tensor liveness, as in CoGNN §III-C / GNNSched §3.3.

Every operator of the forward pass is listed in execution (topological) order by
a *program* per model, with the tensors it allocates (CoGNN Table II categories:
weight, output, gradient, ephemeral) sized from the graph (nodes, edges, feature
lengths). The cost functions follow what PyTorch and PyG's message passing
really allocate, not the paper's idealised table: PyG gathers one message per
edge (``index_select``) and scatters it back (``new_zeros`` + ``scatter_add_``),
so edge-sized tensors exist, and autograd keeps exactly the tensors each
operator saves for its backward.

``Simulator`` is a small symbolic autograd: a tensor's storage lives while the
program holds it (Python liveness, written out where the code drops a name) or
while a pending backward node saved it. Backward runs nodes in autograd's order
(highest creation sequence among the ready ones), allocates each gradient,
frees the node's incoming gradient and saved tensors, and accumulates gradients
of tensors used twice in place. Each allocation is rounded up to the allocator's
512 bytes. The peak of live bytes is the estimate.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

from hosts.colocation.memory import round_up
from hosts.colocation.models import ModelConfig, sampled_edges

F32, I64, BOOL = 4, 8, 1
PASS = -1  # a gradient that is the incoming gradient itself (no allocation)


class Storage:
    __slots__ = ("nbytes", "refs")

    def __init__(self, nbytes: int):
        self.nbytes = nbytes
        self.refs = 1


class Tensor:
    """A symbolic tensor: a storage (shared by views) and its autograd producer."""

    __slots__ = ("storage", "requires_grad", "node")

    def __init__(self, storage: Storage, requires_grad=False, node=None):
        self.storage = storage
        self.requires_grad = requires_grad
        self.node = node  # None for inputs and parameters (leaves)


@dataclass
class Node:
    seq: int
    grads: list  # (input Tensor, gradient bytes or PASS), in the order the kernel allocates
    saved: list  # storages kept for backward
    backward_scratch: int  # bytes its backward kernel allocates and frees inside


class Simulator:
    def __init__(self, grad_enabled: bool):
        self.grad_enabled = grad_enabled
        self.live = 0
        self.peak = 0
        self._seq = 0
        self.param_grads: list[Storage] = []

    # -- allocation and liveness -------------------------------------------------
    def _alloc_storage(self, nbytes: int) -> Storage:
        storage = Storage(round_up(int(nbytes)))
        self.live += storage.nbytes
        self.peak = max(self.peak, self.live)
        return storage

    def _release(self, storage: Storage) -> None:
        storage.refs -= 1
        if storage.refs == 0:
            self.live -= storage.nbytes

    def new(self, nbytes: int) -> Tensor:
        return Tensor(self._alloc_storage(nbytes))

    def param(self, nbytes: int) -> Tensor:
        return Tensor(self._alloc_storage(nbytes), requires_grad=self.grad_enabled)

    def view(self, t: Tensor) -> Tensor:
        t.storage.refs += 1
        return Tensor(t.storage, t.requires_grad, t.node)

    def drop(self, *tensors: Tensor | None) -> None:
        for t in tensors:
            if t is not None:
                self._release(t.storage)

    def ephemeral(self, *sizes: int) -> None:
        """Scratch an operator allocates and frees before it returns."""
        storages = [self._alloc_storage(s) for s in sizes]
        for s in storages:
            self._release(s)

    # -- operators -------------------------------------------------------------------
    def op(self, out_bytes: int, grads=(), saved=(), save_output=False, backward_scratch=0) -> Tensor:
        """An operator with one new output. ``grads``: (input, gradient bytes) pairs
        for inputs that may need a gradient; ``saved``: inputs kept for backward;
        ``backward_scratch``: bytes its backward allocates and frees inside."""
        out = self.new(out_bytes)
        self.attach(out, grads, saved, save_output, backward_scratch)
        return out

    def attach(self, out: Tensor, grads=(), saved=(), save_output=False, backward_scratch=0) -> None:
        live_grads = [(t, g) for t, g in grads if t.requires_grad]
        if not (self.grad_enabled and live_grads):
            return
        self._seq += 1
        kept = [t.storage for t in saved] + ([out.storage] if save_output else [])
        node = Node(self._seq, live_grads, kept, backward_scratch)
        for storage in node.saved:
            storage.refs += 1
        out.requires_grad = True
        out.node = node

    # -- backward --------------------------------------------------------------------
    def backward(self, loss: Tensor) -> None:
        deps: dict[int, int] = {}
        nodes: dict[int, Node] = {}
        stack = [loss.node]
        while stack:
            node = stack.pop()
            if node.seq in nodes:
                continue
            nodes[node.seq] = node
            for t, _ in node.grads:
                if t.node is not None:
                    deps[t.node.seq] = deps.get(t.node.seq, 0) + 1
                    stack.append(t.node)
        buffers: dict[int, Storage] = {loss.node.seq: self._alloc_storage(F32)}
        param_grad: dict[int, Storage] = {}
        ready = [-loss.node.seq]
        while ready:
            node = nodes[-heapq.heappop(ready)]
            incoming = buffers.pop(node.seq)
            produced = []
            for t, nbytes in node.grads:
                if nbytes == PASS:
                    incoming.refs += 1
                    produced.append((t, incoming))
                else:
                    produced.append((t, self._alloc_storage(nbytes)))
            if node.backward_scratch:
                self.ephemeral(node.backward_scratch)
            self._release(incoming)
            for storage in node.saved:
                self._release(storage)
            for t, grad in produced:
                if t.node is None:  # a parameter: AccumulateGrad keeps (or adds into) .grad
                    key = id(t.storage)
                    if key in param_grad:
                        self._release(grad)
                    else:
                        param_grad[key] = grad
                    continue
                seq = t.node.seq
                if seq in buffers:  # used twice: accumulated in place
                    self._release(grad)
                else:
                    buffers[seq] = grad
                deps[seq] -= 1
                if deps[seq] == 0:
                    heapq.heappush(ready, -seq)
        self.param_grads = list(param_grad.values())

    def zero_grad(self) -> None:
        for storage in self.param_grads:
            self._release(storage)
        self.param_grads = []


# -- PyTorch / PyG operators as cost functions ---------------------------------------------

def linear(sim: Simulator, x: Tensor, n: int, fin: int, fout: int, weight: Tensor, bias: Tensor | None) -> Tensor:
    """``F.linear``: addmm with a bias, mm without. Saves the input for the weight
    gradient; the weight (persistent anyway) for the input gradient."""
    out = sim.new(n * fout * F32)
    if bias is not None:
        grads = [(x, n * fin * F32), (weight, fout * fin * F32), (bias, fout * F32)]
    else:
        grads = [(weight, fout * fin * F32), (x, n * fin * F32)]
    sim.attach(out, grads, saved=[x, weight])
    return out


def relu(sim: Simulator, x: Tensor, size: int) -> Tensor:
    out = sim.new(size)
    sim.attach(out, [(x, size)], save_output=True)
    return out


def gather(sim: Simulator, x: Tensor, index: Tensor, rows: int, width: int, num_nodes: int) -> Tensor:
    """``x.index_select(0, index)``: one row per edge. Backward scatters into zeros."""
    out = sim.new(rows * width * F32)
    sim.attach(out, [(x, num_nodes * width * F32)], saved=[index])
    return out


def scatter_sum(sim: Simulator, src: Tensor, index: Tensor, edges: int, width: int, num_nodes: int) -> Tensor:
    """PyG's ``scatter(reduce='sum')``: ``new_zeros`` + ``scatter_add_``; backward gathers."""
    out = sim.new(num_nodes * width * F32)
    sim.attach(out, [(src, edges * width * F32)], saved=[index])
    return out


def scatter_mean(sim: Simulator, src: Tensor, index: Tensor, edges: int, width: int, num_nodes: int) -> Tensor:
    """PyG's ``scatter(reduce='mean')``: a degree count (scattered ones, clamped),
    the sum, and a division that keeps the count for backward."""
    count = sim.new(num_nodes * F32)
    sim.ephemeral(edges * F32)
    clamped = sim.new(num_nodes * F32)
    sim.drop(count)
    total = scatter_sum(sim, src, index, edges, width, num_nodes)
    out = sim.op(num_nodes * width * F32, [(total, num_nodes * width * F32)], saved=[clamped])
    sim.drop(clamped, total)
    return out


def cross_entropy(sim: Simulator, logits: Tensor, n: int, classes: int) -> Tensor:
    log_probs = sim.op(n * classes * F32, [(logits, n * classes * F32)], save_output=True)
    loss = sim.op(F32, [(log_probs, n * classes * F32)])
    sim.ephemeral(F32)  # total_weight
    sim.drop(log_probs)
    return loss


# -- the models as programs ------------------------------------------------------------------

@dataclass(frozen=True)
class TaskShape:
    config: ModelConfig
    nodes: int
    edges: int
    training: bool


def estimate_peak_bytes(shape: TaskShape) -> int:
    """Estimated peak bytes of one task: its device copy of the graph, its model,
    and one training epoch (forward, loss, backward, step) or one inference pass."""
    cfg, n, e = shape.config, shape.nodes, shape.edges
    sim = Simulator(grad_enabled=shape.training)
    x = sim.new(n * cfg.in_dim * F32)
    edge_index = sim.new(2 * e * I64)
    labels = sim.new(n * I64)
    params = [_layer_params(sim, cfg.model, a, b) for a, b in zip(cfg.dims[:-1], cfg.dims[1:])]
    if shape.training:
        sim.zero_grad()
        logits = _forward(sim, cfg, params, x, edge_index, n, e)
        loss = cross_entropy(sim, logits, n, cfg.out_dim)
        sim.backward(loss)
        sim.drop(loss, logits)
        sim.zero_grad()  # the next epoch starts by dropping the gradients
    else:
        logits = _forward(sim, cfg, params, x, edge_index, n, e)
        sim.ephemeral(n * I64)  # argmax: the predicted classes
        sim.drop(logits)
    sim.drop(labels)
    return sim.peak


def _layer_params(sim: Simulator, model: str, fin: int, fout: int) -> dict[str, Tensor]:
    if model == "GCN":
        return {"w": sim.param(fout * fin * F32), "b": sim.param(fout * F32)}
    if model == "SAGE":
        return {"w_l": sim.param(fout * fin * F32), "b_l": sim.param(fout * F32), "w_r": sim.param(fout * fin * F32)}
    if model == "GAT":
        return {"w": sim.param(fout * fin * F32), "att_src": sim.param(fout * F32),
                "att_dst": sim.param(fout * F32), "b": sim.param(fout * F32)}
    if model == "GIN":
        return {"w1": sim.param(fout * fin * F32), "b1": sim.param(fout * F32),
                "w2": sim.param(fout * fout * F32), "b2": sim.param(fout * F32), "eps": sim.new(F32)}
    raise ValueError(f"unknown model {model!r}")


def _forward(sim, cfg: ModelConfig, params, x, edge_index, n: int, e: int) -> Tensor:
    edge_weight = None
    if cfg.model == "GCN":
        edge_index, edge_weight = _gcn_norm(sim, edge_index, n, e)
        e = e + n
    elif cfg.model == "GAT":
        edge_index = _add_self_loops(sim, edge_index, n, e)
        e = e + n
    owned_edges = cfg.model in ("GCN", "GAT")  # built in forward, dropped when it returns
    dims = cfg.dims
    last = len(params) - 1
    h = sim.view(x)
    layer_edges = None
    for i, p in enumerate(params):
        fin, fout = dims[i], dims[i + 1]
        if cfg.sampling_ratio < 1.0:
            k = sampled_edges(e, cfg.sampling_ratio)
            keep = sim.new(k * I64)
            new_edges = sim.new(2 * k * I64)
            sim.drop(keep)
        else:
            k = e
            new_edges = sim.view(edge_index)
        sim.drop(layer_edges)
        layer_edges = new_edges
        conv = {"GCN": _gcn_layer, "SAGE": _sage_layer, "GAT": _gat_layer, "GIN": _gin_layer}[cfg.model]
        out = conv(sim, p, h, layer_edges, edge_weight, n, k, fin, fout)
        sim.drop(h)
        h = out
        if i < last:
            out = relu(sim, h, n * fout * F32)
            sim.drop(h)
            h = out
    sim.drop(layer_edges, edge_weight)
    if owned_edges:
        sim.drop(edge_index)
    return h


def _add_self_loops(sim, edge_index, n, e) -> Tensor:
    """``add_self_loops``: a looped ``arange`` index, concatenated to the edges."""
    arange = sim.new(n * I64)
    loops = sim.new(2 * n * I64)
    sim.drop(arange)
    out = sim.new(2 * (e + n) * I64)
    sim.drop(loops)
    return out


def _gcn_norm(sim, edge_index, n, e) -> tuple[Tensor, Tensor]:
    """``gcn_norm`` with ``add_remaining_self_loops`` (the input has none to remove)."""
    mask = sim.new(e * BOOL)
    arange = sim.new(n * I64)
    loops = sim.new(2 * n * I64)
    sim.drop(arange)
    kept_positions = sim.new(e * I64)
    kept = sim.new(2 * e * I64)
    sim.drop(kept_positions)
    looped = sim.new(2 * (e + n) * I64)
    sim.drop(kept, mask, loops)
    e1 = e + n
    ones = sim.new(e1 * F32)
    deg = sim.new(n * F32)
    sim.ephemeral(n * BOOL)  # deg_inv_sqrt == inf
    gathered = sim.new(e1 * F32)
    left = sim.new(e1 * F32)
    sim.drop(gathered)
    gathered = sim.new(e1 * F32)
    weight = sim.new(e1 * F32)
    sim.drop(gathered, left, ones, deg)
    return looped, weight


def _gcn_layer(sim, p, x, edges, edge_weight, n, e, fin, fout) -> Tensor:
    h = linear(sim, x, n, fin, fout, p["w"], None)
    x_j = gather(sim, h, edges, e, fout, n)
    msg = sim.op(e * fout * F32, [(x_j, e * fout * F32)], saved=[edge_weight])
    agg = scatter_sum(sim, msg, edges, e, fout, n)
    sim.drop(x_j, msg)
    out = sim.op(n * fout * F32, [(agg, PASS), (p["b"], fout * F32)])
    sim.drop(agg, h)
    return out


def _sage_layer(sim, p, x, edges, edge_weight, n, e, fin, fout) -> Tensor:
    x_j = gather(sim, x, edges, e, fin, n)
    agg = scatter_mean(sim, x_j, edges, e, fin, n)
    sim.drop(x_j)
    left = linear(sim, agg, n, fin, fout, p["w_l"], p["b_l"])
    sim.drop(agg)
    right = linear(sim, x, n, fin, fout, p["w_r"], None)
    out = sim.op(n * fout * F32, [(left, PASS), (right, PASS)])
    sim.drop(left, right)
    return out


def _gat_layer(sim, p, x, edges, edge_weight, n, e, fin, fout) -> Tensor:
    h = linear(sim, x, n, fin, fout, p["w"], None)
    alphas = []
    for att in (p["att_src"], p["att_dst"]):  # (x * att).sum(-1), source then target
        # backward scratch: the gradient of ``att`` before its reduction
        prod = sim.op(n * fout * F32, [(h, n * fout * F32), (att, fout * F32)], saved=[h, att],
                      backward_scratch=n * fout * F32)
        alphas.append(sim.op(n * F32, [(prod, n * fout * F32)]))
        sim.drop(prod)
    a_src, a_dst = alphas
    # edge_updater: alpha_j + alpha_i, leaky_relu, softmax over each target's edges
    alpha_j = gather(sim, a_src, edges, e, 1, n)
    alpha_i = gather(sim, a_dst, edges, e, 1, n)
    summed = sim.op(e * F32, [(alpha_j, PASS), (alpha_i, PASS)])
    leaky = sim.op(e * F32, [(summed, e * F32)], saved=[summed])
    seg_max = sim.new(n * F32)
    max_j = sim.new(e * F32)
    shifted = sim.op(e * F32, [(leaky, PASS)])
    sim.drop(max_j)
    expd = sim.op(e * F32, [(shifted, e * F32)], save_output=True)
    sim.drop(shifted)
    seg_sum = scatter_sum(sim, expd, edges, e, 1, n)
    sim.ephemeral(F32, F32)  # the 1e-16 scalar
    seg_sum_eps = sim.op(n * F32, [(seg_sum, PASS)])
    sim.drop(seg_sum)
    sum_j = gather(sim, seg_sum_eps, edges, e, 1, n)
    sim.drop(seg_sum_eps)
    # backward scratch: -a/b^2 is worked out in three steps
    alpha = sim.op(e * F32, [(expd, e * F32), (sum_j, e * F32)], saved=[expd, sum_j],
                   backward_scratch=3 * e * F32)
    sim.drop(seg_max, alpha_j, alpha_i, summed, leaky, expd, sum_j)
    # propagate: alpha_ij * x_j, summed per target
    x_j = gather(sim, h, edges, e, fout, n)
    # backward scratch: the gradient of alpha before its reduction over features
    msg = sim.op(e * fout * F32, [(x_j, e * fout * F32), (alpha, e * F32)], saved=[x_j, alpha],
                 backward_scratch=e * fout * F32)
    agg = scatter_sum(sim, msg, edges, e, fout, n)
    sim.drop(x_j, msg, alpha)
    out = sim.op(n * fout * F32, [(agg, PASS), (p["b"], fout * F32)])
    sim.drop(agg, h, a_src, a_dst)
    return out


def _gin_layer(sim, p, x, edges, edge_weight, n, e, fin, fout) -> Tensor:
    x_j = gather(sim, x, edges, e, fin, n)
    agg = scatter_sum(sim, x_j, edges, e, fin, n)
    sim.drop(x_j)
    sim.ephemeral(F32, F32)  # 1 + eps
    root = sim.op(n * fin * F32, [(x, n * fin * F32)])
    combined = sim.op(n * fin * F32, [(agg, PASS), (root, PASS)])
    sim.drop(root, agg)
    hidden = linear(sim, combined, n, fin, fout, p["w1"], p["b1"])
    sim.drop(combined)
    act = relu(sim, hidden, n * fout * F32)
    sim.drop(hidden)
    out = linear(sim, act, n, fout, fout, p["w2"], p["b2"])
    sim.drop(act)
    return out


def relative_error(estimated: int, measured: int) -> float:
    return abs(estimated - measured) / measured if measured else math.inf

"""Peak-memory estimator (PMC): traverse a task's computation graph with per-operator
memory cost functions and tensor liveness, as in CoGNN §III-C / GNNSched §3.3.

Every operator of the forward pass is listed in execution (topological) order by
a *program* per model and variant (``models.py``), with the tensors it allocates
(CoGNN Table II categories: weight, output, gradient, ephemeral) sized from the
graph (nodes N, edges E, feature widths, GAT's heads). The cost functions follow
what PyTorch and PyG really allocate, not the paper's idealised table:

- *Graph*: the task's device copy of features, edge_index and labels.
- *Weights*: every parameter and buffer (BatchNorm's running statistics and
  batch counter, GIN's eps).
- *Message passing*: PyG gathers one message per edge (``index_select``) and
  scatters it back (``new_zeros`` + ``scatter_add_``), so edge-sized tensors exist.
  The artifact's GCN normalises and its GAT adds self-loops in every layer, so
  each layer's looped edge_index (and GCN's edge weights) is a new tensor that
  autograd keeps until backward.
- *GAT attention*: the coefficients are E x heads at every step of the edge
  softmax (gathered scores, their sum, leaky ReLU, shifted, exp, gathered sums,
  quotient), and each message is E x heads x channels.
- *Dropout* (GAT's attention, training only): a new output plus its mask, kept
  for backward: ``native_dropout``'s bool mask (one byte per element) on CUDA, a
  float32 noise tensor on CPU.
- *BatchNorm* (training): a normalised N x C output, the batch mean and inverse
  std (C each) kept for backward with its input, per-channel scratch. Eval: the
  output only.
- *Saved tensors and gradients*: autograd keeps exactly the tensors each
  operator saves; backward allocates each input gradient, frees the incoming
  one, and adds gradients of tensors used twice in place; the seed gradient
  lives until ``backward()`` returns.
- *Optimiser*: Adam (artifact) allocates exp_avg and exp_avg_sq per parameter
  at its first step, and a step counter that is device memory only on CPU. Each
  step divides by ``sqrt(exp_avg_sq)``: parameter by parameter on CPU (two
  temporaries, the previous parameter's quotient still alive), for all
  parameters at once on CUDA (foreach). The artifact zeroes the gradients after
  the forward pass, so a step's gradients live through the next forward pass.
  trainbed-v1's SGD steps in place.

``Simulator`` is a small symbolic autograd: a tensor's storage lives while the
program holds it (Python liveness, written out where the code drops a name) or
while a pending backward node saved it. Backward runs nodes in autograd's order
(highest creation sequence among the ready ones), allocates each gradient,
frees the node's incoming gradient and saved tensors, and accumulates gradients
of tensors used twice in place. Each allocation is rounded up to the allocator's
512 bytes. Artifact training runs two epochs (the first allocates Adam's state,
every later one repeats the second). The peak of live bytes is the estimate.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

from hosts.colocation.memory import round_up
from hosts.colocation.models import ARTIFACT, GAT_HEADS, ModelConfig, artifact_conv_dims, sampled_edges

F32, F64, I64, BOOL = 4, 8, 8, 1
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
        self.params: list[Tensor] = []  # in the order the optimiser visits them
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
        t = Tensor(self._alloc_storage(nbytes), requires_grad=self.grad_enabled)
        self.params.append(t)
        return t

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
        seed = self._alloc_storage(F32)  # ones_like(loss), held by ``backward()`` until it returns
        seed.refs += 1
        buffers: dict[int, Storage] = {loss.node.seq: seed}
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
        self._release(seed)
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


def dropout(sim: Simulator, x: Tensor, elements: int, device_type: str) -> Tensor:
    """Training-mode ``F.dropout``, its mask kept for backward. CUDA: ``native_dropout``
    (output and a bool mask). CPU: a float32 noise tensor, scaled in place by a
    scalar, multiplied in."""
    if device_type == "cuda":
        out = sim.new(elements * F32)
        mask = sim.new(elements * BOOL)
        sim.attach(out, [(x, elements * F32)], saved=[mask])
        sim.drop(mask)
        return out
    noise = sim.new(elements * F32)
    sim.ephemeral(F32, F32)  # the 1 / (1 - p) scalar
    out = sim.op(elements * F32, [(x, elements * F32)], saved=[noise])
    sim.drop(noise)
    return out


def batch_norm(sim: Simulator, x: Tensor, p: dict[str, Tensor], n: int, c: int) -> Tensor:
    """``BatchNorm1d``. Training: the batch mean and inverse std (C each) are kept
    for backward with the input, beside per-channel sums (two float, one double);
    backward needs an N x C temporary. Eval: running statistics, two C-sized temporaries."""
    out = sim.new(n * c * F32)
    if not sim.grad_enabled:
        sim.ephemeral(c * F32, c * F32)
        return out
    mean, invstd = sim.new(c * F32), sim.new(c * F32)
    sim.ephemeral(c * F32, c * F32, c * F64)
    sim.attach(out, [(x, n * c * F32), (p["w"], c * F32), (p["b"], c * F32)], saved=[x, mean, invstd],
               backward_scratch=n * c * F32)
    sim.drop(mean, invstd)
    return out


def log_softmax(sim: Simulator, x: Tensor, n: int, classes: int) -> Tensor:
    return sim.op(n * classes * F32, [(x, n * classes * F32)], save_output=True)


def nll_loss(sim: Simulator, log_probs: Tensor, n: int, classes: int) -> Tensor:
    """``F.nll_loss`` (also the second half of ``F.cross_entropy``): the loss and the
    total weight, both scalars; backward keeps the weight."""
    loss = sim.new(F32)
    total_weight = sim.new(F32)
    sim.attach(loss, [(log_probs, n * classes * F32)], saved=[log_probs, total_weight])
    sim.drop(total_weight)
    return loss


def adam_step(sim: Simulator, first: bool, device_type: str) -> None:
    """``torch.optim.Adam.step`` (defaults: no AMSGrad, not fused). The first step
    allocates each parameter's state, kept for the task's life; every step computes
    ``sqrt(exp_avg_sq) / bias`` out of place (lerp_, mul_, addcmul_, add_ and
    addcdiv_ work in place)."""
    if first:
        for p in sim.params:
            if device_type == "cpu":
                sim.new(F32)  # the step counter: a CPU scalar unless capturable or fused
            sim.new(p.storage.nbytes)  # exp_avg
            sim.new(p.storage.nbytes)  # exp_avg_sq
    if device_type == "cuda":  # foreach: the square roots of all parameters at once
        sim.ephemeral(*(p.storage.nbytes for p in sim.params))
        return
    previous = None  # the last parameter's quotient lives until the next one replaces it
    for p in sim.params:
        root = sim.new(p.storage.nbytes)
        scalars = (sim.new(F32), sim.new(F32))  # the bias correction, wrapped and copied
        quotient = sim.new(p.storage.nbytes)
        sim.drop(*scalars, root, previous)
        previous = quotient
    sim.drop(previous)


# -- the models as programs ------------------------------------------------------------------

@dataclass(frozen=True)
class TaskShape:
    config: ModelConfig
    nodes: int
    edges: int
    training: bool
    device_type: str  # "cpu" or "cuda": dropout masks and Adam's step differ

    def __post_init__(self):
        if self.device_type not in ("cpu", "cuda"):
            raise ValueError(f"device type must be cpu or cuda, got {self.device_type!r}")


def estimate_peak_bytes(shape: TaskShape) -> int:
    """Estimated peak bytes of one task: its device copy of the graph, its model,
    and training (forward, loss, backward, step; two epochs) or one inference pass."""
    cfg, n, e = shape.config, shape.nodes, shape.edges
    sim = Simulator(grad_enabled=shape.training)
    x = sim.new(n * cfg.in_dim * F32)
    edge_index = sim.new(2 * e * I64)
    labels = sim.new(n * I64)
    if cfg.variant == ARTIFACT:
        model = _artifact_params(sim, cfg)

        def forward() -> Tensor:
            return _artifact_forward(sim, cfg, model, x, edge_index, n, e, shape.device_type)
    else:
        params = [_conv_params(sim, cfg.model, a, b) for a, b in zip(cfg.dims[:-1], cfg.dims[1:])]

        def forward() -> Tensor:
            return _v1_forward(sim, cfg, params, x, edge_index, n, e)
    if not shape.training:
        out = forward()
        sim.ephemeral(n * I64)  # argmax: the predicted classes
        sim.drop(out)
    elif cfg.variant == ARTIFACT:
        for epoch in range(2):  # the first step allocates Adam's state; later epochs repeat the second
            log_probs = forward()
            loss = nll_loss(sim, log_probs, n, cfg.out_dim)
            sim.drop(log_probs)
            sim.zero_grad()  # the artifact's order: after the forward pass
            sim.backward(loss)
            adam_step(sim, first=epoch == 0, device_type=shape.device_type)
            sim.drop(loss)
    else:
        logits = forward()
        log_probs = log_softmax(sim, logits, n, cfg.out_dim)
        loss = nll_loss(sim, log_probs, n, cfg.out_dim)
        sim.drop(log_probs)
        sim.backward(loss)
        sim.drop(loss, logits)
        sim.zero_grad()  # the next epoch starts by dropping the gradients
    sim.drop(labels)
    return sim.peak


def _artifact_params(sim: Simulator, cfg: ModelConfig) -> dict[str, list[dict[str, Tensor]]]:
    """Parameters and buffers in ``model.parameters()`` order (a module's own first)."""
    dims = artifact_conv_dims(cfg)
    model = {"convs": [_artifact_conv_params(sim, cfg.model, a, b) for a, b in dims]}
    if cfg.model == "GIN":
        h = cfg.hidden
        model["norms"] = [{"w": sim.param(h * F32), "b": sim.param(h * F32), "running_mean": sim.new(h * F32),
                           "running_var": sim.new(h * F32), "batches": sim.new(I64)} for _ in dims]
        model["head"] = [{"w": sim.param(h * h * F32), "b": sim.param(h * F32)},
                         {"w": sim.param(cfg.out_dim * h * F32), "b": sim.param(cfg.out_dim * F32)}]
    return model


def _artifact_conv_params(sim: Simulator, model: str, fin: int, fout: int) -> dict[str, Tensor]:
    if model == "GCN":
        b = sim.param(fout * F32)
        return {"b": b, "w": sim.param(fout * fin * F32)}
    if model == "GAT":
        att_src, att_dst, b = sim.param(fout * F32), sim.param(fout * F32), sim.param(fout * F32)
        return {"att_src": att_src, "att_dst": att_dst, "b": b, "w": sim.param(fout * fin * F32)}
    return _conv_params(sim, model, fin, fout)


def _artifact_forward(sim, cfg: ModelConfig, model, x, edge_index, n: int, e: int, device_type: str) -> Tensor:
    h = sim.view(x)
    for i, ((fin, fout), p) in enumerate(zip(artifact_conv_dims(cfg), model["convs"])):
        if cfg.model == "GCN":
            edges, weight = _gcn_norm(sim, n, e)
            out = _gcn_layer(sim, p, h, edges, weight, n, e + n, fin, fout)
            sim.drop(edges, weight)
        elif cfg.model == "GAT":
            heads = GAT_HEADS if i < len(model["convs"]) - 1 else 1
            out = _gat_layer(sim, p, h, edge_index, n, e, fin, heads, fout // heads, concat=heads > 1,
                             own_self_loops=True, device_type=device_type if sim.grad_enabled else None)
        elif cfg.model == "SAGE":
            out = _sage_layer(sim, p, h, edge_index, None, n, e, fin, fout)
        else:
            out = _gin_layer(sim, p, h, edge_index, None, n, e, fin, fout)
        if cfg.model != "GAT":  # the artifact's GAT stacks its layers without an activation
            activated = relu(sim, out, n * fout * F32)
            sim.drop(out)
            out = activated
        sim.drop(h)  # ``x = F.relu(conv(x))``: the input lives until the assignment
        h = out
        if cfg.model == "GIN":
            out = batch_norm(sim, h, model["norms"][i], n, fout)
            sim.drop(h)
            h = out
    if cfg.model == "GIN":
        fc1, fc2 = model["head"]
        hidden = linear(sim, h, n, cfg.hidden, cfg.hidden, fc1["w"], fc1["b"])
        act = relu(sim, hidden, n * cfg.hidden * F32)
        sim.drop(hidden, h)
        h = linear(sim, act, n, cfg.hidden, cfg.out_dim, fc2["w"], fc2["b"])
        sim.drop(act)
    out = log_softmax(sim, h, n, cfg.out_dim)
    sim.drop(h)
    return out


def _conv_params(sim: Simulator, model: str, fin: int, fout: int) -> dict[str, Tensor]:
    """A conv's parameters (and GIN's eps) in trainbed-v1's order; SAGE's and GIN's are the artifact's too."""
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


def _v1_forward(sim, cfg: ModelConfig, params, x, edge_index, n: int, e: int) -> Tensor:
    edge_weight = None
    if cfg.model == "GCN":
        edge_index, edge_weight = _gcn_norm(sim, n, e)
        e = e + n
    elif cfg.model == "GAT":
        edge_index = _add_self_loops(sim, None, n, e)
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
        if cfg.model == "GAT":
            out = _gat_layer(sim, p, h, layer_edges, n, k, fin, 1, fout, concat=True, own_self_loops=False,
                             device_type=None)
        else:
            conv = {"GCN": _gcn_layer, "SAGE": _sage_layer, "GIN": _gin_layer}[cfg.model]
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


def _add_self_loops(sim, edges: Tensor | None, n: int, e: int) -> Tensor:
    """``add_self_loops``: a looped ``arange`` (``repeat`` makes three scalar
    temporaries), concatenated to ``edges``, which the caller then drops."""
    arange = sim.new(n * I64)
    loops = sim.new(2 * n * I64)
    sim.ephemeral(F32, F32, F32)
    sim.drop(arange)
    out = sim.new(2 * (e + n) * I64)
    sim.drop(loops, edges)
    return out


def _remove_and_add_self_loops(sim, n: int, e: int) -> Tensor:
    """GATConv's own self-loops: ``remove_self_loops`` (a mask, its ``nonzero``
    positions, the kept edges; the input has no loops, so all E) then ``add_self_loops``."""
    mask = sim.new(e * BOOL)
    positions = sim.new(e * I64)
    kept = sim.new(2 * e * I64)
    sim.drop(positions, mask)
    return _add_self_loops(sim, kept, n, e)


def _gcn_norm(sim, n: int, e: int) -> tuple[Tensor, Tensor]:
    """``gcn_norm`` with ``add_remaining_self_loops`` (the input has none to remove)."""
    mask = sim.new(e * BOOL)
    arange = sim.new(n * I64)
    loops = sim.new(2 * n * I64)
    sim.ephemeral(F32, F32, F32)  # repeat's scalars
    sim.drop(arange)
    kept_positions = sim.new(e * I64)
    kept = sim.new(2 * e * I64)
    sim.drop(kept_positions)
    looped = sim.new(2 * (e + n) * I64)
    sim.drop(kept, mask, loops)
    e1 = e + n
    ones = sim.new(e1 * F32)
    deg = sim.new(n * F32)
    sim.ephemeral(F32, F32, n * BOOL)  # deg_inv_sqrt == inf: the scalar, its copy, the mask
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


def _gat_layer(sim, p, x, edges, n, e, fin, heads: int, channels: int, concat: bool, own_self_loops: bool,
               device_type: str | None) -> Tensor:
    """GATConv over ``e`` edges with ``heads`` x ``channels``. ``own_self_loops``: the
    layer replaces the edges' self-loops itself (N more edges); ``device_type`` set:
    training-mode attention dropout on that device."""
    width = heads * channels
    h = linear(sim, x, n, fin, width, p["w"], None)
    alphas = []
    for att in (p["att_src"], p["att_dst"]):  # (x * att).sum(-1), source then target
        # backward scratch: the gradient of ``att`` before its reduction
        prod = sim.op(n * width * F32, [(h, n * width * F32), (att, width * F32)], saved=[h, att],
                      backward_scratch=n * width * F32)
        alphas.append(sim.op(n * heads * F32, [(prod, n * width * F32)]))
        sim.drop(prod)
    a_src, a_dst = alphas
    if own_self_loops:
        edges = _remove_and_add_self_loops(sim, n, e)
        e += n
    # edge_updater: alpha_j + alpha_i, leaky_relu, softmax over each target's edges
    scores = e * heads * F32
    alpha_j = gather(sim, a_src, edges, e, heads, n)
    alpha_i = gather(sim, a_dst, edges, e, heads, n)
    summed = sim.op(scores, [(alpha_j, PASS), (alpha_i, PASS)])
    leaky = sim.op(scores, [(summed, scores)], saved=[summed])
    seg_max = sim.new(n * heads * F32)
    max_j = sim.new(scores)
    shifted = sim.op(scores, [(leaky, PASS)])
    sim.drop(max_j)
    expd = sim.op(scores, [(shifted, scores)], save_output=True)
    sim.drop(shifted)
    seg_sum = scatter_sum(sim, expd, edges, e, heads, n)
    sim.ephemeral(F32, F32)  # the 1e-16 scalar
    seg_sum_eps = sim.op(n * heads * F32, [(seg_sum, PASS)])
    sim.drop(seg_sum)
    sum_j = gather(sim, seg_sum_eps, edges, e, heads, n)
    sim.drop(seg_sum_eps)
    # backward scratch: -a/b^2 is worked out in three steps
    alpha = sim.op(scores, [(expd, scores), (sum_j, scores)], saved=[expd, sum_j], backward_scratch=3 * scores)
    sim.drop(seg_max, leaky, summed, expd, sum_j)
    if device_type is not None:
        kept = dropout(sim, alpha, e * heads, device_type)
        sim.drop(alpha)
        alpha = kept
    sim.drop(alpha_j, alpha_i)  # held by the edge updater's arguments until it returns
    # propagate: alpha_ij * x_j, summed per target
    x_j = gather(sim, h, edges, e, width, n)
    # backward scratch: the gradient of alpha before its reduction over channels
    msg = sim.op(e * width * F32, [(x_j, e * width * F32), (alpha, scores)], saved=[x_j, alpha],
                 backward_scratch=e * width * F32)
    agg = scatter_sum(sim, msg, edges, e, width, n)
    sim.drop(x_j, msg, alpha)
    out_width = width
    if not concat:  # the heads' mean
        out_width = channels
        mean = sim.op(n * out_width * F32, [(agg, n * width * F32)])
        sim.ephemeral(F32, F32)  # the divisor
        sim.drop(agg)
        agg = mean
    out = sim.op(n * out_width * F32, [(agg, PASS), (p["b"], out_width * F32)])
    sim.drop(agg, h, a_src, a_dst)
    if own_self_loops:
        sim.drop(edges)
    return out


def _gin_layer(sim, p, x, edges, edge_weight, n, e, fin, fout) -> Tensor:
    x_j = gather(sim, x, edges, e, fin, n)
    agg = scatter_sum(sim, x_j, edges, e, fin, n)
    sim.drop(x_j)
    scalar = (sim.new(F32), sim.new(F32))  # the 1, wrapped and copied
    one_plus_eps = sim.new(F32)
    sim.drop(*scalar)
    root = sim.op(n * fin * F32, [(x, n * fin * F32)], saved=[one_plus_eps])
    sim.drop(one_plus_eps)
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

"""The Grouper cojob workload as pure data (Grouper, TNSM 2020, §II-B and §V).

A cojob is a hyperparameter search: n jobs (configurations) of one model start
together; after each stage the worse half of the survivors, by accuracy at that
point, is killed, and the last survivor runs to completion (successive halving).
Each job trains with parameter servers: per iteration every worker pushes its
gradients to every PS, and after all pushes every worker pulls the parameters back.

Nothing here touches the network or starts a process: every function is
deterministic in its arguments and seed, and every record the run directory keeps
round-trips through ``to_dict``/``from_dict``.

Conventions every consumer relies on:

- Stage indices are 0-based ("the third stage" is stage 2). A job with
  ``max_stage = m`` runs stages ``0..m-1``; it is killed after stage ``m-1``, or
  finishes there when ``m`` is the number of stages.
- Iterations are counted in the plan's own units: a plan built from scaled stage
  lengths has its curves, T90s and remaining iterations in those scaled units.
- MB is 1e6 bytes and Mbit/s is 1e6 bit/s (the trace's 1 Gbit/s = 125 MB/s).
- A job's key is ``c<cojob_id>j<index>``. A host's NIC has two ports,
  ``<host>/out`` (egress) and ``<host>/in`` (ingress); a transfer between two tasks
  on one host crosses neither.
- ``Arrival.at_s`` and the compute seconds of a ``ModelProfile`` are testbed
  seconds (1 Gbit/s); ``Scaling`` turns them into seconds of the emulated run.
"""
from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Sequence

from experiments.errors import SpecError
from experiments.validation import ROOT, at, integer, items, mapping, number, sequence, shown_path, string
from topologies.units import transfer_s

MB = 1_000_000
REFERENCE_MBPS = 1000.0  # the testbed's 1 GbE
TESTBED_STAGES = (500, 1000, 2000, 4000)
TESTBED_JOBS = 8
TESTBED_WORKERS = 2
TESTBED_PS = 2
PUSH, PULL = "push", "pull"
T90_FRACTION = 0.9
TRACE_FIELD = "workload.trace"  # the spec field naming a trace file: its unreadable file's errors name it

# Compute seconds per iteration. The paper gives none (the authors' simulator trace
# uses 0); its one statement (§V-C) is that "the computation time for small models is
# as large as communication time". So every model gets the smallest model's
# (DeepSpeech2's) communication time per iteration alone on the testbed: 2 workers
# and 2 PSs on four hosts, push then pull, each phase moving 160 MB through each
# worker's (then each PS's) 1 Gbit/s NIC: 2 * 160 MB * 8 / 1 Gbit/s = 2.56 s.
# DeepSpeech2's comm/comp ratio is then 1, and larger models are more
# communication-bound (ratio = size / 160 MB: 1.44, 1.56, 3.63); the paper finds
# Grouper's gains insensitive to the ratio above 0.5 (Fig. 15).
TESTBED_COMPUTE_S = transfer_s(2 * 160 * MB, REFERENCE_MBPS)

# Learning curves: the paper reports none (its traces' curves are not public), so a
# configuration's converged accuracy and time constant are drawn from plausible
# ranges. tau is a fraction of the cojob's total iterations so that a plan's kills
# do not depend on how far its stages were scaled down; at most 0.4 keeps even the
# slowest configuration near convergence (92%) at the end, as §V-B says the stages
# suffice "to achieve relatively high accuracy".
A_FINAL_RANGE = (0.6, 0.95)
TAU_FRACTION_RANGE = (0.02, 0.4)  # drawn log-uniformly


@dataclass(frozen=True)
class ModelProfile:
    """A model as the network sees it: bytes moved per iteration (its size) and
    compute seconds per iteration on the testbed."""

    name: str
    size_mb: float
    compute_s: float

    def __post_init__(self):
        if not self.size_mb > 0:
            raise SpecError(f"models.{self.name}.size_mb", f"must be > 0, got {self.size_mb}")
        if not self.compute_s >= 0:
            raise SpecError(f"models.{self.name}.compute_s", f"must be >= 0, got {self.compute_s}")

    def to_dict(self) -> dict:
        return {"name": self.name, "size_mb": self.size_mb, "compute_s": self.compute_s}

    @classmethod
    def from_dict(cls, data: Mapping) -> ModelProfile:
        return cls(data["name"], data["size_mb"], data["compute_s"])


# Table III of the paper.
MODELS = {
    "deepspeech2": ModelProfile("deepspeech2", 160.0, TESTBED_COMPUTE_S),
    "resnet152": ModelProfile("resnet152", 230.0, TESTBED_COMPUTE_S),
    "alexnet": ModelProfile("alexnet", 250.0, TESTBED_COMPUTE_S),
    "vgg19": ModelProfile("vgg19", 580.0, TESTBED_COMPUTE_S),
}


def scaled_stages(stage_iterations: Sequence[int], iterations_scale: float) -> tuple[int, ...]:
    """Stage lengths of a run: ``iterations_scale`` x the testbed's, at least one iteration each."""
    return tuple(max(1, round(n * iterations_scale)) for n in stage_iterations)


@dataclass(frozen=True)
class Scaling:
    """How an emulated run shrinks the testbed workload to finish in minutes.

    Bytes are multiplied by ``bytes_scale`` and compute seconds by ``time_scale`` =
    bytes_scale * reference_mbps / link_mbps, the factor by which a scaled transfer at
    ``link_mbps`` is longer than the full one at ``reference_mbps``. So the ratio kept
    is: communication time per iteration / compute time per iteration at
    ``link_mbps`` equals that at 1 Gbit/s on the testbed. Stage lengths are multiplied
    by ``iterations_scale`` (at least one iteration per stage), and arrival times by
    time_scale * iterations_scale, which keeps the offered load: each cojob's work
    shrinks by that factor in time, and so do the gaps between arrivals.
    """

    link_mbps: float
    bytes_scale: float = 1.0
    iterations_scale: float = 1.0
    reference_mbps: float = REFERENCE_MBPS

    def __post_init__(self):
        for name in ("link_mbps", "bytes_scale", "iterations_scale", "reference_mbps"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and value > 0 and math.isfinite(value)):
                raise SpecError(f"scaling.{name}", f"must be a number > 0, got {value!r}")

    @property
    def time_scale(self) -> float:
        return self.bytes_scale * self.reference_mbps / self.link_mbps

    def arrival_s(self, testbed_s: float) -> float:
        return testbed_s * self.time_scale * self.iterations_scale

    def to_dict(self) -> dict:
        return {"link_mbps": self.link_mbps, "bytes_scale": self.bytes_scale,
                "iterations_scale": self.iterations_scale, "reference_mbps": self.reference_mbps}

    @classmethod
    def from_dict(cls, data: Mapping) -> Scaling:
        return cls(data["link_mbps"], data["bytes_scale"], data["iterations_scale"], data["reference_mbps"])


@dataclass(frozen=True)
class ScaledIteration:
    """One iteration of one job in the emulated run."""

    bytes_per_partition: int  # one worker->PS push flow (and one PS->worker pull flow)
    compute_s: float


def partition_bytes(size_mb: float, ps: int, bytes_scale: float = 1.0) -> int:
    """Bytes of one push (or pull) flow: a PS holds 1/ps of the model."""
    return max(1, round(size_mb * MB * bytes_scale / ps))


def scaled(profile: ModelProfile, scaling: Scaling, ps: int = TESTBED_PS) -> ScaledIteration:
    """``profile``'s iteration on the emulated fabric, keeping the testbed's comm/comp ratio."""
    return ScaledIteration(partition_bytes(profile.size_mb, ps, scaling.bytes_scale),
                           profile.compute_s * scaling.time_scale)


@dataclass(frozen=True)
class LearningCurve:
    """accuracy(i) = a_final * (1 - exp(-i / tau)), i in the plan's iterations."""

    a_final: float
    tau: float

    def __post_init__(self):
        if not 0 < self.a_final <= 1:
            raise SpecError("curve.a_final", f"must be in (0, 1], got {self.a_final}")
        if not self.tau > 0:
            raise SpecError("curve.tau", f"must be > 0, got {self.tau}")

    def accuracy(self, iteration: float) -> float:
        return self.a_final * (1 - math.exp(-iteration / self.tau))

    def to_dict(self) -> dict:
        return {"a_final": self.a_final, "tau": self.tau}

    @classmethod
    def from_dict(cls, data: Mapping) -> LearningCurve:
        return cls(data["a_final"], data["tau"])


def t90_iteration(curve: LearningCurve) -> int:
    """First whole iteration at which accuracy reaches 90% of the converged accuracy
    a_final, i.e. ceil(tau * ln 10); found by stepping from one below so that
    floating-point rounding of the logarithm cannot put it one off."""
    iteration = max(0, math.ceil(curve.tau * math.log(1 / (1 - T90_FRACTION))) - 1)
    while curve.accuracy(iteration) < T90_FRACTION * curve.a_final:
        iteration += 1
    return iteration


def draw_curve(rng: random.Random, total_iterations: int) -> LearningCurve:
    low, high = TAU_FRACTION_RANGE
    a_final = rng.uniform(*A_FINAL_RANGE)
    tau_fraction = math.exp(rng.uniform(math.log(low), math.log(high)))
    return LearningCurve(a_final, tau_fraction * total_iterations)


@dataclass(frozen=True)
class JobPlan:
    """One configuration of a cojob. ``max_stage`` is offline knowledge (when the job
    will be killed): an online scheduler must not read it before the kill happens."""

    cojob_id: int
    index: int
    max_stage: int
    curve: LearningCurve | None = None  # None for trace jobs: the trace records kills, not accuracies

    @property
    def key(self) -> str:
        return job_key(self.cojob_id, self.index)

    def runs(self, stage_index: int) -> bool:
        return stage_index < self.max_stage

    def to_dict(self) -> dict:
        return {"cojob_id": self.cojob_id, "index": self.index, "max_stage": self.max_stage,
                "curve": None if self.curve is None else self.curve.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping) -> JobPlan:
        curve = data.get("curve")
        return cls(data["cojob_id"], data["index"], data["max_stage"],
                   None if curve is None else LearningCurve.from_dict(curve))


def job_key(cojob_id: int, index: int) -> str:
    return f"c{cojob_id}j{index}"


@dataclass(frozen=True)
class Arrival:
    """When a cojob arrives: at a testbed time (``at_s``), or when cojob
    ``after[0]`` completes its stage ``after[1]``. Exactly one is set."""

    at_s: float | None = None
    after: tuple[int, int] | None = None

    def __post_init__(self):
        if (self.at_s is None) == (self.after is None):
            raise SpecError("arrival", "give exactly one of at_s and after")
        if self.at_s is not None and not self.at_s >= 0:
            raise SpecError("arrival.at_s", f"must be >= 0, got {self.at_s}")

    def to_dict(self) -> dict:
        return {"at_s": self.at_s} if self.after is None else {"after": list(self.after)}

    @classmethod
    def from_dict(cls, data: Mapping) -> Arrival:
        if "after" in data:
            cojob_id, stage_index = data["after"]
            return cls(after=(cojob_id, stage_index))
        return cls(at_s=data["at_s"])


@dataclass(frozen=True)
class CojobPlan:
    """A cojob with its jobs in index order (index = position) and, through each
    job's ``max_stage``, the offline knowledge of who survives every stage."""

    cojob_id: int
    profile: ModelProfile
    stage_iterations: tuple[int, ...]
    jobs: tuple[JobPlan, ...]
    arrival: Arrival

    def __post_init__(self):
        where = f"cojobs[{self.cojob_id}]"
        if not self.stage_iterations or any(n < 1 for n in self.stage_iterations):
            raise SpecError(f"{where}.stage_iterations", f"must be positive, got {list(self.stage_iterations)}")
        if not self.jobs:
            raise SpecError(f"{where}.jobs", "a cojob has at least one job")
        for position, job in enumerate(self.jobs):
            if (job.cojob_id, job.index) != (self.cojob_id, position):
                raise SpecError(f"{where}.jobs[{position}]",
                                f"is job {job.key}, expected {job_key(self.cojob_id, position)}")
            if not 1 <= job.max_stage <= len(self.stage_iterations):
                raise SpecError(f"{where}.jobs[{position}].max_stage",
                                f"must be in 1..{len(self.stage_iterations)}, got {job.max_stage}")

    @property
    def model(self) -> str:
        return self.profile.name

    def survivors(self, stage_index: int) -> tuple[int, ...]:
        """Indices of the jobs that run stage ``stage_index`` (offline knowledge)."""
        return tuple(job.index for job in self.jobs if job.runs(stage_index))

    def to_dict(self) -> dict:
        return {"cojob_id": self.cojob_id, "model": self.profile.to_dict(),
                "stage_iterations": list(self.stage_iterations), "arrival": self.arrival.to_dict(),
                "jobs": [job.to_dict() for job in self.jobs],
                "survivors": [list(self.survivors(k)) for k in range(len(self.stage_iterations))]}

    @classmethod
    def from_dict(cls, data: Mapping) -> CojobPlan:
        return cls(data["cojob_id"], ModelProfile.from_dict(data["model"]), tuple(data["stage_iterations"]),
                   tuple(JobPlan.from_dict(job) for job in data["jobs"]), Arrival.from_dict(data["arrival"]))


def plan_cojob(cojob_id: int, model: str | ModelProfile, seed: int, n_jobs: int = TESTBED_JOBS,
               stage_iterations: Sequence[int] = TESTBED_STAGES, arrival: Arrival = Arrival(at_s=0.0)) -> CojobPlan:
    """Draw ``n_jobs`` learning curves and run successive halving on them: at the end
    of stage k < last, the worse half of the survivors by accuracy at that iteration
    is killed (ties: the higher index). n_jobs must be 2^(stages-1) so that exactly
    one job is left for the last stage."""
    if isinstance(model, str) and model not in MODELS:
        raise SpecError("model", f"unknown model {model!r} (known: {', '.join(MODELS)})")
    profile = MODELS[model] if isinstance(model, str) else model
    stage_iterations = tuple(stage_iterations)
    if n_jobs != 2 ** (len(stage_iterations) - 1):
        raise SpecError("n_jobs", f"successive halving over {len(stage_iterations)} stages needs "
                                  f"{2 ** (len(stage_iterations) - 1)} jobs, got {n_jobs}")
    rng = random.Random(f"cojob:{seed}:{cojob_id}")
    curves = [draw_curve(rng, sum(stage_iterations)) for _ in range(n_jobs)]
    max_stage = [len(stage_iterations)] * n_jobs
    alive = list(range(n_jobs))
    end = 0
    for k, n in enumerate(stage_iterations[:-1]):
        end += n
        ranked = sorted(alive, key=lambda j: (-curves[j].accuracy(end), j))
        for j in ranked[len(alive) // 2:]:
            max_stage[j] = k + 1
        alive = ranked[:len(alive) // 2]
    jobs = tuple(JobPlan(cojob_id, j, max_stage[j], curves[j]) for j in range(n_jobs))
    return CojobPlan(cojob_id, profile, stage_iterations, jobs, arrival)


def testbed_cojobs(cojobs_per_model: int = 1, seed: int = 0, models: Mapping[str, ModelProfile] = MODELS,
                   n_jobs: int = TESTBED_JOBS,
                   stage_iterations: Sequence[int] = TESTBED_STAGES) -> tuple[CojobPlan, ...]:
    """The testbed's arrivals (§V-B): one cojob per model at t=0; a model's next
    cojob arrives when its previous one is down to its last job (the end of stage
    stages-2, the third of four), up to ``cojobs_per_model`` per model. Cojob ids
    are generation * len(models) + the model's position in ``models``."""
    if cojobs_per_model < 1:
        raise SpecError("cojobs_per_model", f"must be >= 1, got {cojobs_per_model}")
    next_after_stage = max(0, len(stage_iterations) - 2)
    plans = []
    for generation in range(cojobs_per_model):
        for position, profile in enumerate(models.values()):
            cojob_id = generation * len(models) + position
            previous = (cojob_id - len(models), next_after_stage)
            arrival = Arrival(at_s=0.0) if generation == 0 else Arrival(after=previous)
            plans.append(plan_cojob(cojob_id, profile, seed, n_jobs, stage_iterations, arrival))
    return tuple(plans)


def poisson_cojobs(n_cojobs: int, mean_interarrival_s: float, workload_factor: float, seed: int,
                   models: Mapping[str, ModelProfile] = MODELS, n_jobs: int = TESTBED_JOBS,
                   stage_iterations: Sequence[int] = TESTBED_STAGES) -> tuple[CojobPlan, ...]:
    """Cojobs of uniformly drawn models arriving as a Poisson process, the first at
    t=0. As in the paper's simulations (§V-C), a workload factor f divides every gap:
    f=2 is twice the load of f=1."""
    return _renewal_cojobs(n_cojobs, mean_interarrival_s, workload_factor, f"poisson:{seed}", seed,
                           lambda rng: rng.expovariate(workload_factor / mean_interarrival_s), models, n_jobs,
                           stage_iterations)


def weibull_cojobs(n_cojobs: int, mean_interarrival_s: float, workload_factor: float, shape: float, seed: int,
                   models: Mapping[str, ModelProfile] = MODELS, n_jobs: int = TESTBED_JOBS,
                   stage_iterations: Sequence[int] = TESTBED_STAGES) -> tuple[CojobPlan, ...]:
    """Cojobs of uniformly drawn models whose gaps are Weibull with ``shape`` k and mean
    ``mean_interarrival_s`` / ``workload_factor``, the first at t=0. k < 1 gives
    bursts of close arrivals and long lulls (coefficient of variation above 1), k = 1
    is a Poisson process. The gaps compress by the factor as the paper's (§V-C: "we
    generate 2.0x workload by compressing 50% of the scale of the horizontal axis")."""
    if not (shape > 0 and math.isfinite(shape)):
        raise SpecError("shape", f"must be > 0, got {shape}")
    gamma = math.gamma(1 + 1 / shape)  # the Weibull's mean is its scale x this
    return _renewal_cojobs(n_cojobs, mean_interarrival_s, workload_factor, f"weibull:{seed}", seed,
                           lambda rng: rng.weibullvariate(mean_interarrival_s / workload_factor / gamma, shape),
                           models, n_jobs, stage_iterations)


def _renewal_cojobs(n_cojobs: int, mean_interarrival_s: float, workload_factor: float, stream: str, seed: int,
                    gap: Callable[[random.Random], float], models: Mapping[str, ModelProfile],
                    n_jobs: int, stage_iterations: Sequence[int]) -> tuple[CojobPlan, ...]:
    """Cojobs whose gaps are independent draws ``gap(rng)``; each cojob's model is
    drawn after its gap, from the same seeded stream."""
    if n_cojobs < 1:
        raise SpecError("n_cojobs", f"must be >= 1, got {n_cojobs}")
    if not mean_interarrival_s > 0:
        raise SpecError("mean_interarrival_s", f"must be > 0, got {mean_interarrival_s}")
    if not workload_factor > 0:
        raise SpecError("workload_factor", f"must be > 0, got {workload_factor}")
    rng = random.Random(stream)
    profiles = list(models.values())
    plans, at_s = [], 0.0
    for cojob_id in range(n_cojobs):
        if cojob_id:
            at_s += gap(rng)
        plans.append(plan_cojob(cojob_id, rng.choice(profiles), seed, n_jobs, stage_iterations, Arrival(at_s=at_s)))
    return tuple(plans)


def at_comm_comp_ratio(profile: ModelProfile, ratio: float) -> ModelProfile:
    """``profile`` computing ``TESTBED_COMPUTE_S / ratio`` per iteration: the smallest
    model's (DeepSpeech2's) communication/computation ratio on the testbed is then
    ``ratio`` (1.0: the testbed's workload), every model computing as long as it, so a
    larger model's ratio is ``ratio`` x its size / 160 MB. The knob of the paper's
    Fig. 15, which varies the compute, not the bytes (§V-C: "the computation time for
    small models is as large as communication time"; its simulator's jobs carry a
    compute time per iteration, ``ctime``, beside fixed model sizes)."""
    if not (ratio > 0 and math.isfinite(ratio)):
        raise SpecError("comm_comp_ratio", f"must be > 0, got {ratio}")
    return replace(profile, compute_s=TESTBED_COMPUTE_S / ratio)


@dataclass(frozen=True)
class JobPlacement:
    """The hosts of one job's workers and parameter servers (a host may repeat only
    when there are fewer hosts than tasks)."""

    workers: tuple[str, ...]
    ps: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"workers": list(self.workers), "ps": list(self.ps)}

    @classmethod
    def from_dict(cls, data: Mapping) -> JobPlacement:
        return cls(tuple(data["workers"]), tuple(data["ps"]))


def place(jobs: Sequence[JobPlan], hosts: Sequence[str], racks: Mapping[str, str], workers: int = TESTBED_WORKERS,
          ps: int = TESTBED_PS, seed: int = 0, worker_hosts: Sequence[str] | None = None) -> dict[str, JobPlacement]:
    """Place every job's tasks one at a time, each on the host that (in this order)
    holds fewest of the job's tasks (distinct hosts whenever there are enough), sits
    in the rack with fewest of the job's tasks (spread over racks), and holds fewest
    tasks overall (balance); remaining ties are broken by the seed.

    With ``worker_hosts`` (the paper's testbed, §V-A: GPU servers train, CPU servers
    hold the parameters) workers go only on those hosts and PSs only on the others."""
    if not hosts or len(set(hosts)) != len(hosts):
        raise SpecError("hosts", "a non-empty list of distinct host names")
    for host in hosts:
        if host not in racks:
            raise SpecError(f"racks.{host}", "missing: every host needs a rack")
    if workers < 1 or ps < 1:
        raise SpecError("workers" if workers < 1 else "ps", "a job needs at least one worker and one PS")
    pools = (list(hosts), list(hosts))
    if worker_hosts is not None:
        unknown = [h for h in worker_hosts if h not in racks]
        if unknown:
            raise SpecError("placement.gpu_hosts", f"{unknown[0]!r} is not a host of the topology")
        if not worker_hosts or len(set(worker_hosts)) != len(worker_hosts):
            raise SpecError("placement.gpu_hosts", "a non-empty list of distinct host names")
        pools = (list(worker_hosts), [h for h in hosts if h not in worker_hosts])
        if not pools[1]:
            raise SpecError("placement.gpu_hosts", "leaves no host for the parameter servers")
    rng = random.Random(f"place:{seed}")
    load = dict.fromkeys(hosts, 0)
    placements = {}
    for job in jobs:
        chosen: list[str] = []
        for task in range(workers + ps):
            tiebreak = {host: rng.random() for host in hosts}
            host = min(pools[task >= workers], key=lambda h: (chosen.count(h), sum(racks[c] == racks[h] for c in chosen),
                                                             load[h], tiebreak[h]))
            chosen.append(host)
            load[host] += 1
        placements[job.key] = JobPlacement(tuple(chosen[:workers]), tuple(chosen[workers:]))
    return placements


@dataclass(frozen=True)
class GpuCluster:
    """Every host a GPU server with ``gpus_per_host`` GPUs (the paper's simulated
    cluster, §V-C: "60 GPU-servers and every GPU-server contains 4 GPUs"). Jobs are
    placed when their cojob is admitted, not in advance (``GpuSlots``); a job has
    ``workers`` workers, one per GPU, and ``ps`` PSs on the servers' CPUs."""

    hosts: tuple[str, ...]
    racks: Mapping[str, str]
    gpus_per_host: int
    workers: int
    ps: int
    seed: int

    def __post_init__(self):
        if self.ps > len(self.hosts) - 1:
            raise SpecError("workload.ps", f"at most {len(self.hosts) - 1} PSs: they sit off their job's worker hosts")

    @property
    def gpus(self) -> int:
        return self.gpus_per_host * len(self.hosts)

    def check_fits(self, plan: CojobPlan) -> None:
        """A cojob whose stage 0 needs more GPUs than the cluster has would wait forever."""
        self.check_jobs(len(plan.jobs), f"cojob {plan.cojob_id}")

    def check_jobs(self, jobs: int, who: str = "a cojob") -> None:
        """``check_fits`` for a cojob of ``jobs`` jobs (a spec's, before its cojobs are built)."""
        need = jobs * self.workers
        if need > self.gpus:
            raise SpecError("workload.placement.gpus_per_host",
                            f"{who} needs {need} GPUs at its stage 0; the cluster has {self.gpus}")

    def to_dict(self) -> dict:
        return {"hosts": list(self.hosts), "racks": dict(self.racks), "gpus_per_host": self.gpus_per_host,
                "workers": self.workers, "ps": self.ps, "seed": self.seed}

    @classmethod
    def from_dict(cls, data: Mapping) -> GpuCluster:
        return cls(tuple(data["hosts"]), dict(data["racks"]), data["gpus_per_host"], data["workers"], data["ps"],
                   data["seed"])


class GpuSlots:
    """Which GPUs of a ``GpuCluster`` are taken, and where admitted jobs go.

    Workers are packed first-fit over the hosts in an order drawn from the seed (a
    job's workers fill one server's free GPUs before the next server's, as a
    consolidating cluster scheduler does: our reading; §V-C does not say how jobs
    are placed). A job's PSs go on hosts other than its workers', each on the one with
    fewest of the job's tasks in its rack, then fewest live PSs, then the seed's
    order. A job's GPUs and PS slots are given back when it stops."""

    def __init__(self, cluster: GpuCluster):
        self.cluster = cluster
        self.order = list(cluster.hosts)
        random.Random(f"gpu-slots:{cluster.seed}").shuffle(self.order)
        self.rank = {host: i for i, host in enumerate(self.order)}
        self.free = dict.fromkeys(cluster.hosts, cluster.gpus_per_host)
        self.ps_load = dict.fromkeys(cluster.hosts, 0)

    def fits(self, plan: CojobPlan) -> bool:
        return len(plan.jobs) * self.cluster.workers <= sum(self.free.values())

    def place(self, plan: CojobPlan) -> dict[str, JobPlacement]:
        """Take GPUs for every job of ``plan`` (which must fit)."""
        if not self.fits(plan):
            raise ValueError(f"cojob {plan.cojob_id} does not fit in the free GPUs")
        racks, placements = self.cluster.racks, {}
        for job in plan.jobs:
            workers = []
            for _ in range(self.cluster.workers):
                host = next(h for h in self.order if self.free[h])
                self.free[host] -= 1
                workers.append(host)
            ps = []
            for _ in range(self.cluster.ps):
                chosen = workers + ps
                host = min((h for h in self.order if h not in chosen),
                           key=lambda h: (sum(racks[c] == racks[h] for c in chosen), self.ps_load[h], self.rank[h]))
                self.ps_load[host] += 1
                ps.append(host)
            placements[job.key] = JobPlacement(tuple(workers), tuple(ps))
        return placements

    def release(self, placement: JobPlacement) -> None:
        for host in placement.workers:
            self.free[host] += 1
        for host in placement.ps:
            self.ps_load[host] -= 1


class Flow(NamedTuple):
    src: str
    dst: str
    bytes: int
    phase: str  # PUSH (worker -> PS) or PULL (PS -> worker)


def iteration_flows(placement: JobPlacement, bytes_per_partition: int) -> list[Flow]:
    """One iteration: every worker pushes a partition to every PS; once a PS has all
    pushes, every worker pulls that partition back. Same-host flows are included
    (the driver runs them locally); they load no port."""
    push = [Flow(w, p, bytes_per_partition, PUSH) for w in placement.workers for p in placement.ps]
    pull = [Flow(p, w, bytes_per_partition, PULL) for w in placement.workers for p in placement.ps]
    return push + pull


def _port_bytes(flows: Sequence[Flow], iterations: int = 1) -> dict[str, int]:
    loads: dict[str, int] = {}
    for flow in flows:
        if flow.src != flow.dst:
            for port in (f"{flow.src}/out", f"{flow.dst}/in"):
                loads[port] = loads.get(port, 0) + flow.bytes * iterations
    return loads


def stage_port_loads(placement: JobPlacement, bytes_per_partition: int, iterations: int) -> dict[str, int]:
    """Bytes each NIC port carries for ``iterations`` iterations of one job."""
    return _port_bytes(iteration_flows(placement, bytes_per_partition), iterations)


def cojob_port_loads(plan: CojobPlan, placements: Mapping[str, JobPlacement], iterations_by_job: Mapping[str, int],
                     bytes_scale: float = 1.0) -> dict[str, int]:
    """Port loads of a cojob's jobs named in ``iterations_by_job``, each for its number
    of iterations (``scheduling.remaining_stages``: a stage's iterations left per job)."""
    loads: dict[str, int] = {}
    for job in plan.jobs:
        if job.key in iterations_by_job:
            placement = placements[job.key]
            size = partition_bytes(plan.profile.size_mb, len(placement.ps), bytes_scale)
            for port, n in stage_port_loads(placement, size, iterations_by_job[job.key]).items():
                loads[port] = loads.get(port, 0) + n
    return loads


@dataclass(frozen=True)
class Workload:
    """Everything a run replays: its cojobs (arrivals, stages, offline kills) and
    where every job's tasks run. Every job has a placement; every ``after`` arrival
    names another cojob of the workload and one of its stages."""

    cojobs: tuple[CojobPlan, ...]
    placements: Mapping[str, JobPlacement]
    source: str
    gpus: GpuCluster | None = None  # set: jobs are placed as their cojob is admitted, placements empty

    def __post_init__(self):
        stages = {}
        for plan in self.cojobs:
            if plan.cojob_id in stages:
                raise SpecError(f"cojobs[{plan.cojob_id}].cojob_id", "duplicate")
            stages[plan.cojob_id] = len(plan.stage_iterations)
        for plan in self.cojobs:
            if self.gpus is not None:
                self.gpus.check_fits(plan)
            for job in plan.jobs:
                if self.gpus is None and job.key not in self.placements:
                    raise SpecError(f"placements.{job.key}", "missing")
            if plan.arrival.after is not None:
                cojob_id, stage_index = plan.arrival.after
                if cojob_id == plan.cojob_id or not 0 <= stage_index < stages.get(cojob_id, 0):
                    raise SpecError(f"cojobs[{plan.cojob_id}].arrival.after",
                                    f"no other cojob {cojob_id} with stage {stage_index}")

    def to_dict(self) -> dict:
        return {"source": self.source, "cojobs": [plan.to_dict() for plan in self.cojobs],
                "placements": {key: placement.to_dict() for key, placement in self.placements.items()},
                **({"gpus": self.gpus.to_dict()} if self.gpus else {})}

    @classmethod
    def from_dict(cls, data: Mapping) -> Workload:
        return cls(tuple(CojobPlan.from_dict(plan) for plan in data["cojobs"]),
                   {key: JobPlacement.from_dict(p) for key, p in data["placements"].items()}, data["source"],
                   GpuCluster.from_dict(data["gpus"]) if "gpus" in data else None)


def placed(cojobs: Sequence[CojobPlan], hosts: Sequence[str], racks: Mapping[str, str], source: str,
           workers: int = TESTBED_WORKERS, ps: int = TESTBED_PS, seed: int = 0,
           worker_hosts: Sequence[str] | None = None) -> Workload:
    """A workload of ``cojobs`` with all their jobs placed together by ``place``."""
    jobs = [job for plan in cojobs for job in plan.jobs]
    return Workload(tuple(cojobs), place(jobs, hosts, racks, workers, ps, seed, worker_hosts), source)


def load_trace(path: str | Path, hosts: Sequence[str] | None = None) -> Workload:
    """The Grouper simulator's workload (see /work/shared/data/README.md) as a
    ``Workload``, keeping its numbers: model sizes, stage iterations, kills
    (``max_stage``), compute seconds and arrival times (testbed seconds at 1 Gbit/s).
    Trace host i runs on ``hosts[i]`` (default ``tbh<i+1>``, the fabric's host order);
    a fabric with fewer hosts than the trace is refused, extra hosts stay idle. Model
    names are lower-cased to match ``MODELS``. Jobs carry no learning curve."""
    path = Path(path)
    data = _read_trace(path)
    top = mapping(ROOT, mapping("trace", data), required=("network", "cojobs"))
    n_hosts = integer("network.hosts", mapping("network", top["network"], required=("hosts",))["hosts"], minimum=1)
    host_names = list(hosts) if hosts is not None else [f"tbh{i + 1}" for i in range(n_hosts)]
    if len(host_names) < n_hosts:
        raise SpecError("hosts", f"the trace uses {n_hosts} hosts, the fabric has {len(host_names)}")
    cojobs, placements = [], {}
    for position, raw in enumerate(sequence("cojobs", top["cojobs"], non_empty=True)):
        plan, plan_placements = _trace_cojob(raw, f"cojobs[{position}]", host_names[:n_hosts])
        if any(other.cojob_id == plan.cojob_id for other in cojobs):
            raise SpecError(f"cojobs[{position}].cojob_id", f"{plan.cojob_id} is used by an earlier cojob")
        cojobs.append(plan)
        placements.update(plan_placements)
    return Workload(tuple(cojobs), placements, f"trace:{path.name}")


def _read_trace(path: Path) -> Any:
    """The trace file's JSON, or a ``workload.trace`` error naming the file: missing,
    unreadable, not UTF-8, not JSON, nested too deeply."""
    shown = shown_path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError):
        raise SpecError(TRACE_FIELD, f"no such trace file: {shown}") from None
    except OSError as err:  # a directory, permission denied, a name too long, ...
        raise SpecError(TRACE_FIELD, f"cannot read {shown}: {err.strerror or type(err).__name__}") from None
    except UnicodeDecodeError as err:
        raise SpecError(TRACE_FIELD, f"{shown} is not UTF-8 text (at byte {err.start})") from None
    except json.JSONDecodeError as err:
        raise SpecError(TRACE_FIELD, f"{shown} is not valid JSON ({err})") from None
    except ValueError as err:  # a NUL in the name, a number of too many digits
        reason = str(err).splitlines()[0][:100] if str(err) else type(err).__name__
        raise SpecError(TRACE_FIELD, f"cannot read {shown}: {reason}") from None
    except RecursionError:
        raise SpecError(TRACE_FIELD, f"{shown} is nested too deeply") from None


def _trace_cojob(raw: Any, where: str, hosts: Sequence[str]) -> tuple[CojobPlan, dict[str, JobPlacement]]:
    raw = mapping(where, raw, required=("cojob_id", "arrival_s", "model", "model_size_MB", "jobs"))
    cojob_id = integer(at(where, "cojob_id"), raw["cojob_id"], minimum=0)
    arrival_s = number(at(where, "arrival_s"), raw["arrival_s"], minimum=0)
    model = string(at(where, "model"), raw["model"], what="a model name")
    size_mb = number(at(where, "model_size_MB"), raw["model_size_MB"], minimum=0, strict=True)
    stage_ends = compute_s = None
    jobs, placements = [], {}
    for job_at, raw_job in items(at(where, "jobs"), raw["jobs"], non_empty=True):
        ends_field = "stage_end_iterations_cumulative"
        raw_job = mapping(job_at, raw_job, required=("job_index", ends_field, "compute_time_per_iter_s", "max_stage",
                                                     "workers", "ps", "flow_size_MB"))
        position = len(jobs)
        index = integer(at(job_at, "job_index"), raw_job["job_index"], minimum=0)
        if index != position:
            raise SpecError(at(job_at, "job_index"), f"must be {position} (jobs in index order), got {index}")
        ends = _stage_ends(raw_job[ends_field], at(job_at, ends_field))
        if stage_ends is not None and ends != stage_ends:
            raise SpecError(at(job_at, ends_field), f"differs from job 0's {list(stage_ends)}")
        job_compute_s = number(at(job_at, "compute_time_per_iter_s"), raw_job["compute_time_per_iter_s"], minimum=0)
        if compute_s is not None and job_compute_s != compute_s:
            raise SpecError(at(job_at, "compute_time_per_iter_s"), f"differs from job 0's {compute_s}")
        stage_ends, compute_s = ends, job_compute_s
        max_stage = integer(at(job_at, "max_stage"), raw_job["max_stage"], minimum=1)
        if max_stage > len(ends):
            raise SpecError(at(job_at, "max_stage"), f"must be at most the {len(ends)} stages, got {max_stage}")
        workers = _hosts(raw_job["workers"], at(job_at, "workers"), hosts)
        ps = _hosts(raw_job["ps"], at(job_at, "ps"), hosts)
        flow_mb = number(at(job_at, "flow_size_MB"), raw_job["flow_size_MB"], minimum=0, strict=True)
        if not math.isclose(flow_mb, size_mb / len(ps), rel_tol=1e-6):
            raise SpecError(at(job_at, "flow_size_MB"),
                            f"{flow_mb} is not model_size_MB / len(ps) = {size_mb / len(ps)}")
        jobs.append(JobPlan(cojob_id, index, max_stage))
        placements[job_key(cojob_id, index)] = JobPlacement(workers, ps)
    stage_iterations = tuple(b - a for a, b in zip((0,) + stage_ends, stage_ends))
    plan = CojobPlan(cojob_id, ModelProfile(model.lower(), size_mb, compute_s), stage_iterations, tuple(jobs),
                     Arrival(at_s=arrival_s))
    return plan, placements


def _stage_ends(value: Any, field: str) -> tuple[int, ...]:
    ends = tuple(integer(where, end, minimum=1) for where, end in items(field, value, non_empty=True))
    if any(b <= a for a, b in zip(ends, ends[1:])):
        raise SpecError(field, f"must be strictly increasing, got {list(ends)}")
    return ends


def _hosts(value: Any, field: str, hosts: Sequence[str]) -> tuple[str, ...]:
    indices = [integer(where, i, minimum=0) for where, i in items(field, value, non_empty=True)]
    for k, i in enumerate(indices):
        if i >= len(hosts):
            raise SpecError(f"{field}[{k}]", f"host {i} is not one of the trace's {len(hosts)} hosts")
    if len(set(indices)) != len(indices):
        raise SpecError(field, f"lists a host twice: {indices}")
    return tuple(hosts[i] for i in indices)

"""What a run's ``summary.json`` holds, field by field: one home for the top-level
fields each kind writes on each backend, and what each means.

A network kind's summary is the lifecycle's fields (``LIFECYCLE``), on the emulator
also the platform's (``EMULATED``: the CPU, the controller, losses, the fidelity
verdict), then the kind's own; a co-location run writes all of its own. A field
holding a mapping is one entry here: its sub-fields are checked where they are
fixed (``tcp``, ``fidelity``, ``rate_updates``, a co-location method's fields), not
where a run names them (a model, a task, a host). A field written only on some
paths (after a fault, with an option) says so.

Three users: ``docs/summary-fields.md`` is ``markdown()`` (``python -m
experiments.summary_fields > docs/summary-fields.md``); a sweep refuses a ``report:``
field no cell's kind writes (``unknown``) before any cell runs; the tests check that
every summary a real run of each kind writes holds only fields declared here
(``undeclared``).
"""
from __future__ import annotations

from experiments.store import SUMMARY
from experiments.validation import nearest

LIFECYCLE = {  # every run of a network kind (experiments.platform.run)
    "name": "the spec's name",
    "backend": "emulated (a fabric on this box) or simulated (the kind's fluid model)",
    "completed": "true when the run ended without an error (its summary then has no error field)",
    "trustworthy": ("emulated: fidelity verdict (no untrustworthy reason); simulated: true; false on any "
                    "error/analysis_error"),
    "wall_s": "s the run took on the wall clock (emulated: fabric bring-up to tear-down)",
    "error": "only after a fault: the run's first error as one line (its traceback in traceback.txt)",
    "analysis_error": ("only when the analysis raised: its one-line error (then trustworthy false); never on simulated "
                       "runs"),
}

EMULATED = {  # every emulated run beside (platform: fidelity, cpu, capture)
    "cpu_idle_share": ("box's idle share of all CPU time (/proc/stat), over cpu_window_s where given, else from the "
                       "run's start to the workload's stop; 1.0 unsampled"),
    "cpu_stolen_share": "box's hypervisor-steal share of all CPU time over the same span (/proc/stat steal)",
    "cpu_throttled_share": ("share of the span's wall time the run's cgroup was frozen by a CPU quota (cpu.stat), "
                            "clipped 0-1"),
    "cpu_window_s": ("only when the kind gives a traffic window (gnn, programs; never cojob/timetable): [start, end] s "
                     "on cpu.csv"),
    "controller_outages": ("list of {start_s, end_s (null: never ended), restarts, exit_code, [error]}, s from the "
                           "run's t0"),
    "switch_loss_share": "packet_losses.switch_internal / switch pkts received; null if counters missing",
    "packet_losses": ("packets lost: {switch_queues, switch_sockets, switch_internal, interfaces (kernel rx+tx), "
                      "host_queues}; null: file missing (switch_sockets: also runs recorded before it was "
                      "counted, 2026-12-01)"),
    "tcp": "the hosts' TCP counters summed over the hosts (the tcp table below); null if raw/tcp_counters.json unread",
    "tcp_retransmitted_share": ("tcp.retransmitted_on_wire_share: (TcpRetransSegs - TCPRetransFail) / TcpOutSegs over "
                                "hosts; null if no tcp"),
    "tcp_timeouts": "tcp.timeouts: TCP retransmission timeouts (TcpExtTCPTimeouts) summed over hosts; null if no tcp",
    "fidelity": "the verdict: its fields in the fidelity table below",
    "collect_errors": ("only when some fabric counter/file could not be read: 'file: error' lines (run made "
                       "untrustworthy)"),
    "queue_samples": "only with capture.queue_interval_s: sampling rounds of every switch port's per-queue backlog",
    "queue_sampler_cpu_s": ("only with capture.queue_interval_s: CPU s (user+sys) the sampler thread used (its "
                            "rtnetlink reads)"),
    "queue_sampler_cpu_share": "only with capture.queue_interval_s: sampler CPU s / (s since run start x CPU count)",
    "queue_sampler_error": "only when the queue sampler stopped on an error (e.g. a port gone): its message",
    "tcp_samples": "only with capture.tcp_interval_s: sampling rounds of the capture hosts' TCP connections",
    "tcp_sampler_cpu_s": "only with capture.tcp_interval_s: CPU s (user+sys) the sampler thread used (its sock_diag reads)",
    "tcp_sampler_cpu_share": "only with capture.tcp_interval_s: sampler CPU s / (s since run start x CPU count)",
    "tcp_sampler_error": "only when the TCP sampler stopped on an error (e.g. a host gone): its message",
    "tcp_backoff_spans": ("only with capture.tcp_interval_s: stretches of samples in which a connection's "
                          "retransmission timer had backed off with data unacked (raw/tcp_backoffs.csv)"),
    "tcp_backoff_longest_s": "only with capture.tcp_interval_s: the longest such stretch, first to last sample, s",
    "capture_errors": ("only when a capture: tcpdump exited non-zero: 'host: tcpdump exited with N' (run made "
                       "untrustworthy)"),
}

_COJOB = {  # a cojob run on either backend
    "avg_sct_s": "mean SCT over completed stages, s: stage_end minus its cojob's cojob_arrival (Eq. 1-2); null if none",
    "avg_cojct_s": "mean CoJCT over ended cojobs, s: cojob_end minus cojob_arrival",
    "avg_jct_s": "mean JCT over ended jobs, s: first job_killed/job_finished minus its cojob's arrival",
    "avg_t90_s": ("mean over jobs that got there of s from cojob arrival to 90% of converged accuracy (worker 0's "
                  "iterations)"),
    "avg_stage_duration_s": "mean over completed stages of stage_end minus stage_start, s",
    "per_model_avg_sct_s": "per model name: mean SCT (s) of its completed stages (Fig. 12)",
    "scheduler": "the spec's scheduler.name (fs, baraat, sincronia, sincronia-stage, grouper or module:function)",
    "seed": "the spec's seed",
    "stages_completed": "stages (cojob, stage) with both stage_start and stage_end",
    "stages_planned": "stages of every cojob in the workload (sum of len(stage_iterations))",
    "stages_unfinished": "stages started but never ended",
    "cojobs_completed": "cojobs that arrived and ended (cojob_end)",
    "cojobs_planned": "cojobs in the workload",
    "cojobs_unfinished": "cojobs that arrived but never ended",
    "jobs_ended": "jobs killed or finished after their cojob arrived",
    "jobs_unfinished": "jobs named in a stage_start that were never killed or finished",
    "jobs_without_t90": "jobs of arrived cojobs that never reached 90% of converged accuracy (or have no curve)",
    "avg_stage_slowdown": ("mean stage SCT / solo SCT of its (model, stage); always null here: the runner passes no "
                           "solo runs"),
    "p90_stage_slowdown": "90th percentile (linear) of those slowdowns; always null here (no solo runs)",
    "stages_without_solo": "completed stages lacking a solo SCT; always null here (no solo runs)",
    "sct_s": "list per completed stage: {cojob, model, stage, sct_s, duration_s}",
    "cojct_s": "list per ended cojob: {cojob, model, cojct_s}",
    "jct_s": "list per ended job: {job, cojob, jct_s}",
    "t90_s": "list per job of each arrived cojob: {job, cojob, model, t90_s (null: never reached)}",
    "stage_slowdown": "list {cojob, model, stage, slowdown} per stage with a solo SCT; always [] here (no solo runs)",
}

_COJOB_EMULATED = {
    "model_avg_sct_s": ("the simulator's avg_sct_s for the same workload, scheduler and fabric (iterations+compute); "
                        "null if failed"),
    "sct_over_model": "avg_sct_s / model_avg_sct_s; null unless both set and stages_completed == stages_planned",
    "model_error": "only when the model simulation raised: its one-line error (model_avg_sct_s then null)",
    "decisions": "count of scheduler decisions applied (one a line in decisions.jsonl)",
    "max_apply_s": "longest s one decision's policy batch took to apply (decisions.jsonl apply_s); null if none",
    "conformance": "{sampled_packets, dscp_match_share, sender_queue_match_share, per_host, [sample_capture_errors]}",
}

_COJOB_SIMULATED = {  # simulated seconds from the simulation's start
    "simulated_s": "simulated time (s) at which the coordinator finished the last cojob",
    "decisions": "scheduler decisions the coordinator made in the simulation",
    "flows": "network flows simulated to completion (same-host transfers cross nothing and are not counted)",
    "flow_p50_s": "upper median flow duration, s (a real flow's, not interpolated); null with no flows",
    "flow_p90_s": "90th-percentile flow duration, s, at rank (n-1)*0.9 rounded down; null with no flows",
    "flow_max_s": "longest flow duration, s; null with no flows",
    "weighted_unsettled_fillings": ("only with emulation.queue_weights: weighted fillings that stopped after 1,000 "
                                    "sweeps still moving (rates within every port, fair to within the next field)"),
    "weighted_unsettled_max": ("only with emulation.queue_weights: the most their offers still moved, a share of a "
                               "port (the run fails past 0.01)"),
}

_TIMETABLE = {
    "high_share_while_both": "only with analysis.priority: high/(high+low) mean goodput over their overlap from +1 s",
    "low_recovery_s": "only with analysis.priority: s after high ended until low >= 0.9 x its pre-high median goodput",
    "rate_limit_achieved_mbps": ("only with analysis.rate_limit: flow's mean goodput, Mbit/s, from limit +1 s to next "
                                 "change/end"),
    "rate_limit_target_mbps": ("only with analysis.rate_limit: rate limit in force (last rate change, else the flow's "
                               "rate_mbps)"),
    "rate_limit_mechanism": ("only with analysis.rate_limit: the controller's rate_mechanism for the flow's policy, or "
                             "null"),
    "link_goodput_ratio": ("min over saturated host links of median goodput / link rate (max-min steady seconds); null:"
                           " none"),
    "mean_fct_s": "only when sized flows completed: their mean flow completion time, s",
    "flows": ("per good flow: {mean_goodput_mbps (start+1 s..end), retransmits}; sized {size_bytes, fct_s, "
              "mean_goodput_mbps}"),
    "failed_flows": ("per failed flow name: {exit_code (or 'not started'/'timed out'), error}; each makes the run "
                     "untrustworthy"),
    "policy_changes_delayed": "list of policy changes {flow, at_s, applied_s} applied > 1 s after due (run time s)",
}

_GNN_EMULATED = {
    "iterations": "worker0's training iterations: count of its iteration_end events",
    "iteration_s_mean": ("s; mean of worker0's intervals between consecutive iteration ends (1st excluded); null if <2,"
                         " 4 dp"),
    "iteration_s_median": "s; median of worker0's intervals between consecutive iteration ends; null if <2, 4 dp",
    "time_to_accuracy_s": ("s; last task's hello (all up) to worker0's first val_accuracy >= target; null if not "
                           "reached"),
    "training_s": "s; last task's hello (all tasks up) to worker0's last iteration_end; 3 dp",
    "first_iteration_s": ("s; last task's hello (all up) to worker0's first iteration_end: the tasks' start-up "
                          "(imports, partitions) and the first iteration; 3 dp"),
    "time_to_accuracy_after_first_iteration_s": ("s; worker0's first iteration_end to its first val_accuracy >= "
                                                 "target (time_to_accuracy_s less first_iteration_s); null if not "
                                                 "reached"),
    "val_accuracy": "worker0's last reported validation accuracy (0-1); null if none reported",
    "val_accuracy_best": "worker0's best reported validation accuracy (0-1); null if none reported",
    "train_loss_first": "training loss at the first iteration with losses, mean over workers; 4 dp",
    "train_loss_last": "training loss at the last iteration with losses, mean over workers; 4 dp",
    "communication_share": "mean over workers' iterations > 0 of 1 - compute_s / (compute_s + wait_s + sync_s); 3 dp",
    "epochs": "iterations x workers x samplers_per_worker x batch_size / training nodes; null if 0 iterations or nodes",
    "predicted_iteration_s": ("s; the job model's mean iteration time, run's placement+scheduler; "
                              "null on error"),
    "prediction_note": ("(only when predicted_iteration_s is null) why the model refused the profile (spec's or run's "
                        "events)"),
    "scheduler": "rate policy name: oes, default, omcoflow, mrtf, fair, or an own module:function",
    "placement": "placement kind (workload.placement.kind): distdgl, etp, ifs, explicit, own module:function ...",
    "sync": "workload.sync: gradient synchronisation, ps or allreduce",
    "seed": "the spec's seed",
    "task_placement": ("per task id (worker0, sampler0, store0, ps0 ...): the machine it ran on; null if the driver "
                       "never started"),
    "edge_cut_share": ("share of the graph's directed edges that cross partitions (job's partitioning), 4 dp; null if "
                       "no driver"),
    "compute_s_per_iteration": ("per task id: mean over its iterations of its compute-report seconds summed per "
                                "iteration (s)"),
    "transfers": "count of inter-machine transfers the tasks reported (flow_start with src != dst)",
    "reported_transfer_bytes": "bytes; sum of those transfers' payload bytes as the tasks reported them",
    "fabric_counted_bytes": ("bytes; sum over hosts of what their switch ports received from them over the run; null if"
                             " unread"),
    "achieved_over_target_median": ("upper median of achieved/target Mbit/s over transfers >= 100 kB with a target; "
                                    "null if none"),
    "rate_updates": "the rate decisions' counts and latencies (zeros and nulls under default): the table below",
    "oes_rate_max_rel_error": ("max |installed - target| / target over tc rate read-backs (1.0: class missing); null if"
                               " none"),
    "rate_readbacks": "count of per-policy rate read-backs (after decisions 1, 11, 21 ... and at close); 0 if none",
}

_RATE_UPDATES = {  # the sub-fields of a gnn run's rate_updates
    "decisions": "count of decisions that installed a changed batch of per-flow rates",
    "policies_set": "policies (flow rates) set over all decisions",
    "latency_ms_p50": "ms; nearest-rank p50 of flow event time -> its answering batch applied; null if none",
    "latency_ms_p99": "ms; nearest-rank p99 of the same latencies",
    "one_flow_latency_ms_p99": "ms; p99 latency over decisions that set a single policy",
    "apply_ms_p50": "ms; p50 of a decision's time from decide() start to its batch synced",
    "apply_ms_p99": "ms; p99 of the same",
    "largest_batch": "most policies set in one decision",
}

_GNN_SIMULATED = {  # seconds are simulated ones
    "iterations": "worker0's iterations in the model",
    "iteration_s_mean": "simulated s; mean of worker0's intervals between consecutive iteration ends; null if <2",
    "iteration_s_median": "simulated s; median of worker0's intervals between consecutive iteration ends; null if <2",
    "training_s": "simulated s; t=0 (every task starts together) to worker0's last iteration end",
    "communication_share": "mean over workers' iterations > 0 of 1 - compute_s / (compute_s + wait_s + sync_s); 3 dp",
    "simulated_s": "simulated s; when the last task process finished (the model's end)",
    "scheduler": "rate policy name: oes, default, omcoflow, mrtf, fair, or an own module:function",
    "placement": "placement kind (workload.placement.kind)",
    "sync": "workload.sync: ps or allreduce",
    "seed": "the spec's seed",
    "task_placement": "per task id: its machine, as the spec's resolved placement gives it",
    "profile": "the profile.json the model replays (spec's simulation.profile, path as shown)",
    "profile_iterations": "iterations the profile holds (replayed mod this count)",
    "transfers": "count of inter-machine reported transfers (all frames but requests, src != dst machine)",
    "reported_transfer_bytes": "bytes; payload sum of those transfers (profiled bytes)",
    "frames": "every frame sent in the model, requests and same-machine ones included (credits excluded)",
    "decisions": "count of rate decisions that changed an installed rate (0 under default)",
}

_PROGRAMS = {
    "allreduce_over_ideal": "(allreduce) median allreduce_s / allreduce_ideal_s; null if the ideal is 0",
    "allreduce_s": "(allreduce) s; median all-reduce time of rank 0's iterations after 2 warm-up ones",
    "allreduce_ideal_s": ("(allreduce) s; ring ideal: 2(N-1)/N x bytes x 8 / host link rate (min over the program's "
                          "hosts)"),
    "allreduce_mbps": "(allreduce) Mbit/s; median over measured iterations of allreduce_bytes x 8 / allreduce_s",
    "allreduce_bytes": "(allreduce) bytes all-reduced per iteration (must be equal in every measured iteration)",
    "iteration_s_alone": ("(allreduce) s; median iteration time of iterations overlapping no competing-program run; "
                          "null if none"),
    "iteration_s_with_competing": ("(allreduce) s; median iteration time of iterations overlapping a competing run; "
                                   "null if none"),
    "iterations": "(allreduce) rows of rank 0's iterations.csv, warm-up included",
    "iterations_alone": "(allreduce) count of measured iterations outside every competing program's run window",
    "iterations_with_competing": ("(allreduce) count of measured iterations overlapping a competing program's run "
                                  "window"),
    "allreduce_error": ("(only when the all-reduce analysis raised ValueError) why, one line; also an untrustworthy "
                        "reason"),
    "programs": ("per program rank: program, rank, host, role, exit_code, stopped, start_s, end_s, stderr_tail (failed "
                 "only)"),
    "failed_programs": ("records (as programs) of ranks that exited non-zero not stopped by the run; each an "
                        "untrustworthy reason"),
    "host_mbps": ("per host: {sent, received} mean Mbit/s at its switch port, first to last 0.5 s sample; {} if <2 "
                  "samples"),
    "policy_changes": ("per applied policy change: policy, at_s (due), applied_s (s since t0); > 1 s late is "
                       "untrustworthy"),
    "t0_epoch_s": "epoch s (time.time()) when the programs' clock started (start_s/end_s count from it); null if never",
}

_COLOCATION = {  # no network platform: a co-location run writes every field itself
    "name": "the spec's name",
    "kind": "spec kind: training (CoGNN queue) or inference (GNNSched queue)",
    "completed": "true when every method's every repeat was measured; false with left, or after a fault (with error)",
    "error": "(failure only) the fault, one line (e.g. KeyboardInterrupt); traceback.txt beside it",
    "left": ("(only when --repeats-now or --methods-now left parts for later) parts not measured yet, "
             "each '<method> repeat <n>'"),
    "primary": "the method whose means are the headline keys (spec primary; default the last method)",
    "makespan_s": "s; primary's mean over repeats of last finished task's end - first arrival",
    "makespan_s_sd": ("s; sample sd (ddof 1) over repeats of the primary's makespan_s; null for one repeat or none "
                      "measured"),
    "avg_jct_s": "s; primary's mean over repeats of mean JCT (end - arrival) of tasks delivered without error",
    "avg_queuing_s": "s; primary's mean over repeats of mean queuing time (start - arrival) of delivered tasks",
    "median_latency_s": "s; primary's mean over repeats of the p50 (np.percentile) of delivered tasks' JCT",
    "p90_latency_s": "s; primary's mean over repeats of the p90 of delivered tasks' JCT",
    "p99_latency_s": "s; primary's mean over repeats of the p99 of delivered tasks' JCT",
    "qos_violation_rate": ("(inference; null in training) primary's mean share of tasks not delivered within QT (2x "
                           "solo run s)"),
    "memory_violations": ("primary's mean over repeats of tasks over budget, over capacity or out of memory (either "
                          "kind; count)"),
    "group_boundary_s": ("s; primary's mean of group-after-first start - when it could start (prev group end/batch "
                         "arrival)"),
    "pmc_max_relative_error": ("max |PMC estimate - peak measured alone| / measured over all methods' task records; "
                               "null if none"),
    "pmc_mean_relative_error": "mean of the same relative errors; null if none",
    "device": "the device: cuda {type, name, total_memory_bytes, torch_cuda} or cpu {type, name, threads}",
    "allocatable_bytes": "bytes; memory.capacity_mib - memory.reserved_mib (MA), what the methods may fill",
    "workers": "spec workers: concurrent workers of the grouped methods",
    "tasks": "tasks in the queue",
    "repeats": "spec repeats: runs of the queue per method",
    "pipeline_groups": "spec pipeline_groups: a grouped method's next group prepared while one runs (bool)",
    "allocator_overhead_bytes": ("per '<model> <size class>' (power-of-2 class of the estimate): largest allocator "
                                 "overhead, bytes"),
    "methods": "per method (as the spec spells it: sqtf, mps-base ...): the methods table below, means over repeats",
}

_COLOCATION_METHOD = {  # under methods.<method>; a number also as <field>_sd
    "repeats": "runs aggregated (no _sd)",
    "tasks": "task records in the run",
    "failed": "tasks that ended with an error (out of memory, over budget, worker dead)",
    "makespan_s": "s; last finished task's end - first arrival",
    "avg_jct_s": "s; mean JCT (end - arrival) of delivered tasks",
    "avg_queuing_s": "s; mean start - arrival of delivered tasks",
    "median_latency_s": "s; p50 (np.percentile) of delivered tasks' JCT",
    "p90_latency_s": "s; p90 of delivered tasks' JCT",
    "p99_latency_s": "s; p99 of delivered tasks' JCT",
    "memory_violations": "tasks over budget, over capacity or out of memory (either kind)",
    "over_budget_tasks": ("tasks whose watched live bytes passed their budget (grouped methods); a refusal alone is "
                          "not one"),
    "over_capacity_tasks": "tasks running while the ledger's sum of live bytes was over allocatable",
    "out_of_memory_tasks": ("tasks the allocator refused: 'out of memory' (past the budget, or none) or 'out of "
                            "memory within budget'"),
    "refused_within_budget_tasks": ("tasks that ended 'out of memory within budget': refused while the watch saw "
                                    "the budget held (a cap too tight, the device full, or the refused request would have passed it)"),
    "refused_within_budget_by_cap_tasks": ("of those, refused by the worker's allocator cap: the request was past "
                                           "what the cap left (its size unknown, or its rounding straddling what the "
                                           "cap left: the device had that much free; allocator.refused_by)"),
    "refused_within_budget_by_device_tasks": "of those, refused by the device: the request fit what the cap left",
    "group_boundary_s": "s; mean over groups after the first of start - when it could start; null if <2 groups",
    "group_boundary_max_s": "s; largest such boundary; null if <2 groups",
    "qos_violation_rate": "(inference) share of tasks with a QT not delivered within it (failures count)",
    "median_latency_qt": "(inference) p50 of JCT / QT over delivered tasks",
    "p90_latency_qt": "(inference) p90 of JCT / QT",
    "p99_latency_qt": "(inference) p99 of JCT / QT",
    "avg_jct_qt": "(inference) mean of JCT / QT",
    "avg_queuing_qt": "(inference) mean of (start - arrival) / QT",
    "pmc_max_relative_error": "max PMC relative error over the run's records",
    "pmc_mean_relative_error": "mean PMC relative error over the run's records",
    "device_peak_bytes": "bytes; peak of the ledger's summed live task bytes",
    "over_capacity_events": "times the summed live bytes went from within allocatable to over it",
    "groups": "groups formed (grouped and batch methods); null otherwise",
    "worker_processes": "distinct worker processes that ran tasks",
    "device_utilization": "share 0-1: mean NVML GPU utilisation (null without NVML) or box CPU busy share",
    "wall_s": "s; wall time of the executor's run of the queue",
    "mps_daemon": "(MPS methods only; no _sd) 'ran' or 'not started: ...', plus any stop error",
}
_TCP = {
    "segments": "segments the hosts sent (TcpOutSegs)",
    "retransmissions_tried": "retransmissions TCP tried (TcpRetransSegs), those its own qdisc refused included",
    "retransmissions_tried_share": "retransmissions_tried / segments",
    "retransmitted_on_wire": "retransmissions that left the hosts (tried minus TCPRetransFail)",
    "retransmitted_on_wire_share": "retransmitted_on_wire / segments (the top-level tcp_retransmitted_share)",
    "timeouts": "retransmission timeouts (TCPTimeouts)",
    "loss_probes": "tail loss probes sent (TCPLossProbes)",
    "spurious_timeouts": "timeouts found needless (TCPSpuriousRTOs)",
    "retransmissions_held_in_sender_queue": "retransmissions skipped, the original still in the sender's queue",
    "fast_retransmits": "fast retransmits (TCPFastRetrans)",
    "sack_recoveries": "SACK recoveries (TCPSackRecovery)",
    "retransmissions_refused_by_sender_queue": "retransmissions the sender's qdisc refused (TCPRetransFail)",
    "dsacks_received": "DSACKs received: needless retransmissions the receivers reported",
    "reorderings_seen": "reorderings detected (TCPSACKReorder + TCPTSReorder + TCPRenoReorder)",
    "receiver_drops": "segments the receivers dropped (receive queue, backlog, out of order, zero window)",
}
_PACKET_LOSSES = {
    "switch_queues": "packets the switch ports' queues dropped",
    "switch_sockets": "packets the switch ports' receive sockets dropped, full while the switch waited for the CPU",
    "switch_internal": ("packets the switches lost where no counter shows it: received, neither sent on nor dropped by"
                        " a queue, a receive socket or an interface (switch_loss_share's count)"),
    "interfaces": "packets the kernel dropped on the fabric's interfaces (rx and tx)",
    "host_queues": "packets a host's NIC queue plan refused its own stack",
}
_CONFORMANCE = {
    "sampled_packets": "TCP packets the sampling captures read",
    "dscp_match_share": "share of them whose DSCP matched the decision in force (null: none sampled)",
    "sender_queue_match_share": "bytes each NIC queue sent against what the decisions asked, overlap 0-1",
    "per_host": "per host: that overlap",
    "sample_capture_errors": "only when a sampling capture failed: why",
}
_CAPTURE = ("queue_samples", "queue_sampler_cpu_s", "queue_sampler_cpu_share", "queue_sampler_error",
            "tcp_samples", "tcp_sampler_cpu_s", "tcp_sampler_cpu_share", "tcp_sampler_error",
            "tcp_backoff_spans", "tcp_backoff_longest_s", "capture_errors")
_FIDELITY = {
    "cpu_idle_share": "as the top-level field",
    "cpu_stolen_share": "as the top-level field",
    "cpu_throttled_share": "as the top-level field",
    "cpu_window_s": "as the top-level field",
    "untrustworthy_reasons": "why the run is not trustworthy, one line each ([]: trustworthy)",
    "trustworthy": "no reason",
    **{name: "as the top-level field" for name in _CAPTURE},
    "link_goodput_ratios": "(timetable) per host interface: median goodput / link rate",
    "host_link_goodput": "(timetable) per host: {sent, received} median goodput / link rate",
}
_FIXED = {  # a field holding a mapping of fixed sub-fields
    "tcp": _TCP,
    "packet_losses": _PACKET_LOSSES,
    "conformance": _CONFORMANCE,
    "rate_updates": _RATE_UPDATES,
    "fidelity": _FIDELITY,
}
_BY_NAME = {"methods": _COLOCATION_METHOD}  # a mapping by a name the spec gives, each of these fields

KINDS = {  # (kind, backend) -> the kind's own fields; colocation has no network backend
    ("cojob", "emulated"): {**_COJOB, **_COJOB_EMULATED},
    ("cojob", "simulated"): {**_COJOB, **_COJOB_SIMULATED},
    ("gnn", "emulated"): _GNN_EMULATED,
    ("gnn", "simulated"): _GNN_SIMULATED,
    ("timetable", "emulated"): _TIMETABLE,
    ("programs", "emulated"): _PROGRAMS,
    ("colocation", None): _COLOCATION,
}


def fields(kind: str, backend: str | None) -> dict[str, str]:
    """Every top-level field a summary of ``kind`` run on ``backend`` may hold, with
    its meaning; a KeyError for a kind or backend no run has."""
    if kind == "colocation":
        return dict(_COLOCATION)
    own = KINDS[(kind, backend)]
    return {**LIFECYCLE, **(EMULATED if backend == "emulated" else {}), **own}


_NO_SPREAD = ("repeats", "mps_daemon")  # a count of repeats and a text: no _sd


def _method_field(name: str) -> bool:
    return name in _COLOCATION_METHOD or (name.endswith("_sd") and name[:-3] in _COLOCATION_METHOD
                                          and name[:-3] not in _NO_SPREAD)


def _not_among(name: str, known, where: str) -> str:
    near = nearest(name, known)
    return f"{name!r} is not among {where}" + (f" (did you mean {near}?)" if near else "")


def unknown(dotted: str, kind: str, backend: str | None) -> str | None:
    """Why the dotted field (``avg_sct_s``, ``fidelity.trustworthy``,
    ``methods.sqtf.p99_latency_s``) is not one a ``kind`` summary on ``backend``
    holds, naming the nearest where one is near; None where it is (below a name the
    run gives, a model's or a task's, nothing is checked)."""
    top = fields(kind, backend)
    head, *rest = dotted.split(".")
    if head not in top:
        elsewhere = [other for (name, other) in KINDS if name == kind and other != backend
                     and head in fields(name, other)]
        if elsewhere:
            return f"{head!r} is written only by {kind} runs on the {elsewhere[0]} backend"
        return _not_among(head, top, f"the fields of a {kind}{f' ({backend})' if backend else ''} summary")
    if head in _FIXED and rest and rest[0] not in _FIXED[head]:
        return _not_among(rest[0], _FIXED[head], f"{head}'s fields")
    if head in _BY_NAME and len(rest) >= 2 and not _method_field(rest[1]):
        return _not_among(rest[1], _BY_NAME[head], f"the fields of {head}.<name>")
    return None


def undeclared(summary: dict, kind: str, backend: str | None) -> list[str]:
    """The dotted fields of ``summary`` not declared here for ``kind`` on ``backend``
    (top-level, and below a field of fixed sub-fields): [] for a summary this module
    describes whole."""
    top = fields(kind, backend)
    found = [key for key in summary if key not in top]
    for key, sub in _FIXED.items():
        if isinstance(summary.get(key), dict):
            found += [f"{key}.{name}" for name in summary[key] if name not in sub]
    for key in _BY_NAME:
        for name, value in (summary.get(key) or {}).items():
            found += [f"{key}.{name}.{field}" for field in value if not _method_field(field)]
    return found


def _table(entries: dict[str, str]) -> list[str]:
    rows = ["| field | what it is |", "|---|---|"]
    return rows + [f"| `{name}` | {text.replace('|', '/')} |" for name, text in entries.items()]


def markdown() -> str:
    """``docs/summary-fields.md``: every kind's fields, each backend's."""
    lines = [f"# What a run's {SUMMARY} holds", "",
             "Generated from `experiments/summary_fields.py` (`python -m experiments.summary_fields >",
             "docs/summary-fields.md`); a test keeps the two the same, and checks every summary a",
             "real run of each kind writes against it. A sweep's `report:` names these fields",
             "(dotted below a mapping: `fidelity.trustworthy`, `methods.sqtf.p99_latency_s`).", "",
             "## Every run of a network kind", "", *_table(LIFECYCLE), "",
             "## Every emulated run, beside those", "", *_table(EMULATED), ""]
    for (kind, backend), own in KINDS.items():
        lines += [f"## {kind}" + (f", {backend}" if backend else " (training and inference queues)"), "",
                  *_table(own), ""]
    for name, entries in _FIXED.items():
        lines += [f"### {name}", "", *_table(entries), ""]
    lines += ["### methods.<method> (colocation)", "",
              "Each number also as `<field>_sd`, its sample standard deviation over the repeats (null for one).", "",
              *_table(_COLOCATION_METHOD), ""]
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown(), end="")

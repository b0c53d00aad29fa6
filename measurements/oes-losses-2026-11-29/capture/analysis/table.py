"""Final per-loss table: losses.csv (hole + port placement) joined with context.csv (drop rows)."""
import pandas as pd, numpy as np
L = pd.read_csv("losses.csv"); T = pd.read_csv("context.csv"); T = T[T.kind == "drop"].drop(columns="kind")
L["t_key"] = L.t_drop.round(6); T["t_key"] = T.t.round(6); T = T.drop_duplicates(["host", "t_key"])
M = L.merge(T.drop(columns="t"), on=["host", "t_key"], how="left").drop(columns=["t_key", "prev_chunk_frames", "run_bytes_gap", "same_chunk", "installed_sum_mbps", "excess_top_conn", "excess_top_KB", "excess_pos_conns", "unshaped_arrived_KB"])
t0 = 1795969283.4028757  # tasks_started
M.insert(1, "t_drop_run_s", (M.t_drop - t0).round(4)); M.insert(2, "t_gap_run_s", (M.t_gap - t0).round(4))
H = pd.concat([pd.read_csv(f"holes-{h}.csv") for h in ("tbh3", "tbh4")])[["host", "t_gap", "same_tsval", "prev_chunk_plus_missing", "wmax_prev_ms", "idgap_at_gap"]]
M = M.merge(H, on=["host", "t_gap"], how="left")
M.to_csv("losses_table.csv", index=False)
print(M.shape); print(list(M.columns))

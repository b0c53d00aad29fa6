import pytest

from experiments.timetable import metrics

LOW = [(t / 2, 95.0) for t in range(1, 15)] + [(7.5, 1.0), (8.0, 1.0), (8.5, 1.0), (9.0, 1.0), (9.5, 1.0),
                                                (10.0, 1.0), (10.5, 50.0), (11.0, 94.0), (11.5, 95.0)]
HIGH = [(t / 2, 94.0) for t in range(13, 21)]


def test_high_share_uses_the_settled_overlap():
    share = metrics.high_share_while_both(HIGH, LOW, (6.0, 10.0))
    assert share == pytest.approx(94.0 / 95.0, rel=1e-6)  # settled window (7, 10]



def test_low_recovery_counts_from_the_high_flow_end():
    assert metrics.low_recovery_s(LOW, high_start=6.0, high_end=10.0, low_start=0.0) == pytest.approx(1.0)
    assert metrics.low_recovery_s([(1.0, 5.0)], high_start=0.5, high_end=2.0, low_start=0.0) is None


def test_per_second_bins_half_second_samples():
    assert metrics.per_second([(0.5, 10.0), (1.0, 20.0), (1.5, 30.0), (2.0, 50.0)]) == {0: 15.0, 1: 40.0}


def test_max_min_fill_finds_the_bottleneck_directions():
    incast = [{"src": "h1", "dst": "h3"}, {"src": "h2", "dst": "h3"}]
    rates = {h: 100.0 for h in ("h1", "h2", "h3", "h4")}
    assert metrics.saturated_directions(incast, rates) == {("h3", "received")}
    all_to_all = [{"src": a, "dst": b} for a in ("h1", "h2", "h3") for b in ("h1", "h2", "h3") if a != b]
    assert metrics.saturated_directions(all_to_all, rates) == {(h, d) for h in ("h1", "h2", "h3")
                                                               for d in ("sent", "received")}
    limited = [{"src": "h1", "dst": "h3", "rate_mbps": 30}, {"src": "h2", "dst": "h3"}]
    assert metrics.saturated_directions(limited, rates) == {("h3", "received")}
    assert metrics.saturated_directions([{"src": "h4", "dst": "h1", "rate_mbps": 10}], rates) == set()


def test_link_goodput_is_judged_only_where_the_link_is_the_bottleneck():
    flows = [{"name": "a", "src": "h1", "dst": "h3", "start_s": 0, "duration_s": 8},
             {"name": "b", "src": "h2", "dst": "h3", "start_s": 0, "duration_s": 8},
             {"name": "c", "src": "h4", "dst": "h5", "start_s": 0, "duration_s": 8, "rate_mbps": 10}]
    series = {"a": [(t / 2, 47.0) for t in range(1, 17)], "b": [(t / 2, 48.0) for t in range(1, 17)],
              "c": [(t / 2, 9.6) for t in range(1, 17)]}
    per_host = metrics.host_link_goodput(flows, series, {h: 100.0 for h in ("h1", "h2", "h3", "h4", "h5")})
    assert per_host == {"h3": {"received": pytest.approx(0.95)}}  # senders share h3: not saturated
    links = metrics.link_goodput(per_host)
    limits = {"min_cpu_idle": 0.05, "min_link_goodput_ratio": 0.85, "max_cpu_lost_share": 0.05}
    assert links == {"h3-eth0": pytest.approx(0.95)} and metrics.link_reasons(links, limits) == []
    assert metrics.link_reasons({"h3-eth0": 0.6}, limits) == ["link h3-eth0 goodput 0.60 of its rate < 0.85"]


def test_seconds_with_a_flow_still_ramping_up_are_not_judged():
    flows = [{"name": "low", "src": "h2", "dst": "h1", "start_s": 0, "duration_s": 10},
             {"name": "high", "src": "h3", "dst": "h1", "start_s": 4, "duration_s": 4}]
    low = [(t / 2, 95.0 if not 8 < t <= 16 else 1.0) for t in range(1, 21)]
    high = [(t / 2, 94.0) for t in range(9, 17)]
    per_host = metrics.host_link_goodput(flows, {"low": low, "high": high}, {"h1": 100.0, "h2": 100.0, "h3": 100.0})
    # seconds 4-5 (high starting) would otherwise count low's squeezed sender as a slow link
    assert per_host["h2"] == {"sent": pytest.approx(0.95)}
    assert per_host["h1"]["received"] == pytest.approx(0.95)


def test_every_rate_change_counts_not_only_the_first():
    """Limited to 30 Mbit/s at 4 s, its policy removed at 10 s: after the removal (and
    its settling) the flow fills its link again and is judged; the seconds around
    each change are not."""
    flows = [{"name": "a", "src": "h1", "dst": "h3", "start_s": 0, "duration_s": 20,
              "rate_changes": [(4.0, 30.0), (10.0, None)]}]
    series = {"a": [(t / 2, 95.0 if t <= 8 else 29.0 if t <= 20 else 60.0) for t in range(1, 41)]}
    per_host = metrics.host_link_goodput(flows, series, {"h1": 100.0, "h3": 100.0})
    # judged: seconds 2-3 (0.95), then 12-18 (0.6); 4-5 and 10-11 settle, 6-9 run below the link
    assert per_host == {"h1": {"sent": pytest.approx(0.6)}, "h3": {"received": pytest.approx(0.6)}}

"""max_min_fill, the one progressive filling: by hand, in both callers' shapes, and its invariants."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.schedulers.max_min import max_min_fill
from controller.schedulers.oes import Flow, Machine, max_min_fair_rates
from experiments.timetable.metrics import saturated_directions


def test_flows_on_one_resource_split_it_evenly():
    assert max_min_fill({"a": 9.0}, {"x": ("a",), "y": ("a",), "z": ("a",)}) == {"x": 3.0, "y": 3.0, "z": 3.0}


def test_a_flow_on_one_resource_takes_what_the_others_leave():
    # a: x and y at 10 / 2; b: y fixed at 5 leaves 95 to z alone
    assert max_min_fill({"a": 10.0, "b": 100.0}, {"x": ("a",), "y": ("a", "b"), "z": ("b",)}) == {
        "x": 5.0, "y": 5.0, "z": 95.0}


def test_tied_bottlenecks_give_the_same_rates_whichever_goes_first():
    # a and b both offer 10 / 2: either first fixes its two flows at 5, the other's last flow gets 5 too
    capacity = {"a": 10.0, "b": 10.0}
    uses = {"x": ("a",), "y": ("a", "b"), "z": ("b",)}
    assert max_min_fill(capacity, uses) == {"x": 5.0, "y": 5.0, "z": 5.0}
    assert max_min_fill(capacity, dict(reversed(uses.items()))) == {"x": 5.0, "y": 5.0, "z": 5.0}
    assert max_min_fill(capacity, {"y": ("b", "a"), "z": ("b",), "x": ("a",)}) == {"x": 5.0, "y": 5.0, "z": 5.0}


@pytest.mark.parametrize("nothing_left", [0.0, -20.0])
def test_a_resource_with_nothing_left_gives_its_flows_zero_and_the_rest_to_others(nothing_left):
    # x crosses the empty a: 0, so b is z's alone; never a negative rate
    rates = max_min_fill({"a": nothing_left, "b": 100.0}, {"x": ("a", "b"), "z": ("b",)})
    assert rates == {"x": 0.0, "z": 100.0}


def test_bad_uses_are_refused():
    with pytest.raises(ValueError, match="at least one resource"):
        max_min_fill({"a": 1.0}, {"x": ()})
    with pytest.raises(ValueError, match="each once"):
        max_min_fill({"a": 1.0}, {"x": ("a", "a")})
    with pytest.raises(ValueError, match="no capacity"):
        max_min_fill({"a": 1.0}, {"x": ("a", "b")})
    assert max_min_fill({"a": 1.0}, {}) == {}


def test_nic_shape_matches_max_min_fair_rates():
    # A (in 300, out 300), B (in 100, out 1000), C (in 1000, out 150); flows A->B, C->B, A->C, C->A.
    # Round 1: in B offers 100 / 2 = 50, the least: A->B = C->B = 50. Round 2: out C has 150 - 50
    # left for C->A = 100 (in A offers 300). Round 3: out A has 300 - 50 left for A->C = 250.
    expected = {"AB": 50.0, "CB": 50.0, "CA": 100.0, "AC": 250.0}
    capacity = {("in", "A"): 300.0, ("out", "A"): 300.0, ("in", "B"): 100.0, ("out", "B"): 1000.0,
                ("in", "C"): 1000.0, ("out", "C"): 150.0}
    uses = {f"{s}{d}": (("out", s), ("in", d)) for s, d in ("AB", "CB", "AC", "CA")}
    assert max_min_fill(capacity, uses) == pytest.approx(expected)
    machines = [Machine("A", 300, 300), Machine("B", 100, 1000), Machine("C", 1000, 150)]
    flows = [Flow(f"{s}{d}", s, d) for s, d in ("AB", "CB", "AC", "CA")]
    assert max_min_fair_rates(machines, flows) == pytest.approx(expected)


def test_host_link_shape_matches_saturated_directions():
    # 100 Mbit/s links; h1 -> h3 limited to 30 leaves h1 sent and h3 received 70. Free: f1 h2 -> h3,
    # f2 h1 -> h4, f3 h2 -> h4. h2 sent and h4 received both offer 100 / 2 = 50: f1 = f3 = 50,
    # then f2 = min(70, 100 - 50) = 50. Filled: h2 sent and h4 received; h1 sent and h3 received
    # carry 30 + 50 of 100.
    capacity = {(h, d): 100.0 for h in ("h1", "h2", "h3", "h4") for d in ("sent", "received")}
    capacity[("h1", "sent")] = capacity[("h3", "received")] = 70.0
    uses = {"f1": (("h2", "sent"), ("h3", "received")), "f2": (("h1", "sent"), ("h4", "received")),
            "f3": (("h2", "sent"), ("h4", "received"))}
    assert max_min_fill(capacity, uses) == pytest.approx({"f1": 50.0, "f2": 50.0, "f3": 50.0})
    active = [{"src": "h1", "dst": "h3", "rate_mbps": 30}, {"src": "h2", "dst": "h3"},
              {"src": "h1", "dst": "h4"}, {"src": "h2", "dst": "h4"}]
    links = {h: 100.0 for h in ("h1", "h2", "h3", "h4")}
    assert saturated_directions(active, links) == {("h2", "sent"), ("h4", "received")}


def test_limits_over_a_link_leave_its_free_flows_nothing_and_fill_it():
    # h1 -> h3 limited to 120 on a 100 Mbit/s link: h3 received has -20 left, so h2 -> h3 gets 0 and
    # h2 sent stays empty; h1 sent (only a limited flow's) is not the max-min share's doing
    assert max_min_fill({("h2", "sent"): 100.0, ("h3", "received"): -20.0},
                        {"f": (("h2", "sent"), ("h3", "received"))}) == {"f": 0.0}
    active = [{"src": "h1", "dst": "h3", "rate_mbps": 120}, {"src": "h2", "dst": "h3"}]
    assert saturated_directions(active, {h: 100.0 for h in ("h1", "h2", "h3")}) == {("h3", "received")}


# --- invariants ------------------------------------------------------------------

@st.composite
def instances(draw):
    n = draw(st.integers(1, 6))
    capacity = {r: draw(st.sampled_from([0.0, -5.0, 10.0, 100.0]) | st.floats(-50.0, 1000.0)) for r in range(n)}
    flows = draw(st.lists(st.sets(st.integers(0, n - 1), min_size=1, max_size=3), min_size=0, max_size=10))
    return capacity, {f"f{k}": tuple(rs) for k, rs in enumerate(flows)}


@settings(max_examples=300, deadline=None)
@given(instances())
def test_rates_fit_every_resource_and_every_flow_has_a_bottleneck(instance):
    capacity, uses = instance
    rates = max_min_fill(capacity, uses)
    assert set(rates) == set(uses) and all(r >= 0 for r in rates.values())
    load = {r: sum(rates[f] for f, rs in uses.items() if r in rs) for r in capacity}
    for r, cap in capacity.items():
        assert load[r] <= max(cap, 0.0) * (1 + 1e-9) + 1e-9
    for f, rs in uses.items():
        assert any(load[r] >= max(capacity[r], 0.0) * (1 - 1e-9) - 1e-9
                   and all(rates[f] >= rates[g] * (1 - 1e-9) for g, gs in uses.items() if r in gs) for r in rs)

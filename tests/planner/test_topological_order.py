"""The graph's topological order against networkx's lexicographical topological sort (the
oracle the planner used before it had its own): same order on every DAG, a clear error on a
cycle."""
import networkx as nx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.errors import PlannerError
from planner.graph import topological_order


@st.composite
def dags(draw):
    """(names in a shuffled listing, successors): edges go from a lower rank to a higher one,
    the listing order is independent of the ranks, so ties are broken by listing alone."""
    n = draw(st.integers(1, 12))
    edges = draw(st.sets(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=30))
    listing = draw(st.permutations(range(n)))
    names = [f"p{k}" for k in listing]
    successors = {f"p{k}": set() for k in range(n)}
    for a, b in edges:
        if a < b:
            successors[f"p{a}"].add(f"p{b}")
    return names, successors


@given(dags())
def test_order_is_networkx_lexicographical(dag):
    names, successors = dag
    g = nx.DiGraph()
    g.add_nodes_from(names)
    g.add_edges_from((a, b) for a, bs in successors.items() for b in bs)
    position = {n: i for i, n in enumerate(names)}
    expected = list(nx.lexicographical_topological_sort(g, key=position.__getitem__))
    assert topological_order(names, successors) == expected


@given(dags(), st.data())
def test_cycle_is_refused(dag, data):
    names, successors = dag
    a, b = data.draw(st.permutations(names))[:2] if len(names) > 1 else (names[0], names[0])
    successors[a].add(b)
    successors[b].add(a)
    with pytest.raises(PlannerError, match="cycle"):
        topological_order(names, successors)

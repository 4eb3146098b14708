"""A Hypothesis strategy for memo tests: one drawn set of parameters and neighbours of it that
each differ in one parameter, so that operations which share all but one field meet in one
memo (a key missing a field the answer depends on is then caught)."""
from __future__ import annotations

from hypothesis import strategies as st


def one_changed(base: dict, params: dict[str, list]) -> st.SearchStrategy[dict]:
    """``base`` with one of ``params`` (any) set to any of its values."""
    return st.sampled_from(sorted(params)).flatmap(
        lambda k: st.sampled_from(params[k]).map(lambda v: dict(base, **{k: v})))


def neighbourhoods(params: dict[str, list], min_size: int = 8, max_size: int = 24
                   ) -> st.SearchStrategy[list[dict]]:
    """A drawn set of ``params``' values followed by ``min_size`` to ``max_size`` sets that
    each differ from it in one parameter."""
    return st.fixed_dictionaries({k: st.sampled_from(v) for k, v in params.items()}).flatmap(
        lambda base: st.lists(one_changed(base, params), min_size=min_size,
                              max_size=max_size).map(lambda more: [base] + more))

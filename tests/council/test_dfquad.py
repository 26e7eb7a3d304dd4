"""DF-QuAD (Rago et al. 2016) on hand-computed trees: each expected strength below is worked out
from the definition (probabilistic sum of the children, then the combination function)."""
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bda_jax import DataError
from bda_jax.council import dfquad_strengths


def _s(base, parent, relation):
    return np.asarray(dfquad_strengths(jnp.array(base, jnp.float32), jnp.array(parent),
                                       jnp.array(relation)))


@pytest.mark.parametrize("base,parent,relation,expected", [
    # a lone argument keeps its base score
    ([0.37], [-1], [0], [0.37]),
    # two attackers 0.5, 0.5: F = 1 - 0.5 * 0.5 = 0.75; 0.8 - 0.8 * 0.75 = 0.2
    ([0.8, 0.5, 0.5], [-1, 0, 0], [0, -1, -1], [0.2, 0.5, 0.5]),
    # equal aggregates leave the base score: 0.3 with attacker 0.6 and supporter 0.6
    ([0.3, 0.6, 0.6], [-1, 0, 0], [0, -1, 1], [0.3, 0.6, 0.6]),
    # a full supporter: 0.2 + (1 - 0.2) * 1 = 1
    ([0.2, 1.0], [-1, 0], [0, 1], [1.0, 1.0]),
    # no discontinuity: attacker and supporter both 1 cancel (0.5), and 0.6 vs 0.59 moves it a
    # little: 0.5 - 0.5 * 0.01 = 0.495
    ([0.5, 1.0, 1.0], [-1, 0, 0], [0, -1, 1], [0.5, 1.0, 1.0]),
    ([0.5, 0.6, 0.59], [-1, 0, 0], [0, -1, 1], [0.495, 0.6, 0.59]),
    # depth 2: supporter s (0.7) is attacked by 0.5 -> 0.7 - 0.7 * 0.5 = 0.35; the root (0.6)
    # has attacker 0.3 and supporter 0.35 -> 0.6 + 0.4 * 0.05 = 0.62
    ([0.6, 0.7, 0.5, 0.3], [-1, 0, 1, 0], [0, 1, -1, -1], [0.62, 0.35, 0.5, 0.3]),
    # the same tree listed leaves first, root last (indices need no order)
    ([0.3, 0.5, 0.7, 0.6], [3, 2, 3, -1], [-1, -1, 1, 0], [0.3, 0.5, 0.35, 0.62]),
    # depth 3 chain of attacks: 0.9 <- 0.9 <- 0.9: leaf 0.9; middle 0.9 - 0.81 = 0.09;
    # root 0.9 - 0.9 * 0.09 = 0.819
    ([0.9, 0.9, 0.9], [-1, 0, 1], [0, -1, -1], [0.819, 0.09, 0.9]),
])
def test_hand_computed_trees(base, parent, relation, expected):
    np.testing.assert_allclose(_s(base, parent, relation), expected, atol=1e-6)


def test_batched_trees_with_padding_match_one_at_a_time():
    trees = [([0.8, 0.5, 0.5], [-1, 0, 0], [0, -1, -1]),
             ([0.6, 0.7, 0.5, 0.3], [-1, 0, 1, 0], [0, 1, -1, -1])]
    n = 5
    base = np.zeros((2, n), np.float32)
    parent = np.full((2, n), -2)
    relation = np.zeros((2, n), int)
    for b, (bs, ps, rs) in enumerate(trees):
        base[b, :len(bs)], parent[b, :len(ps)], relation[b, :len(rs)] = bs, ps, rs
    out = np.asarray(dfquad_strengths(jnp.array(base), jnp.array(parent), jnp.array(relation)))
    for b, (bs, ps, rs) in enumerate(trees):
        np.testing.assert_allclose(out[b, :len(bs)], _s(bs, ps, rs), atol=1e-7)
        assert (out[b, len(bs):] == 0).all()                 # padding slots


@pytest.mark.parametrize("base,parent,relation,field", [
    ([1.2, 0.5], [-1, 0], [0, 1], "base"),
    ([0.5, 0.5], [-1, 2], [0, 1], "parent"),
    ([0.5, 0.5], [-1, -3], [0, 1], "parent"),
    ([0.5, 0.5], [-1, 0], [0, 0], "relation"),
    ([0.5, 0.5], [-1, 1], [0, 1], "parent"),                  # bears on itself
    ([0.5, 0.5, 0.5], [-1, 2, -2], [0, 1, 0], "parent"),      # bears on a padding slot
])
def test_bad_trees_are_refused(base, parent, relation, field):
    with pytest.raises(DataError) as err:
        _s(base, parent, relation)
    assert err.value.field == field


# random trees: node i > 0 bears on a random earlier node
_trees = st.integers(1, 7).flatmap(lambda n: st.tuples(
    st.lists(st.floats(0, 1, width=32), min_size=n, max_size=n),
    st.tuples(*[st.integers(0, max(i - 1, 0)) for i in range(n)]),
    st.lists(st.sampled_from([-1, 1]), min_size=n, max_size=n)))


def _arrays(tree):
    base, parents, rel = tree
    parent = [-1] + list(parents[1:])
    relation = [0] + list(rel[1:])
    return list(base), parent, relation


@settings(max_examples=60, deadline=None)
@given(_trees, st.floats(0, 1, width=32))
def test_strengths_are_bounded_and_monotone(tree, new_leaf):
    base, parent, relation = _arrays(tree)
    s = _s(base, parent, relation)
    assert ((s >= -1e-6) & (s <= 1 + 1e-6)).all()
    leaves = [i for i in range(len(base)) if i not in parent]
    np.testing.assert_allclose(s[leaves], np.asarray(base, np.float32)[leaves], atol=1e-7)
    # one more child of the root: a supporter never lowers it, an attacker never raises it
    for sign in (1, -1):
        grown = _s(base + [new_leaf], parent + [0], relation + [sign])
        assert sign * (grown[0] - s[0]) >= -1e-6
    # strengthening a root supporter's base never lowers the root (anti-monotone for attackers)
    kids = [i for i in range(1, len(base)) if parent[i] == 0 and i in leaves]
    for i in kids:
        up = list(base)
        up[i] = min(1.0, up[i] + 0.25)
        delta = _s(up, parent, relation)[0] - s[0]
        assert relation[i] * delta >= -1e-6

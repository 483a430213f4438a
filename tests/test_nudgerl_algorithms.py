"""NudgeRL's pure functions: nudging contexts, inter-intra advantage, distillation term."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nudgerl.algorithms import distillation_loss, inter_intra_advantages, intra_inter_terms, nudge_contexts

contexts_st = st.lists(st.one_of(st.none(), st.integers(0, 2)), min_size=2, max_size=12)


@given(data=st.data(), contexts=contexts_st)
def test_lambda_one_reduces_to_r_minus_mean_of_all(data, contexts):
    rewards = data.draw(st.lists(st.floats(0, 1), min_size=len(contexts), max_size=len(contexts)))
    adv = inter_intra_advantages(rewards, contexts, lam=1.0, normalize=False)
    np.testing.assert_allclose(adv, np.asarray(rewards) - np.mean(rewards), atol=1e-12)


@settings(max_examples=300)
@given(data=st.data(), contexts=contexts_st, lam=st.floats(0, 2), normalize=st.booleans())
def test_higher_reward_never_lower_advantage_for_lambda_in_0_2(data, contexts, lam, normalize):
    # The paper's proposition (binary rewards, lambda in [0, 2]).
    rewards = data.draw(st.lists(st.integers(0, 1), min_size=len(contexts), max_size=len(contexts)))
    adv = inter_intra_advantages(rewards, contexts, lam=lam, normalize=normalize)
    for i, j in itertools.permutations(range(len(rewards)), 2):
        if rewards[i] > rewards[j]:
            assert adv[i] >= adv[j] - 1e-9


def _groups():
    for contexts in itertools.product([None, 0, 1], repeat=4):
        yield from ((contexts, r) for r in itertools.product([0, 1], repeat=4))
    contexts = (0,) * 5 + (1,) * 5  # M=2 x K=5: context means can differ by more than 1/2
    yield from ((contexts, r) for r in itertools.product([0, 1], repeat=10))


@pytest.mark.parametrize("lam", [-1.0, 3.0])
def test_order_breaks_outside_0_2(lam):
    # A counterexample: a correct rollout gets a lower advantage than a wrong one.
    def violates(contexts, rewards):
        adv = inter_intra_advantages(rewards, contexts, lam=lam, normalize=False)
        return any(rewards[i] > rewards[j] and adv[i] < adv[j] - 1e-9
                   for i, j in itertools.permutations(range(len(rewards)), 2))

    assert any(violates(c, r) for c, r in _groups())


@given(contexts=contexts_st, value=st.floats(0, 1), lam=st.floats(-3, 3), normalize=st.booleans())
def test_all_equal_rewards_give_zero_advantages(contexts, value, lam, normalize):
    adv = inter_intra_advantages([value] * len(contexts), contexts, lam=lam, normalize=normalize)
    np.testing.assert_allclose(adv, 0.0, atol=1e-9)


def test_known_group():
    # M=2 hints x K=2, one dropped: contexts 0,0,1,None; rewards 1,0,0,1; mean_all = .5
    adv = inter_intra_advantages([1, 0, 0, 1], [0, 0, 1, None], lam=1.1, normalize=False)
    np.testing.assert_allclose(adv, [0.5 + 1.1 * 0.0, -0.5 + 0.0, 0.0 + 1.1 * (-0.5), 0.5])
    intra, inter = intra_inter_terms([1, 0, 0, 1], [0, 0, 1, None])
    np.testing.assert_allclose(intra, [0.5, -0.5, 0.0])
    np.testing.assert_allclose(inter, [0.0, 0.0, -0.5])


def test_normalized_has_zero_mean_unit_std():
    adv = inter_intra_advantages([1, 0, 0, 1, 1, 0, 0, 0], [0, 0, 0, 0, 1, 1, None, None], lam=1.1)
    assert abs(adv.mean()) < 1e-9 and abs(adv.std() - 1) < 1e-3


def test_nudge_contexts_shape_and_drop_rate():
    rng = np.random.default_rng(0)
    ctx = nudge_contexts(2, 4, 0.0, rng)
    assert ctx == [0, 0, 0, 0, 1, 1, 1, 1]
    assert nudge_contexts(2, 4, 1.0, rng) == [None] * 8
    many = [c for _ in range(2000) for c in nudge_contexts(2, 4, 0.5, rng)]
    assert abs(sum(c is None for c in many) / len(many) - 0.5) < 0.02
    with pytest.raises(ValueError):
        nudge_contexts(0, 4, 0.5, rng)


def test_distillation_loss_sign():
    # Positive advantage: raising log pi(y|x0) must lower the loss.
    a = np.array([1.0, -1.0])
    assert distillation_loss(a, np.array([-1.0, -1.0])) == pytest.approx(0.0)
    assert distillation_loss(a, np.array([-0.5, -1.0])) < distillation_loss(a, np.array([-1.0, -1.0]))

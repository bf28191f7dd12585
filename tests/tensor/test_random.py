"""The default generator (docs/spec/api.md "Randomness"): unseeded modules and dropout use it."""
import subprocess
import sys

import numpy as np
import pytest

import onemodel as om
import onemodel.functional as F
from onemodel import checkpoint, nn


def _weights(module):
    return [v.numpy().copy() for v in module.state_dict().values()]


def _same(a, b):
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


UNSEEDED = {
    "linear": lambda: nn.Linear(8, 8),
    "conv": lambda: nn.Conv2d(2, 3, 3),
    "embedding": lambda: nn.Embedding(5, 4),
    "lstm": lambda: nn.LSTM(3, 4),
    "mha": lambda: nn.MultiheadAttention(4, 2),
    "encoder_layer": lambda: nn.TransformerEncoderLayer(4, 2, 6),
}


@pytest.mark.parametrize("kind", list(UNSEEDED))
def test_unseeded_layers_of_one_shape_start_different(kind):
    om.manual_seed(0)
    a, b = UNSEEDED[kind](), UNSEEDED[kind]()
    assert not _same(_weights(a), _weights(b))


def test_one_seed_makes_a_construction_sequence_reproducible():
    def build():
        return nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Dropout(0.5),
                             nn.TransformerEncoderLayer(5, 1, 7), nn.Linear(5, 2))

    om.manual_seed(123)
    first = build()
    om.manual_seed(123)
    second = build()
    assert _same(_weights(first), _weights(second))
    assert [m.seed for m in first.modules() if isinstance(m, nn.Dropout)] == \
        [m.seed for m in second.modules() if isinstance(m, nn.Dropout)]
    x = om.tensor(np.linspace(-1, 1, 3 * 4 * 6, dtype=np.float32).reshape(3, 4, 6))
    np.testing.assert_array_equal(first(x).detach().numpy(), second(x).detach().numpy())


def test_unseeded_layers_draw_from_the_default_generator_in_order():
    # Drawing from the default generator is drawing from Generator(s) passed explicitly.
    om.manual_seed(77)
    ours = [nn.Linear(4, 3), nn.Embedding(5, 2), nn.Linear(2, 2, bias=False)]
    g = om.Generator(77)
    explicit = [nn.Linear(4, 3, generator=g), nn.Embedding(5, 2, generator=g),
                nn.Linear(2, 2, bias=False, generator=g)]
    for a, b in zip(ours, explicit):
        assert _same(_weights(a), _weights(b))
    assert om.default_generator.state == g.state


def test_explicit_seeds_leave_the_default_generator_alone():
    om.manual_seed(5)
    before = om.get_rng_state()
    a = nn.Linear(4, 4, seed=0)
    nn.TransformerEncoderLayer(4, 2, 6, seed=3)
    nn.Linear(4, 4, generator=om.Generator(9))
    F.dropout(om.ones(10), 0.5, seed=1)
    F.dropout(om.ones(10), 0.5, training=False)
    assert om.get_rng_state() == before
    assert _same(_weights(a), _weights(nn.Linear(4, 4, seed=0)))


def test_default_generator_is_seeded_zero_at_import():
    code = ("import onemodel as om\n"
            "from onemodel import nn\n"
            "import numpy as np\n"
            "assert om.get_rng_state() == 0\n"
            "a = nn.Linear(3, 2)\n"
            "b = nn.Linear(3, 2, generator=om.Generator(0))\n"
            "assert (a.weight.detach().numpy() == b.weight.detach().numpy()).all()\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_manual_seed_reseeds_in_place():
    g = om.default_generator
    assert om.manual_seed(42) is g and om.default_generator is g
    assert g.next_u64() == om.Generator(42).next_u64()
    with pytest.raises(TypeError, match="seed must be an integer"):
        om.manual_seed(1.5)


def test_rng_state_round_trips():
    om.manual_seed(2 ** 64 - 3)  # a state with the top bit set reads as a negative int64
    state = om.get_rng_state()
    assert isinstance(state, int) and -2 ** 63 <= state < 2 ** 63
    assert state == np.uint64(2 ** 64 - 3).astype(np.int64)
    expected = [nn.Linear(3, 3).weight.detach().numpy() for _ in range(2)]
    om.set_rng_state(state)
    again = [nn.Linear(3, 3).weight.detach().numpy() for _ in range(2)]
    assert _same(expected, again)
    # The unsigned reading of the same 64 bits, and numpy integers, are the same state.
    om.set_rng_state(2 ** 64 - 3)
    assert om.get_rng_state() == state
    om.set_rng_state(np.int64(state))
    assert om.get_rng_state() == state


def test_rng_state_fits_a_checkpoint_extra():
    model = nn.Linear(2, 2, seed=0)
    om.manual_seed(2 ** 63 + 11)
    state = om.get_rng_state()
    extra = checkpoint.from_bytes(checkpoint.to_bytes(model, extra={"rng": state}), model)
    om.manual_seed(0)
    om.set_rng_state(extra["rng"])
    assert om.default_generator.state == 2 ** 63 + 11


@pytest.mark.parametrize("bad, error", [(1.0, TypeError), ("0", TypeError), (True, TypeError),
                                        (None, TypeError), (np.zeros(1), TypeError),
                                        (2 ** 64, ValueError), (-2 ** 63 - 1, ValueError)])
def test_set_rng_state_rejects_bad_input_before_changing_anything(bad, error):
    om.manual_seed(9)
    before = om.get_rng_state()
    with pytest.raises(error, match="set_rng_state"):
        om.set_rng_state(bad)
    assert om.get_rng_state() == before


def test_functional_dropout_takes_a_fresh_stream_per_call():
    x = om.ones(1000)

    def pair():
        return [F.dropout(x, 0.5).numpy() for _ in range(2)]

    om.manual_seed(3)
    first = pair()
    assert not np.array_equal(first[0], first[1])
    om.manual_seed(3)
    assert _same(first, pair())
    # The stream is the generator's next output used as the seed of draw 0.
    om.manual_seed(3)
    seed = om.Generator(3).next_u64()
    np.testing.assert_array_equal(first[0], F.dropout(x, 0.5, seed=seed).numpy())


def test_unseeded_dropout_takes_its_seed_at_construction():
    om.manual_seed(11)
    expected = om.Generator(11).next_u64()
    drop = nn.Dropout(0.5)
    assert drop.seed == expected
    after = om.get_rng_state()
    x = om.ones(200)
    y = drop(x).numpy()
    assert om.get_rng_state() == after  # masks come from (seed, draws), not the generator
    np.testing.assert_array_equal(y, nn.Dropout(0.5, seed=expected)(x).numpy())
    assert nn.Dropout(0.5).seed != drop.seed
    with pytest.raises(TypeError, match="seed must be an integer"):
        nn.Dropout(0.5, seed=1.0)


def test_unseeded_encoder_dropouts_have_distinct_seeds():
    om.manual_seed(0)
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, 6), 2)
    seeds = [m.seed for m in enc.modules() if isinstance(m, nn.Dropout)]
    assert len(seeds) == 8 and len(set(seeds)) == 8

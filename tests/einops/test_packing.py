"""pack / unpack against einops: round trips, packed shapes, and the same failures."""
import einops
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tensorcraft.einops import EinopsError, pack, unpack


@st.composite
def pack_cases(draw):
    before = draw(st.lists(st.integers(1, 3), max_size=2))
    after = draw(st.lists(st.integers(1, 3), max_size=2))
    middles = draw(st.lists(st.lists(st.integers(0, 3), max_size=3), min_size=1, max_size=4))
    names = ["i", "j", "k", "l"]
    pattern = " ".join(names[:len(before)] + ["*"] + names[2:2 + len(after)])
    shapes = [tuple(before) + tuple(m) + tuple(after) for m in middles]
    return pattern, shapes


def _tensors(shapes, backend):
    rng = np.random.default_rng(len(shapes))
    arrays = [rng.standard_normal(shape).astype("float32") for shape in shapes]
    return [torch.from_numpy(a) for a in arrays] if backend == "torch" else arrays


def _equal(a, b):
    assert type(a) is type(b) and tuple(a.shape) == tuple(b.shape)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@given(case=pack_cases(), mistake=st.sampled_from(["none", "none", "shape", "pattern", "unknown"]))
def test_pack_unpack_match_einops_and_round_trip(case, mistake, backend):
    pattern, shapes = case
    if mistake == "shape":  # one tensor disagrees outside the packed axes
        shapes = shapes + [(9,) + shapes[0][1:] if shapes[0] else (9,)]
    elif mistake == "pattern":
        pattern = pattern.replace("*", "* *") if "i" in pattern else pattern + " i"
    tensors = _tensors(shapes, backend)
    try:
        expected, expected_ps = einops.pack(tensors, pattern)
    except Exception:
        with pytest.raises(EinopsError):
            pack(tensors, pattern)
        return
    packed, packed_shapes = pack(tensors, pattern)
    _equal(packed, expected)
    assert [tuple(s) for s in packed_shapes] == [tuple(s) for s in expected_ps]
    if mistake == "unknown" and packed_shapes:  # one shape given as -1 must be inferred
        at = len(packed_shapes) // 2
        packed_shapes = list(packed_shapes)
        packed_shapes[at] = (-1,)
    try:
        expected_pieces = einops.unpack(expected, packed_shapes, pattern)
    except Exception:
        with pytest.raises(EinopsError):
            unpack(packed, packed_shapes, pattern)
        return
    pieces = unpack(packed, packed_shapes, pattern)
    assert len(pieces) == len(expected_pieces)
    for piece, expected_piece in zip(pieces, expected_pieces):
        _equal(piece, expected_piece)
    if mistake == "none":
        for piece, original in zip(pieces, tensors):
            _equal(piece, original)


@pytest.mark.parametrize("call, fragment", [
    (lambda: pack([np.zeros((2, 3))], "i j"), "needs one '*'"),
    (lambda: pack([np.zeros((2, 3))], "i * i"), "appears twice"),
    (lambda: pack([np.zeros((2,))], "i * j"), "tensor #0 has shape (2,)"),
    (lambda: pack([], "i *"), "no tensors"),
    (lambda: pack([np.zeros((2, 3)), np.zeros((3, 3))], "i *"), "differ outside"),
    (lambda: unpack(np.zeros((2, 5)), [(2,), (-1,), (-1,)], "i *"), "more than one"),
    (lambda: unpack(np.zeros((2, 5)), [(2,), (4,)], "i *"), "hold 2 + 4 = 6 positions along '*', but that axis has length 5"),
    (lambda: unpack(np.zeros((2, 5)), [(2,), (2,)], "i *"), "hold 2 + 2 = 4 positions"),  # was reshape's "size 3"
    (lambda: unpack(np.zeros((2, 5)), [(2, 3), (-1,)], "i *"), "hold 6 = 6 positions"),
    (lambda: unpack(np.zeros((2, 5)), [(2,), (-1, 2)], "i *"), "does not split"),
    (lambda: unpack(np.zeros((2, 5, 1)), [(5,)], "i *"), "exactly 2 dimensions"),
    (lambda: pack([np.zeros((2, 3))], "_x *"), "underscore"),
    (lambda: pack((t for t in [np.zeros((2, 3))]), "i *"), "expected a list of tensors, got generator"),
    (lambda: unpack([[1, 2]], [(2,)], "i *"), "expected a numpy array or a torch tensor, got list"),
])
def test_errors_say_what_is_wrong(call, fragment):
    with pytest.raises(EinopsError) as caught:
        call()
    assert fragment in str(caught.value)


@pytest.mark.cuda
def test_pack_unpack_on_cuda_match_einops():
    tensors = [torch.randn(2, 3, device="cuda"), torch.randn(2, 4, 5, device="cuda")]
    packed, shapes = pack(tensors, "b *")
    expected, expected_shapes = einops.pack(tensors, "b *")
    assert packed.device == tensors[0].device and shapes == expected_shapes
    torch.testing.assert_close(packed, expected, rtol=0, atol=0)
    for piece, original in zip(unpack(packed, shapes, "b *"), tensors):
        torch.testing.assert_close(piece, original, rtol=0, atol=0)

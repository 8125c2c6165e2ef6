"""grammard.apply_mask_cpu (grammard's kernel, through the C ABI) against
a reference written with torch: every dtype, partial vocabularies, row
indices, strided logits."""

import numpy as np
import pytest
import torch

import grammard


def reference(logits, mask, indices, vocab):
    out = logits.clone()
    bits = np.unpackbits(mask.numpy().view(np.uint8), axis=1,
                         bitorder="little").astype(bool)
    cols = logits.shape[1]
    for k in range(mask.shape[0]):
        row = indices[k] if indices is not None else k
        allowed = np.zeros(cols, bool)
        n = min(cols, vocab if vocab is not None else bits.shape[1])
        allowed[:n] = bits[k, :n]
        out[row][torch.from_numpy(~allowed)] = float("-inf")
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16,
                                   torch.bfloat16])
@pytest.mark.parametrize("vocab", [None, 100, 77])
@pytest.mark.parametrize("with_indices", [False, True])
def test_cpu_apply_matches_torch(dtype, vocab, with_indices):
    g = torch.Generator().manual_seed(3)
    rows, cols = 5, 100
    logits = torch.randn(rows, cols, generator=g).to(dtype)
    k = 3 if with_indices else rows
    mask = torch.randint(-2**31, 2**31 - 1, (k, 4), generator=g,
                         dtype=torch.int64).to(torch.int32)
    indices = [4, 0, 2] if with_indices else None
    expect = reference(logits, mask, indices, vocab)
    grammard.apply_mask_cpu(logits, mask, indices=indices, vocab=vocab)
    assert torch.equal(torch.isinf(logits), torch.isinf(expect))
    assert torch.equal(logits[~torch.isinf(logits)],
                       expect[~torch.isinf(expect)])


def test_strided_logits_and_numpy_masks():
    wide = torch.zeros(3, 128)
    logits = wide[:, :64]  # rows 128 elements apart
    mask = np.array([[1, 0], [0, 1 << 31], [3, 0]], np.uint32)
    grammard.apply_mask_cpu(logits, mask)
    allowed = [(~torch.isinf(r)).nonzero().flatten().tolist() for r in logits]
    assert allowed == [[0], [63], [0, 1]]
    assert not torch.isinf(wide[:, 64:]).any()

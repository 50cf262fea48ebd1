"""The SGLang and vLLM recipes (dsatopk_capture.engines) against stand-in modules whose
functions have the engines' names and signatures and compute a top-k with numpy."""

import enum
import inspect
import os
import tempfile
import types
import unittest

import numpy as np

from dsatopk_capture import CaptureHook, read_records
from dsatopk_capture.engines import decode_lengths, install_sglang, install_vllm


def topk_rows(scores, starts, lengths, k):
    """Window-relative top-k per row, score descending, smaller index first; -1 padded."""
    out = np.full((scores.shape[0], k), -1, np.int32)
    for b in range(scores.shape[0]):
        window = scores[b, starts[b]:starts[b] + lengths[b]]
        order = np.lexsort((np.arange(window.size), -window))[:k]
        out[b, :order.size] = order
    return out


# ---- SGLang stand-in: sglang.srt.layers.attention.dsa.dsa_topk_backend -------------------------

class TopkTransformMethod(enum.IntEnum):
    PAGED = 1
    RAGGED = 2


class FakeEnvironment:
    fuse_topk = False


class DSATopKBackend(enum.Enum):
    SGL_KERNEL = "sgl-kernel"
    TORCH = "torch"

    def topk_func(self, score, lengths, topk, row_starts=None):
        starts = np.zeros_like(lengths) if row_starts is None else row_starts
        return topk_rows(score, starts, lengths, topk)

    def topk_transform(self, logits, lengths, topk, topk_transform_method, attn_metadata,
                       cu_seqlens_q_topk=None, topk_indices_offset=None, row_starts=None,
                       batch_idx_list=None, force_unfused_topk=False):
        if not FakeEnvironment.fuse_topk or force_unfused_topk:
            return self.topk_func(logits, lengths, topk, row_starts=row_starts)
        local = topk_rows(logits, row_starts, lengths, topk)   # a fused kernel, not topk_func
        table = attn_metadata.page_table_1
        return np.where(local >= 0, np.take_along_axis(table, np.maximum(local, 0), 1), -1)


# ---- vLLM stand-ins: vllm._custom_ops, torch.ops._C, SparseAttnIndexer --------------------------

def fake_prefill(logits, cu_seqlen_ks, cu_seqlen_ke, raw_topk_indices, num_rows, stride0,
                 stride1, topk_tokens):
    assert (stride0, stride1) == (logits.strides[0] // 4, 1)
    raw_topk_indices[:num_rows, :topk_tokens] = topk_rows(
        logits[:num_rows], cu_seqlen_ks, cu_seqlen_ke - cu_seqlen_ks, topk_tokens)


def fake_decode(logits, next_n, seq_lens, raw_topk_indices, num_rows, stride0, stride1,
                topk_tokens):
    lengths = np.array([seq_lens[r // next_n] - next_n + r % next_n + 1
                        for r in range(num_rows)])
    raw_topk_indices[:num_rows, :topk_tokens] = topk_rows(
        logits[:num_rows], np.zeros(num_rows, int), lengths, topk_tokens)


def fake_persistent_topk(logits, seq_lens, topk_indices, workspace, topk_tokens, max_seq_len):
    lengths = seq_lens.reshape(-1)
    topk_indices[:, :topk_tokens] = topk_rows(logits, np.zeros_like(lengths), lengths,
                                              topk_tokens)


def vllm_ops():
    return types.SimpleNamespace(top_k_per_row_prefill=fake_prefill,
                                 top_k_per_row_decode=fake_decode)


class SparseAttnIndexer:
    """Calls the op through the ops namespace at call time, as sparse_attn_indexer does."""

    def __init__(self, ops, layer):
        self.ops = ops
        self.k_cache = types.SimpleNamespace(prefix=f"model.layers.{layer}.self_attn.indexer")

    def forward_cuda(self, hidden_states, q_quant, k, weights):
        logits, ks, ke, buffer = hidden_states
        self.ops.top_k_per_row_prefill(logits, ks, ke, buffer, logits.shape[0],
                                       logits.strides[0] // 4, 1, buffer.shape[1])
        return buffer


class EngineTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.hook = CaptureHook(os.path.join(self.dir.name, "e.bin"), rank=0, compress=False,
                                metadata={"engine": "stand-in"})
        self.addCleanup(self.hook.close)

    def records(self):
        self.hook.close()
        return list(read_records(self.hook.path))


class SGLang(EngineTest):
    def test_signatures_kept(self):
        before = {name: inspect.signature(getattr(DSATopKBackend, name))
                  for name in ("topk_func", "topk_transform")}
        installed = install_sglang(self.hook, DSATopKBackend)
        self.addCleanup(installed.remove)
        for name, signature in before.items():
            self.assertEqual(inspect.signature(getattr(DSATopKBackend, name)), signature)

    def test_unfused_and_fused(self):
        installed = install_sglang(self.hook, DSATopKBackend)
        rng = np.random.default_rng(5)
        logits = np.maximum(rng.standard_normal((4, 300)), 0).astype(np.float32)
        lengths = np.array([300, 120, 7, 0], np.int32)
        starts = np.array([0, 100, 293, 5], np.int32)
        selected = DSATopKBackend.SGL_KERNEL.topk_func(logits, lengths - 0, 16)
        metadata = types.SimpleNamespace(page_table_1=np.arange(4 * 300).reshape(4, 300) * 2)
        unfused = DSATopKBackend.TORCH.topk_transform(
            logits, lengths, 16, TopkTransformMethod.PAGED, metadata, None, None, starts)
        FakeEnvironment.fuse_topk = True
        try:
            fused = DSATopKBackend.SGL_KERNEL.topk_transform(
                logits, lengths, 16, TopkTransformMethod.PAGED, metadata, row_starts=starts)
        finally:
            FakeEnvironment.fuse_topk = False
        installed.remove()
        DSATopKBackend.SGL_KERNEL.topk_func(logits, lengths, 16)   # after remove: not captured
        self.assertIn(-1, unfused)
        self.assertTrue((fused[fused >= 0] % 2 == 0).all())
        first, second, third = self.records()
        self.assertEqual(first.engine_indices.tolist(), selected.tolist())
        self.assertIsNone(first.row_starts)
        self.assertEqual(first.metadata["topk_site"], "sglang.topk_func")
        self.assertEqual(first.metadata["topk_backend"], "sgl-kernel")
        self.assertEqual(second.engine_indices.tolist(), unfused.tolist())   # captured once
        self.assertEqual(second.row_starts.tolist(), starts.tolist())
        self.assertEqual(second.metadata["topk_backend"], "torch")
        self.assertIsNone(third.engine_indices)
        self.assertEqual((third.metadata["topk_site"], third.metadata["fused"]),
                         ("sglang.topk_transform", "PAGED"))
        for record in (first, second, third):
            self.assertEqual(record.scores.tobytes(), logits.tobytes())
            self.assertEqual(record.lengths.tolist(), lengths.tolist())
            self.assertEqual(record.k, 16)


class VLLM(EngineTest):
    def test_prefill_through_the_indexer(self):
        ops = vllm_ops()
        installed = install_vllm(self.hook, ops, types.SimpleNamespace(), SparseAttnIndexer)
        self.addCleanup(installed.remove)
        rng = np.random.default_rng(9)
        logits = rng.standard_normal((6, 500)).astype(np.float32)
        ks = np.array([0, 0, 100, 100, 350, 490], np.int32)
        ke = np.array([40, 100, 260, 300, 500, 500], np.int32)
        buffer = np.full((8, 64), -1, np.int32)
        # k 64 exceeds the window of rows 0 and 5: the engine pads with -1.
        out = SparseAttnIndexer(ops, 3).forward_cuda((logits[:5], ks, ke, buffer), None, None,
                                                     None)
        expected = out[:5].copy()
        buffer[:] = -1       # the next layer clears the shared buffer
        SparseAttnIndexer(ops, 4).forward_cuda((logits, ks, ke, buffer[:6]), None, None, None)
        first, second = self.records()
        self.assertEqual(first.metadata["layer"], 3)
        self.assertEqual(second.metadata["layer"], 4)
        self.assertEqual(first.metadata["topk_site"], "vllm.top_k_per_row_prefill")
        self.assertEqual(first.engine_indices.tolist(), expected.tolist())
        self.assertEqual(first.row_starts.tolist(), ks[:5].tolist())
        self.assertEqual(first.lengths.tolist(), (ke - ks)[:5].tolist())
        self.assertEqual(first.scores.tobytes(), logits[:5].tobytes())
        self.assertEqual(second.rows, 6)

    def test_decode_and_persistent(self):
        ops = vllm_ops()
        torch_ops = types.SimpleNamespace(persistent_topk=fake_persistent_topk)
        installed = install_vllm(self.hook, ops, torch_ops, indexer=False)
        rng = np.random.default_rng(2)
        logits = rng.standard_normal((6, 256)).astype(np.float32)
        seq_lens = np.array([100, 256, 30], np.int32)
        buffer = np.full((6, 32), -1, np.int32)
        ops.top_k_per_row_decode(logits, 2, seq_lens, buffer, 6, 256, 1, 32)
        decoded = buffer.copy()
        per_row = np.array([[5], [256], [0]], np.int32)
        out = np.full((3, 32), -1, np.int32)
        torch_ops.persistent_topk(logits[:3], per_row, out, None, 32, 256)
        with self.assertLogs("dsatopk_capture", "WARNING"):
            ops.top_k_per_row_decode(logits, 4, seq_lens, buffer, 6, 256, 1, 32)
        installed.remove()
        self.assertIs(ops.top_k_per_row_decode, fake_decode)
        self.assertIs(torch_ops.persistent_topk, fake_persistent_topk)
        first, second = self.records()
        self.assertEqual(first.lengths.tolist(), [99, 100, 255, 256, 29, 30])
        self.assertEqual(first.engine_indices.tolist(), decoded.tolist())
        self.assertEqual(second.metadata["topk_site"], "vllm.persistent_topk")
        self.assertEqual(second.lengths.tolist(), [5, 256, 0])
        self.assertEqual(second.engine_indices.tolist(), out.tolist())
        stats = self.hook.stats()
        self.assertEqual((stats["calls"], stats["refused"]), (3, 1))

    def test_decode_lengths(self):
        self.assertEqual(decode_lengths(np.array([3, 10]), 4, 2).tolist(), [2, 3, 9, 10])
        self.assertEqual(decode_lengths(np.array([[1], [0]]), 2, 1).tolist(), [1, 0])
        self.assertEqual(decode_lengths(np.array([1]), 3, 3).tolist(), [0, 0, 1])


if __name__ == "__main__":
    unittest.main()

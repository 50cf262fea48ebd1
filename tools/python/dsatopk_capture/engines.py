"""Capture hooks for the DSA indexer top-k call sites of SGLang and vLLM.

Each install function wraps the engine's own top-k entry points in place (the names and
arguments are those of the engines' sources, named below) and returns an Installed whose
remove() puts the originals back. A wrapper calls the original first, then offers the call to
the hook; it never raises into the engine: a call the hook cannot record is logged and counted
(hook.stats()["refused"]). Engines pad short rows, so k may exceed a row here.

Python wrappers run only where the engine runs Python: capture with CUDA graphs off (SGLang
--disable-cuda-graph, vLLM enforce_eager=True); calls made during graph capture are skipped and
counted (stats()["skipped_graph"]).
"""

import functools
import logging
import re
import threading

from . import staging

log = logging.getLogger("dsatopk_capture")

SGLANG_TOPK_MODULE = "sglang.srt.layers.attention.dsa.dsa_topk_backend"
VLLM_OPS_MODULE = "vllm._custom_ops"
VLLM_INDEXER_MODULE = "vllm.model_executor.layers.sparse_attn_indexer"


class Installed:
    """What an install function changed; remove() restores the originals (last in, first out)."""

    def __init__(self):
        self._restore = []

    def replace(self, owner, name, wrapper):
        original = getattr(owner, name)
        setattr(owner, name, wrapper)
        self._restore.append((owner, name, original))
        return original

    def remove(self):
        while self._restore:
            owner, name, original = self._restore.pop()
            setattr(owner, name, original)


_warned = set()


def _warn_once(site, error):
    key = (site, type(error).__name__, str(error)[:80])
    if key not in _warned:
        _warned.add(key)
        log.warning("dsatopk_capture: %s: call not captured: %s", site, error)


def _refuse(hook, site, error):
    """A call whose arrays could not even be assembled: counted as offered and refused."""
    hook._count_unoffered("refused")
    _warn_once(site, error)


def _graph_capture(hook, *tensors):
    """True (and the call counted) inside CUDA graph capture: the wrapper then does nothing,
    not even the arithmetic on lengths, which would be captured into the engine's graph."""
    arrays = {str(i): t for i, t in enumerate(tensors)}
    if staging.capturing_graph(arrays):
        hook._count_unoffered("skipped_graph")
        return True
    return False


def _offer(hook, site, scores, lengths, k, row_starts=None, engine_indices=None, **metadata):
    """Offers one call to the hook; never raises into the engine."""
    try:
        with hook.context(topk_site=site):
            hook._offer(scores, lengths, k, row_starts, None, 0, None, engine_indices,
                        metadata, allow_k_over_row=True)
    except Exception as error:  # noqa: BLE001 -- the engine's call already succeeded
        _warn_once(site, error)


# ---- SGLang ------------------------------------------------------------------------------------

def install_sglang(hook, backend=None):
    """Wraps SGLang's DSA top-k backend, DSATopKBackend in
    sglang.srt.layers.attention.dsa.dsa_topk_backend (the class is imported when not given):

    - topk_func(self, score, lengths, topk, row_starts=None) -> (rows, topk) int32: the
      unfused top-k (sgl-kernel fast_topk_v2, torch or flashinfer by backend), indices
      relative to each row's window, -1 padded. Captured with the engine's indices.
    - topk_transform(self, logits, lengths, topk, topk_transform_method, attn_metadata, ...):
      the entry DSAIndexerMetadata.topk_transform calls. When it takes the unfused path
      (SGLANG_DSA_FUSE_TOPK=false, or force_unfused_topk) the call is captured once, by
      topk_func; when it runs a fused kernel (top-k and page-table or ragged transform in one
      launch), the scores, lengths and row starts are captured without engine indices (the
      fused output is in the KV-cache index space, not the window's) and the metadata says
      "fused": the transform method's name.
    """
    if backend is None:
        import importlib
        backend = importlib.import_module(SGLANG_TOPK_MODULE).DSATopKBackend
    installed = Installed()
    inside = threading.local()

    original_func = backend.topk_func

    @functools.wraps(original_func)
    def topk_func(self, score, lengths, topk, row_starts=None):
        out = original_func(self, score, lengths, topk, row_starts=row_starts)
        inside.unfused = True
        _offer(hook, "sglang.topk_func", score, lengths, topk, row_starts=row_starts,
               engine_indices=out, topk_backend=getattr(self, "value", str(self)))
        return out

    original_transform = backend.topk_transform

    @functools.wraps(original_transform)
    def topk_transform(self, logits, lengths, topk, topk_transform_method, attn_metadata,
                       *args, **kwargs):
        outer = getattr(inside, "unfused", None)
        inside.unfused = False
        try:
            out = original_transform(self, logits, lengths, topk, topk_transform_method,
                                     attn_metadata, *args, **kwargs)
            if not inside.unfused:
                row_starts = kwargs.get("row_starts", args[2] if len(args) > 2 else None)
                method = getattr(topk_transform_method, "name", str(topk_transform_method))
                _offer(hook, "sglang.topk_transform", logits, lengths, topk,
                       row_starts=row_starts, topk_backend=getattr(self, "value", str(self)),
                       fused=method)
            return out
        finally:
            inside.unfused = outer

    installed.replace(backend, "topk_func", topk_func)
    installed.replace(backend, "topk_transform", topk_transform)
    return installed


# ---- vLLM --------------------------------------------------------------------------------------

def decode_lengths(seq_lens, rows, next_n):
    """The window length of each decode row: seq_lens with one entry per row as they are, or
    one per request with next_n rows each, row r of request b = r // next_n seeing
    seq_lens[b] - next_n + r % next_n + 1 scores (the causal rule of vLLM's decode top-k)."""
    flat = seq_lens.reshape(-1)
    count = int(flat.shape[0])
    if count == rows:
        lengths = flat
    elif count * next_n == rows:
        if staging.is_tensor(flat):
            torch = staging.torch_module()
            offsets = torch.arange(rows, device=flat.device, dtype=flat.dtype) % next_n
            lengths = flat.repeat_interleave(next_n) - next_n + offsets + 1
        else:
            import numpy as np
            offsets = np.arange(rows, dtype=flat.dtype) % next_n
            lengths = np.repeat(flat, next_n) - next_n + offsets + 1
    else:
        from .records import CaptureInputError
        raise CaptureInputError(f"decode: {count} seq_lens for {rows} rows with next_n "
                                f"{next_n}: neither one per row nor one per request")
    return lengths.clip(min=0) if staging.is_tensor(lengths) else lengths.clip(0)


_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")


def install_vllm(hook, ops=None, torch_ops=None, indexer=None):
    """Wraps vLLM's sparse-attention indexer top-k calls (vllm/model_executor/layers/
    sparse_attn_indexer.py, function sparse_attn_indexer):

    - ops.top_k_per_row_prefill(logits, cu_seqlen_ks, cu_seqlen_ke, raw_topk_indices,
      num_rows, stride0, stride1, topk_tokens), ops being vllm._custom_ops: row r's window is
      [cu_seqlen_ks[r], cu_seqlen_ke[r]) of logits[r]; the indices written are relative to it.
    - ops.top_k_per_row_decode(logits, next_n, seq_lens, raw_topk_indices, num_rows, stride0,
      stride1, topk_tokens): windows from 0, lengths by decode_lengths.
    - torch_ops.persistent_topk and torch_ops.cooperative_topk(logits, seq_lens, topk_indices,
      workspace, topk_tokens, max_seq_len), torch_ops being torch.ops._C (the decode path on
      CUDA for topk_tokens 512, 1024, 2048), when the namespace has them.
    - indexer (SparseAttnIndexer, imported when available): its forward_cuda sets the layer
      number of the calls it makes from the KV-cache layer name ("...layers.3....").

    The ops are looked up on their module at each call by vLLM, so the wrappers take effect
    for calls made after install.
    """
    if ops is None:
        import importlib
        ops = importlib.import_module(VLLM_OPS_MODULE)
    if torch_ops is None and staging.torch_module() is not None:
        torch_ops = getattr(staging.torch_module().ops, "_C", None)
    if indexer is None:
        try:
            import importlib
            indexer = importlib.import_module(VLLM_INDEXER_MODULE).SparseAttnIndexer
        except (ImportError, AttributeError):
            indexer = None
    installed = Installed()

    prefill = ops.top_k_per_row_prefill

    @functools.wraps(prefill)
    def top_k_per_row_prefill(logits, cu_seqlen_ks, cu_seqlen_ke, raw_topk_indices, num_rows,
                              stride0, stride1, topk_tokens):
        result = prefill(logits, cu_seqlen_ks, cu_seqlen_ke, raw_topk_indices, num_rows,
                         stride0, stride1, topk_tokens)
        if _graph_capture(hook, logits):
            return result
        n = int(num_rows)
        _offer(hook, "vllm.top_k_per_row_prefill", logits[:n],
               cu_seqlen_ke[:n] - cu_seqlen_ks[:n], topk_tokens,
               row_starts=cu_seqlen_ks[:n], engine_indices=raw_topk_indices[:n, :topk_tokens])
        return result

    decode = ops.top_k_per_row_decode

    @functools.wraps(decode)
    def top_k_per_row_decode(logits, next_n, seq_lens, raw_topk_indices, num_rows, stride0,
                             stride1, topk_tokens):
        result = decode(logits, next_n, seq_lens, raw_topk_indices, num_rows, stride0, stride1,
                        topk_tokens)
        if _graph_capture(hook, logits):
            return result
        n = int(num_rows)
        try:
            lengths = decode_lengths(seq_lens, n, int(next_n))
        except ValueError as error:
            _refuse(hook, "vllm.top_k_per_row_decode", error)
            return result
        _offer(hook, "vllm.top_k_per_row_decode", logits[:n], lengths, topk_tokens,
               engine_indices=raw_topk_indices[:n, :topk_tokens])
        return result

    installed.replace(ops, "top_k_per_row_prefill", top_k_per_row_prefill)
    installed.replace(ops, "top_k_per_row_decode", top_k_per_row_decode)

    for name in ("persistent_topk", "cooperative_topk"):
        if torch_ops is not None and hasattr(torch_ops, name):
            installed.replace(torch_ops, name, _wrap_radix_decode(hook, name,
                                                                  getattr(torch_ops, name)))

    if indexer is not None and hasattr(indexer, "forward_cuda"):
        forward = indexer.forward_cuda

        @functools.wraps(forward)
        def forward_cuda(self, *args, **kwargs):
            prefix = getattr(getattr(self, "k_cache", None), "prefix", "") or ""
            match = _LAYER.search(prefix)
            if match is None:
                return forward(self, *args, **kwargs)
            with hook.context(layer=int(match.group(1))):
                return forward(self, *args, **kwargs)

        installed.replace(indexer, "forward_cuda", forward_cuda)
    return installed


def _wrap_radix_decode(hook, name, original):
    site = "vllm." + name

    @functools.wraps(original)
    def wrapper(logits, seq_lens, topk_indices, workspace, topk_tokens, max_seq_len):
        result = original(logits, seq_lens, topk_indices, workspace, topk_tokens, max_seq_len)
        if _graph_capture(hook, logits):
            return result
        rows = int(logits.shape[0])
        flat = int(seq_lens.reshape(-1).shape[0])
        try:
            lengths = decode_lengths(seq_lens, rows, max(1, rows // max(1, flat)))
        except ValueError as error:
            _refuse(hook, site, error)
            return result
        _offer(hook, site, logits, lengths, topk_tokens,
               engine_indices=topk_indices[:rows, :topk_tokens])
        return result

    return wrapper

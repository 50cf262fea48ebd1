"""dsatopk-capture: capture the inputs of a serving engine's DSA indexer top-k calls for
dsatopk-audit (docs/FORMAT.md), without stalling the engine.

    from dsatopk_capture import CaptureHook, read_records

    hook = CaptureHook("captures/{rank}.bin", metadata={"engine": "sglang"})
    hook.capture(scores, lengths, k, engine_indices=selected, layer=3, step=11)
    hook.close()
    for record in read_records("captures/0.bin"):
        ...

See README.md beside this package.
"""

from .hook import CaptureHook, check_contract, detect_rank
from .records import (CaptureError, CaptureInputError, CaptureRecord, PreparedRecord, Tail,
                      append_record, check_tail, encode_record, prepare_record, read_records,
                      repair_tail)
from .sampling import Sampler

__version__ = "0.1.0"

__all__ = ["CaptureHook", "CaptureError", "CaptureInputError", "CaptureRecord",
           "PreparedRecord", "Sampler", "Tail", "append_record", "check_contract",
           "check_tail", "detect_rank", "encode_record", "prepare_record", "read_records",
           "repair_tail", "__version__"]

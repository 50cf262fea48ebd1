#!/usr/bin/env python3
"""Writes the seed corpora of tests/fuzz/corpus/ (run from anywhere; overwrites the seeds).

Small valid inputs of every shape the harnesses read, plus a few near misses, so that libFuzzer
starts from the interesting paths instead of having to discover magic numbers and checksums.
Each seed starts with the harness's mode byte (see the comment at the top of each harness)."""
import json
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "python"))
import dsatopk_capture as capture  # noqa: E402

CORPUS = os.path.join(HERE, "corpus")


def write(harness, name, data):
    directory = os.path.join(CORPUS, harness)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name), "wb") as f:
        f.write(data)


def capture_seeds():
    rng = np.random.default_rng(7)
    scores = np.round(rng.standard_normal((3, 12)).astype(np.float32), 1)
    scores[1, 2] = np.float32("-inf")
    scores[2, :] = 0.0
    lengths = [12, 7, 0]
    plain = capture.encode_record(scores, lengths, 4, metadata={"engine": "fuzz"})
    full = capture.encode_record(
        scores, [8, 5, 3], 3, row_starts=[0, 4, 9],
        page_table=np.array([[3, 1, 0], [2, 2, 5], [7, 0, 1]], dtype=np.int32), page_size=4,
        page_table_row_starts=[0, 1, 0],
        engine_indices=np.array([[12, 13, 1], [9, 8, -1], [28, 29, 30]], dtype=np.int32),
        metadata={"layer": 3, "note": "row starts, page table, engine indices"})
    compressed = capture.encode_record(scores, lengths, 2, compress=True)
    write("fuzz_capture", "plain", b"\x00" + plain)
    write("fuzz_capture", "full-fixed", b"\x01" + full)
    write("fuzz_capture", "compressed", b"\x00" + compressed)
    write("fuzz_capture", "two-records", b"\x01" + plain + compressed)
    # Mode 3: the harness compresses each payload itself (the body is uncompressed records).
    write("fuzz_capture", "harness-zlib", b"\x03" + full + plain)
    write("fuzz_capture", "truncated", b"\x00" + plain + full[: len(full) // 2])
    write("fuzz_capture", "garbage-tail", b"\x00" + plain + b"DSATOPK\x0bgarbage")
    write("fuzz_capture", "empty", b"\x00")


def npy_bytes(array, version=(1, 0), descr=None, fortran=False, header_pad=64):
    descr = descr or array.dtype.str
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (
        descr, "True" if fortran else "False", repr(tuple(array.shape)))
    prefix = 10 if version[0] == 1 else 12
    total = prefix + len(header) + 1
    header += " " * ((-total) % header_pad) + "\n"
    length = struct.pack("<H", len(header)) if version[0] == 1 else struct.pack("<I", len(header))
    encoding = "latin1" if version[0] < 3 else "utf-8"
    return b"\x93NUMPY" + bytes(version) + length + header.encode(encoding) + array.tobytes()


def npy_seeds():
    f32 = np.array([[1.5, -0.0, np.inf], [np.nan, 1e-40, -2.0]], dtype=np.float32)
    f16 = np.array([1.0, 65504.0, 6e-8, -np.inf], dtype=np.float16)
    i64 = np.array([[0, -1], [2**31 - 1, -2**31]], dtype=np.int64)
    i32 = np.array(7, dtype=np.int32)
    write("fuzz_npy", "f32-v1", b"\x00" + npy_bytes(f32))
    write("fuzz_npy", "f16-v2", b"\x00" + npy_bytes(f16, version=(2, 0)))
    write("fuzz_npy", "i64-v3-file", b"\x01" + npy_bytes(i64, version=(3, 0)))
    write("fuzz_npy", "i32-scalar", b"\x00" + npy_bytes(i32))
    write("fuzz_npy", "fortran", b"\x00" + npy_bytes(f32, fortran=True))
    write("fuzz_npy", "big-endian", b"\x00" + npy_bytes(f32.astype(">f4"), descr=">f4"))
    write("fuzz_npy", "i64-out-of-range", b"\x00" + npy_bytes(np.array([2**40], dtype=np.int64)))


def safetensors_bytes(tensors, metadata=None):
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((-len(text)) % 8)
    return struct.pack("<Q", len(text)) + text + data


def safetensors_seeds():
    scores = np.array([[0.5, 1.0, 1.0, -3.0]], dtype=np.float32)
    bf16 = (np.array([1.0, -2.5, np.nan], dtype=np.float32).view(np.uint32) >> 16).astype("<u2")
    one = safetensors_bytes({"scores": ("F32", scores.shape, scores.tobytes())})
    several = safetensors_bytes({
        "scores": ("BF16", bf16.shape, bf16.tobytes()),
        "lengths": ("I64", (2,), np.array([4, 3], dtype=np.int64).tobytes()),
        "half": ("F16", (2,), np.array([1.0, -0.0], dtype=np.float16).tobytes()),
        "idx": ("I32", (1, 2), np.array([[1, 0]], dtype=np.int32).tobytes()),
    }, metadata={"model": "fuzz"})
    write("fuzz_safetensors", "one-memory", b"\x00" + b"\x00" + one)
    write("fuzz_safetensors", "named-memory", b"\x00" + b"lengths\x00" + several)
    write("fuzz_safetensors", "bf16-file", b"\x03" + b"scores\x00" + several)
    write("fuzz_safetensors", "only-file", b"\x01" + b"\x00" + one)
    write("fuzz_safetensors", "npy-through-loader", b"\x01" + b"\x00" +
          npy_bytes(np.array([1.0, 2.0], dtype=np.float32)))
    write("fuzz_safetensors", "several-unnamed", b"\x00" + b"\x00" + several)


def json_seeds():
    report = {
        "schema": "dsatopk-audit/report",
        "records": [
            {"file": "a.bin", "index": 0, "backends": [
                {"name": "radix", "flapping_rows": [{"row": 1}], "wrong_rows": [3],
                 "graph": {"flapping_rows": [{"row": 2}]}},
                {"name": "bitonic", "batch_invariance": {"dependent_rows": [{"row": 0}]}}]},
            {"index": 1, "backends": [{"name": "radix", "predicted_vs_observed": {
                "wrong_rows": [2], "wrong_not_predicted_overflow_list": [1],
                "set_flapping_unexplained_list": [{"row": 0}]}}]},
        ],
    }
    text = json.dumps(report).encode()
    write("fuzz_json_report", "read-object", b"\x00" + b'{"a": [1, 2.5e3, "x\\u00e9"], "b": null}')
    write("fuzz_json_report", "extract-report", b"\x01" + text)
    write("fuzz_json_report", "extract-report-backend", b"\x08" + text)  # 8 % 7 == 1, bit 3
    write("fuzz_json_report", "metadata", b"\x02" + b'{"engine": "sglang", "layer": 3}')
    write("fuzz_json_report", "metadata-not-object", b"\x02" + b'[1]')
    gate_report = gate_report_json()
    write("fuzz_json_report", "gate-report", b"\x03" + json.dumps(gate_report).encode())
    baseline = {"schema": "dsatopk-audit/baseline", "schema_version": 1, "complete": True,
                "stop_reason": None, "context": gate_report["context"], "records": [
                    {"file": "captures/a.bin", "index": 0, "payload_sha256": "1" * 64, "k": 16,
                     "rows": 4, "reference": {"output_sha256": "a" * 64},
                     "backends": [{"name": "bitonic", "level": "gpu_to_gpu",
                                   "claims": {"exact_set": True}, "status": "ok",
                                   "reason": None, "verdict": "pass", "verdict_reasons": [],
                                   "reps": 2, "distinct_outputs": 1, "distinct_sets": 1,
                                   "equals_reference_reps": 2, "output_sha256": ["a" * 64],
                                   "set_sha256": ["f" * 64]}]}]}
    write("fuzz_json_report", "gate-baseline", b"\x03" + json.dumps(baseline).encode())
    policy = {
        "schema": "dsatopk-audit/policy", "schema_version": 1,
        "backends": {"radix": {"level": "not_guaranteed", "allow": ["flapping", "tie_rule"]}},
        "records": [{"file": "a.bin", "index": 0, "backend": "bitonic",
                     "allow": ["baseline_mismatch"]}],
        "known_failures": [{"backend": "radix", "match": "flapping", "until": "2027-01-01",
                            "reason": "issue 6"}],
        "allow_missing": False, "allow_incomplete": True,
    }
    write("fuzz_json_report", "gate-policy", b"\x04" + json.dumps(policy).encode())
    shard = json.loads(json.dumps(gate_report))
    shard["context"]["shard"] = {"index": 0, "count": 2}
    write("fuzz_json_report", "gate-merge-shard", b"\x05" + json.dumps(shard).encode())
    write("fuzz_json_report", "gate-merge-report", b"\x05" + json.dumps(gate_report).encode())
    write("fuzz_json_report", "gate-command", b"\x06" + json.dumps(gate_report).encode())
    write("fuzz_json_report", "gate-command-self", b"\x0d" + json.dumps(gate_report).encode())


def json_strict_seeds():
    """One seed per refusal of the strict dialect (src/common/json_strict.h), a few accepted
    texts, and mode 1 (schema_version checked) for the schema_version cases."""
    seeds = {
        "accepted-document": b'\x01{"schema": "x", "schema_version": 1, "a": [true, false, null, '
                             b'-0, 0.5, 1e-320, 12e+3, "\\u00e9\\ud83d\\ude00\\/\\n"], "b": {}}',
        "accepted-unicode": b'\x00["\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", {"\xc3\xa9": []}]',
        "accepted-scalar": b"\x00 \t\r\n42 \n",
        "trailing-garbage": b'\x00{"a": 1} x',
        "second-document": b'\x00{"a": 1}\n{"a": 2}',
        "duplicate-key": b'\x00{"a": 1, "b": {"c": 2, "c": 3}}',
        "duplicate-key-escaped": b'\x00{"a": 1, "\\u0061": 2}',
        "nul-in-key": b'\x00{"a\x00b": 1}',
        "escaped-nul-in-key": b'\x00{"a\\u0000b": 1}',
        "escaped-nul-in-value": b'\x00["\\u0000"]',
        "control-in-string": b'\x00["a\tb\x1bc"]',
        "overflow": b"\x00[1e999, -1e999]",
        "schema-version-float": b'\x01{"schema_version": 1.0}',
        "schema-version-exponent": b'\x01{"schema_version": 1e0}',
        "schema-version-negative": b'\x01{"schema_version": -0}',
        "schema-version-long": b'\x01{"schema_version": 1234567}',
        "byte-order-mark": b"\x00\xef\xbb\xbf{}",
        "lone-surrogate": b'\x00["\\ud800", "\\udc00x"]',
        "trailing-comma": b"\x00[1, 2,]",
        "leading-zero": b"\x00[01]",
        "bare-point": b"\x00[1., .5]",
        "deep": b"\x00" + b"[" * (257) + b"]" * 257,
        "empty": b"\x00",
        "white-space-only": b"\x00 \n\t",
        "invalid-utf8": b'\x00["\xc0\xaf", "\xed\xa0\x80", "\xff"]',
        "not-json-literals": b"\x00[NaN, Infinity, True]",
        "unterminated": b'\x00{"a": "b',
    }
    for name, data in seeds.items():
        write("fuzz_json_strict", name, data)


def gate_report_json():
    """The shape tests/test_gate.c builds: what `run` writes and gate reads."""
    def digest(c):
        return c * 64
    kinds = ["short", "duplicate", "out_of_range", "wrong_set", "tie_rule", "order", "padding",
             "page_translation", "raw_misaligned"]

    def backend(name, level, reps):
        distinct = "".join(sorted(set(reps)))
        return {
            "name": name, "level": level, "claims": {"exact_set": level != "not_guaranteed"},
            "status": "ok", "reason": None, "verdict": "pass", "verdict_reasons": [],
            "reps": len(reps), "output_sha256_per_rep": [digest(r) for r in reps],
            "set_sha256_per_rep": [digest("f") for _ in reps],
            "distinct_outputs": len(distinct), "distinct_sets": 1,
            "equals_reference_reps": reps.count("a"),
            "violations": {k: {"total_rows": 0, "max_rows_per_rep": 0, "rows": 0} for k in kinds},
            "flapping_rows_total": 2 if len(distinct) > 1 else 0,
            "flapping_rows": [{"row": 1, "reps_differing": 1}] if len(distinct) > 1 else [],
            "predicted_vs_observed": {
                "predicted_overflow_rows": 0, "wrong_rows": 0, "wrong_not_predicted_overflow": 0,
                "set_flapping_unexplained": 0, "wrong_not_predicted_overflow_list": [],
                "set_flapping_unexplained_list": []},
            "time_breakdown_ms": {
                "device_open_ms": 210.5, "setup_ms": 3.25, "kernel_ms": 1.5,
                "launch_overhead_ms": 0.2, "noise_wait_ms": 7.0, "row_hash_ms": 0.05,
                "copy_ms": 0.01, "hash_ms": 0.02, "check_ms": 0.03, "dump_ms": 0,
                "batch_invariance_ms": 0, "other_ms": 0.1, "total_ms": 222.66},
            "host_work": {"gpu_prefilter": True, "reps_matched_on_gpu": len(reps) - len(distinct),
                          "outputs_copied": len(distinct), "outputs_hashed": len(distinct),
                          "outputs_checked": len(distinct)},
        }
    return {
        "schema": "dsatopk-audit/report", "schema_version": 1, "complete": True,
        "stop_reason": None, "exit_code": 0,
        "context": {"host": "fuzz", "utc_time": "2026-11-29T10:00:00Z",
                    "device": {"name": "NVIDIA H200"}, "gpu_prefilter": True},
        "records": [{
            "file": "captures/a.bin", "index": 0, "global_index": 0, "rows": 4,
            "source_rows": None, "k": 16, "payload_sha256": digest("1"),
            "reference": {"output_sha256": digest("a"), "set_sha256": digest("f")},
            "time_breakdown_ms": {"reference_ms": 1.5, "census_ms": 0.5, "backends_ms": 450.0,
                                  "other_ms": 0.25, "total_ms": 452.25},
            "backends": [backend("bitonic", "gpu_to_gpu", "aa"),
                         backend("radix", "not_guaranteed", "aab")],
        }],
        "input_errors": [],
    }


def option_seeds():
    seeds = {
        "parse-run": "parse\nrun\n--backends\nradix,bitonic\n--reps\n3\n--noise\nmixed\n--rows\n"
                     "0-3,7\n--records\n1\n--k\n2048\n--graph\n--batch-invariance\n--seed\n99\n"
                     "--no-gpu-prefilter\nx.bin",
        "parse-bench": "parse\nbench\n--shapes\n16x131072:2048,64x8192:512\n--families\nrelu\n"
                       "--replays\n100\n--backends\nsort",
        "parse-devices": "parse\n--emulate-smem-per-sm\n101376\ndevices\n--k\n512,2048\n--length\n"
                         "4096\n--rows\n2\n--format\njson",
        "parse-synth": "parse\nsynth\n-f\nindexer\n-b\n2\n-L\n64\n-k\n8\n--rho\n0.5\n--mu\n-1\n-z",
        "parse-census": "parse\ncensus\n-k\n1,0,5\n-r\n0,1\n-f\ntable",
        "parse-extract": "parse\nextract\na.bin\n--records\n0\n--rows\n1-2\n-o\nx.bin",
        "full-inspect": "full\ninspect\n--verify\n--format\njson\na.bin\nb.bin",
        "full-census": "full\ncensus\n-k\n2,0\n-f\ntable\na.bin",
        "full-diff": "full\ndiff\na.bin\nb.bin\n--k\n2\n--format\njson\n-o\nd.json",
        "full-extract": "full\nextract\na.bin\n--records\n0,1\n--rows\n1,3\n-o\nx.bin\n--compress",
        "full-extract-report": "full\nextract\na.bin\n--from-report\nr.json\n-o\nx.bin",
        "full-import": "full\nimport\n--scores\ns.safetensors:scores\n--lengths\n"
                       "s.safetensors:lengths\n--k\n3\n--metadata\n@m.json\n-o\ni.bin",
        "full-import-npy": "full\nimport\n--scores\nt.npy\n--k\n2\n--metadata\n{\"a\":1}\n-o\n"
                           "i.bin",
        "full-gate": "full\ngate\n--baseline\nreport.json\n--now\n2026-11-29\n--format\ntable\n"
                     "report.json",
        "full-merge": "full\nmerge\n-o\nmerged.json\nreport.json",
        "parse-gate": "parse\ngate\n--baseline\nb.json\n--policy\np.json\n--now\n"
                      "2026-11-29T12:00:00Z\n--out\n-",
        "values": "values\n0\n18446744073709551615\n4294967296\n1,2,3\n0-5,9\n3-1\n,\n00012",
    }
    for name, text in seeds.items():
        write("fuzz_options", name, text.encode())


if __name__ == "__main__":
    capture_seeds()
    npy_seeds()
    safetensors_seeds()
    json_seeds()
    json_strict_seeds()
    option_seeds()

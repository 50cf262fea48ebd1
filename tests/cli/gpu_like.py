#!/usr/bin/env python3
# gpu_like.py IN OUT [MUTATION...]: a GPU-less `run` report made to look like one from a GPU:
# every backend ok with 3 reps; gpu_to_gpu reps carry the reference hash, run_to_run one hash of
# its own, not_guaranteed three (flapping, no violation). Mutations: sort-flaps, radix-wrong,
# filtered-unsupported, drop-record-2, broken-hash (tests/cli/test_gate.sh, test_documents.sh).
import hashlib, json, sys
report = json.load(open(sys.argv[1]))
mutations = sys.argv[3:]
def h(text):
    return hashlib.sha256(text.encode()).hexdigest()
for record in report["records"]:
    for backend in record["backends"]:
        name, level = backend["name"], backend["level"]
        if level == "gpu_to_gpu":
            reps = [record["reference"]["output_sha256"]] * 3
        elif level == "run_to_run":
            reps = [h(name + record["payload_sha256"])] * 3
        else:
            reps = [h(name + record["payload_sha256"] + str(i)) for i in range(3)]
        backend.update(status="ok", reason=None, verdict="pass", verdict_reasons=[], reps=3,
                       output_sha256_per_rep=reps, set_sha256_per_rep=[record["reference"]["set_sha256"]] * 3)
        if "sort-flaps" in mutations and name == "sort" and record["index"] == 0:
            reps[2] = h("another output")
        if "radix-wrong" in mutations and name == "radix" and record["index"] == 1:
            backend["violations"]["wrong_set"].update(rows=2, total_rows=6)
            p = backend["predicted_vs_observed"]
            p.update(wrong_rows=2, wrong_not_predicted_overflow=2, wrong_not_predicted_overflow_list=[0, 2])
        if "filtered-unsupported" in mutations and name == "filtered":
            backend.update(status="unsupported", reason="filtered needs 131072 B of shared memory per SM",
                           verdict="not_run", reps=0, output_sha256_per_rep=[], set_sha256_per_rep=[])
            reps = []
        backend["distinct_outputs"] = len(set(reps))
        backend["equals_reference_reps"] = sum(r == record["reference"]["output_sha256"] for r in reps)
        backend["flapping_rows_total"] = 1 if len(set(reps)) > 1 else 0
        backend["flapping_rows"] = [{"row": 1, "reps_differing": 1, "reps_set_differing": 0,
                                     "max_indices_differing": 0, "max_positions_differing": 2}] \
            if len(set(reps)) > 1 else []
# The device as `run` describes an H200 (docs/schemas/report-1.schema.json "device").
report["context"].update(device_unavailable_reason=None, device={
    "ordinal": 0, "name": "NVIDIA H200", "compute_capability": "9.0", "sm_count": 132,
    "smem_per_sm_bytes": 233472, "smem_per_block_optin_bytes": 232448,
    "reported_smem_per_sm_bytes": 233472, "smem_emulated": False, "l2_bytes": 62914560,
    "global_memory_bytes": 150109880320, "driver_version": "13.0", "runtime_version": "13.0",
    "driver_version_number": 13000, "runtime_version_number": 13000})
if "drop-record-2" in mutations:
    report["records"] = [r for r in report["records"] if r["index"] != 2]
if "broken-hash" in mutations:
    report["records"][1]["backends"][3]["output_sha256_per_rep"][1] = "not-a-hash"
json.dump(report, open(sys.argv[2], "w"), indent=1)

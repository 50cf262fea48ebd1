#!/usr/bin/env bash
# import: .npy files written by numpy (format 1.0, 2.0, 3.0; float32, float16, int32, int64) and
# .safetensors files written by hand (struct + json: F32, BF16, F16, I32, I64), imported and read
# back with the dsatopk_capture package (tools/python/) (every array bit for bit, the provenance metadata with the
# SHA-256 of each input) and checked with inspect and census; then every refusal with its exit
# code and a message naming the file and the field.
. "$(dirname "$0")/lib.sh"

need_python_with_numpy
D=$TMP

"$PYTHON" - "$D" <<'EOF' || fail "writing the input arrays"
import json, struct, sys
import numpy as np
from numpy.lib import format as npformat

d = sys.argv[1]
rng = np.random.default_rng(5)
rows, length, k, page = 3, 50, 8, 16
scores = rng.standard_normal((rows, length)).astype(np.float32)
scores[0, 3] = -np.inf
scores[1, 7] = np.float32(-0.0)
scores[2, 9] = np.float32(1e-42)          # subnormal
np.save(f"{d}/scores.npy", scores)
np.save(f"{d}/scores16.npy", scores.astype(np.float16))
lengths = np.array([50, 30, 20], dtype=np.int64)
np.save(f"{d}/lengths.npy", lengths)
with open(f"{d}/row_starts.npy", "wb") as f:          # format 2.0
    npformat.write_array(f, np.array([0, 10, 25], dtype=np.int32), version=(2, 0))
pages = np.array([[3, 2, 1, 0], [7, 6, 5, 4], [11, 10, 9, 8]], dtype=np.int64)
with open(f"{d}/page_table.npy", "wb") as f:          # format 3.0
    npformat.write_array(f, pages, version=(3, 0))
np.save(f"{d}/pt_row_starts.npy", np.array([0, 1, 2], dtype=np.int32))
engine = np.tile(np.arange(k, dtype=np.int32), (rows, 1))
np.save(f"{d}/engine.npy", engine)

# Refusals
np.save(f"{d}/big_endian.npy", scores.astype(">f4"))
np.save(f"{d}/fortran.npy", np.asfortranarray(scores))
np.save(f"{d}/float64.npy", scores.astype(np.float64))
np.save(f"{d}/lengths_2d.npy", lengths.reshape(1, 3))
np.save(f"{d}/lengths_4.npy", np.array([1, 2, 3, 4], dtype=np.int32))
np.save(f"{d}/lengths_long.npy", np.array([50, 51, 20], dtype=np.int32))
np.save(f"{d}/lengths_float.npy", lengths.astype(np.float32))
np.save(f"{d}/engine_k4.npy", engine[:, :4])
np.save(f"{d}/pages_1d.npy", pages[0])
bad_pages = pages.copy(); bad_pages[1, 2] = 1 << 40
np.save(f"{d}/pages_huge.npy", bad_pages)
np.save(f"{d}/scores_1d.npy", scores[0])
raw = open(f"{d}/scores.npy", "rb").read()
open(f"{d}/truncated.npy", "wb").write(raw[:-10])

# safetensors by hand: F32 scores, BF16 and F16 copies, I32 lengths, I64 page table.
def safetensors(path, tensors, metadata=None, corrupt=None):
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, (dtype, array) in tensors.items():
        blob = array.tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    if corrupt:
        corrupt(header)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))

bf16 = (scores.view(np.uint32) >> 16).astype(np.uint16)     # truncated to bf16 bits
tensors = {
    "scores": ("F32", scores),
    "scores_bf16": ("BF16", bf16),
    "scores_f16": ("F16", scores.astype(np.float16)),
    "lengths": ("I32", lengths.astype(np.int32)),
    "page_table": ("I64", pages),
}
safetensors(f"{d}/all.safetensors", tensors, metadata={"source": "unit"})
safetensors(f"{d}/only.safetensors", {"x": ("BF16", bf16)})
safetensors(f"{d}/f64.safetensors", {"x": ("F64", scores.astype(np.float64))})
def past_end(header):
    header["x"]["data_offsets"][1] += 4
safetensors(f"{d}/range.safetensors", {"x": ("F32", scores)}, corrupt=past_end)
def wrong_shape(header):
    header["x"]["shape"] = [rows, length + 1]
safetensors(f"{d}/shape.safetensors", {"x": ("F32", scores)}, corrupt=wrong_shape)
EOF

# ---- a record with every section, read back bit for bit ----
expect_exit 0 "import with every section (npy 1.0/2.0/3.0, int32 and int64)" -- \
    "$AUDIT" import --scores "$D/scores.npy" --lengths "$D/lengths.npy" \
    --row-starts "$D/row_starts.npy" --page-table "$D/page_table.npy" --page-size 16 \
    --page-table-row-starts "$D/pt_row_starts.npy" --engine-indices "$D/engine.npy" --k 8 \
    --metadata '{"engine": "vllm", "layer": 3}' -o "$D/full.bin"
expect_grep "3 rows x 50, k 8, row starts, page table, engine indices" "$TMP/out" \
    "import reports what it wrote"

cat >"$D/check.py" <<'EOF'
import hashlib, json, sys
import numpy as np
from dsatopk_capture import read_records

def sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()

d, capture, mode = sys.argv[1], sys.argv[2], sys.argv[3]
records = list(read_records(capture))
record = records[-1]
scores = np.load(f"{d}/scores.npy")
if mode == "full":
    assert len(records) == 1
    assert record.k == 8
    assert np.array_equal(record.scores.view(np.uint32), scores.view(np.uint32))
    assert record.lengths.tolist() == [50, 30, 20]
    assert record.row_starts.tolist() == [0, 10, 25]
    assert record.page_size == 16
    assert record.page_table.tolist() == np.load(f"{d}/page_table.npy").tolist()
    assert record.page_table_row_starts.tolist() == [0, 1, 2]
    assert np.array_equal(record.engine_indices, np.load(f"{d}/engine.npy"))
    meta = record.metadata
    assert meta["engine"] == "vllm" and meta["layer"] == 3
    files = meta["imported_from"]["files"]
    assert set(files) == {"scores", "lengths", "row_starts", "page_table",
                          "page_table_row_starts", "engine_indices"}, files
    names = {"scores": "scores.npy", "lengths": "lengths.npy", "row_starts": "row_starts.npy",
             "page_table": "page_table.npy", "page_table_row_starts": "pt_row_starts.npy",
             "engine_indices": "engine.npy"}
    for field, name in names.items():
        assert files[field]["sha256"] == sha(f"{d}/{name}"), field
        assert files[field]["format"] == "npy"
    assert files["scores"]["dtype"] == "<f4" and files["scores"]["shape"] == [3, 50]
    assert files["lengths"]["dtype"] == "<i8"
    assert files["row_starts"]["format_version"] == "2.0"
    assert files["page_table"]["format_version"] == "3.0"
elif mode == "f16":
    want = np.load(f"{d}/scores16.npy").astype(np.float32)
    assert np.array_equal(record.scores.view(np.uint32), want.view(np.uint32))
    assert record.lengths.tolist() == [50, 50, 50]
    assert record.metadata["imported_from"]["files"]["scores"]["dtype"] == "<f2"
elif mode == "bf16":
    want = (scores.view(np.uint32) & np.uint32(0xFFFF0000))
    assert np.array_equal(record.scores.view(np.uint32), want)
    entry = record.metadata["imported_from"]["files"]["scores"]
    assert entry["format"] == "safetensors" and entry["dtype"] == "BF16", entry
    assert entry["sha256"] == sha(sys.argv[4]), entry
elif mode == "safetensors":
    f16 = np.load(f"{d}/scores16.npy").astype(np.float32)
    assert np.array_equal(record.scores.view(np.uint32), f16.view(np.uint32))
    assert record.lengths.tolist() == [50, 30, 20]
    assert record.page_table.tolist() == np.load(f"{d}/page_table.npy").tolist()
    files = record.metadata["imported_from"]["files"]
    assert files["scores"]["tensor"] == "scores_f16" and files["lengths"]["tensor"] == "lengths"
    assert files["scores"]["safetensors_metadata"] == {"source": "unit"}
    assert files["lengths"]["sha256"] == sha(f"{d}/all.safetensors")
elif mode == "count":
    assert len(records) == int(sys.argv[4]), len(records)
    assert all(r.compressed == (sys.argv[5] == "compressed") for r in records[-1:])
print("ok")
EOF
check() {
    local what=$1
    shift
    if "$PYTHON" "$D/check.py" "$D" "$@" >"$TMP/py.out" 2>&1; then pass "$what"; else
        fail "$what"; tail -5 "$TMP/py.out" | sed 's/^/    /'; fi
}
check "full record: every array bit for bit, metadata kept, SHA-256 of each input" "$D/full.bin" full

expect_exit 0 "inspect --verify accepts the imported capture" -- \
    "$AUDIT" inspect --verify --format json -o "$TMP/inspect.json" "$D/full.bin"
json_check "$TMP/inspect.json" \
    'all(r["rows"] == 3 and r["k"] == 8 and r["row_starts"] and r["page_table"] and r["page_size"] == 16 and r["engine_indices"] for r in [j["files"][0]["records"][0]])' \
    "inspect sees rows, k and every section"
expect_exit 0 "census runs on the imported capture" -- "$AUDIT" census "$D/full.bin"

# ---- float16 .npy, safetensors dtypes, append and compress ----
expect_exit 0 "import float16 .npy scores (widened exactly), default lengths" -- \
    "$AUDIT" import --scores "$D/scores16.npy" --k 4 -o "$D/f16.bin"
check "float16 scores widened exactly, lengths default to the row length" "$D/f16.bin" f16

expect_exit 0 "import the only tensor of a safetensors file (BF16)" -- \
    "$AUDIT" import --scores "$D/only.safetensors" --k 4 -o "$D/bf16.bin"
check "bfloat16 scores widened exactly, provenance names the safetensors file" "$D/bf16.bin" bf16 \
    "$D/only.safetensors"

expect_exit 0 "import F16 scores, I32 lengths, I64 page table from one safetensors file" -- \
    "$AUDIT" import --scores "$D/all.safetensors:scores_f16" \
    --lengths "$D/all.safetensors:lengths" --page-table "$D/all.safetensors:page_table" \
    --page-size 16 --k 8 -o "$D/st.bin"
check "safetensors tensors by name, __metadata__ kept" "$D/st.bin" safetensors

expect_exit 0 "--append --compress adds a second, compressed record" -- \
    "$AUDIT" import --scores "$D/all.safetensors:scores" --k 2 --append --compress -o "$D/st.bin"
check "two records after --append, the last compressed" "$D/st.bin" count 2 compressed
expect_exit 0 "without --append the output is replaced" -- \
    "$AUDIT" import --scores "$D/scores.npy" --k 2 -o "$D/st.bin"
check "one record after replacing" "$D/st.bin" count 1 plain

# ---- refusals: exit 3 with the file and the field named ----
refuse() {
    local what=$1 pattern=$2
    shift 2
    expect_exit 3 "$what" -- "$AUDIT" import "$@"
    expect_grep "$pattern" "$TMP/err" "$what: message names it"
}
refuse "big-endian .npy" "big_endian.npy.*descr.*big-endian" --scores "$D/big_endian.npy" --k 4 -o "$D/x.bin"
refuse "Fortran-order .npy" "fortran.npy.*fortran_order" --scores "$D/fortran.npy" --k 4 -o "$D/x.bin"
refuse "float64 .npy" "float64.npy.*'<f8'.*unsupported dtype" --scores "$D/float64.npy" --k 4 -o "$D/x.bin"
refuse "truncated .npy" "truncated.npy: truncated data" --scores "$D/truncated.npy" --k 4 -o "$D/x.bin"
refuse "1-D scores" "--scores .*scores_1d.npy.*shape \(50,\)" --scores "$D/scores_1d.npy" --k 4 -o "$D/x.bin"
refuse "2-D lengths" "--lengths .*lengths_2d.npy.*shape \(1, 3\).*expected \(3,\)" \
    --scores "$D/scores.npy" --lengths "$D/lengths_2d.npy" --k 4 -o "$D/x.bin"
refuse "lengths for 4 rows" "--lengths .*lengths_4.npy.*expected \(3,\)" \
    --scores "$D/scores.npy" --lengths "$D/lengths_4.npy" --k 4 -o "$D/x.bin"
refuse "a length past the row" "--lengths .*lengths_long.npy.*element \[1\] is 51" \
    --scores "$D/scores.npy" --lengths "$D/lengths_long.npy" --k 4 -o "$D/x.bin"
refuse "float lengths" "--lengths: .*lengths_float.npy.*float type" \
    --scores "$D/scores.npy" --lengths "$D/lengths_float.npy" --k 4 -o "$D/x.bin"
refuse "engine indices of another k" "--engine-indices .*engine_k4.npy.*expected \(3, 8\)" \
    --scores "$D/scores.npy" --engine-indices "$D/engine_k4.npy" --k 8 -o "$D/x.bin"
refuse "1-D page table" "--page-table .*pages_1d.npy.*expected 2-D" \
    --scores "$D/scores.npy" --page-table "$D/pages_1d.npy" --page-size 16 --k 4 -o "$D/x.bin"
refuse "page table entry past int32" "--page-table: .*pages_huge.npy: element \[1, 2\]" \
    --scores "$D/scores.npy" --page-table "$D/pages_huge.npy" --page-size 16 --k 4 -o "$D/x.bin"
refuse "F64 safetensors" "f64.safetensors: tensor 'x': field 'dtype' is 'F64'" \
    --scores "$D/f64.safetensors" --k 4 -o "$D/x.bin"
refuse "safetensors offsets past the data" "range.safetensors: tensor 'x': field 'data_offsets'" \
    --scores "$D/range.safetensors" --k 4 -o "$D/x.bin"
refuse "safetensors shape that does not match the bytes" "shape.safetensors: tensor 'x'.*shape" \
    --scores "$D/shape.safetensors" --k 4 -o "$D/x.bin"
refuse "several safetensors tensors without a name" "5 tensors.*'scores'.*FILE:TENSOR" \
    --scores "$D/all.safetensors" --k 4 -o "$D/x.bin"
refuse "an unknown tensor name" "no tensor 'nope'" --scores "$D/all.safetensors:nope" --k 4 -o "$D/x.bin"
refuse "a missing file" "missing.npy: cannot open" --scores "$D/missing.npy" --k 4 -o "$D/x.bin"
refuse "integer scores" "--scores: .*page_table.npy.*integer type" --scores "$D/page_table.npy" --k 4 -o "$D/x.bin"
[ ! -e "$D/x.bin" ] && pass "no output left behind by a refused import" ||
    fail "a refused import left $D/x.bin"

# ---- usage errors: exit 2 ----
expect_exit 2 "no --k" -- "$AUDIT" import --scores "$D/scores.npy" -o "$D/x.bin"
expect_exit 2 "no --scores" -- "$AUDIT" import --k 4 -o "$D/x.bin"
expect_exit 2 "no -o" -- "$AUDIT" import --scores "$D/scores.npy" --k 4
expect_exit 2 "--page-size not a power of two" -- "$AUDIT" import --scores "$D/scores.npy" \
    --page-table "$D/page_table.npy" --page-size 12 --k 4 -o "$D/x.bin"
expect_exit 2 "--page-size without --page-table" -- "$AUDIT" import --scores "$D/scores.npy" \
    --page-size 16 --k 4 -o "$D/x.bin"
expect_exit 2 "--metadata that is not an object" -- "$AUDIT" import --scores "$D/scores.npy" \
    --metadata '[1]' --k 4 -o "$D/x.bin"
expect_exit 2 ":TENSOR on a .npy file" -- "$AUDIT" import --scores "$D/scores.npy:x" --k 4 -o "$D/x.bin"
expect_exit 2 "--k 0" -- "$AUDIT" import --scores "$D/scores.npy" --k 0 -o "$D/x.bin"
expect_exit 0 "--help" -- "$AUDIT" import --help
expect_grep "safetensors" "$TMP/out" "--help describes the formats"

finish

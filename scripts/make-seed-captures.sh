#!/bin/sh
# Writes the captures that reproduce the seed harness configurations (../shared/seeds/
# 003_67cea2808c2aca30.txt; issue 4 "Done when") into DIR. Not shipped: about 115 MB, 64 MiB
# of it the random file (generate it where it is used rather than copying it).
# usage: scripts/make-seed-captures.sh DIR [PATH/TO/dsatopk-audit]
#        (the binary defaults to $DSATOPK_AUDIT, then build/src/dsatopk-audit)
#
# One file per family and shape, one record per parameter value, k = 2048 everywhere, the
# harness's seeds (plateau 7, tie 11, relu 13, narrow 17). Files are built under a temporary
# name and renamed when complete. Same bytes on every machine (docs/SYNTH.md).
set -eu

dir=${1:?usage: scripts/make-seed-captures.sh DIR [PATH/TO/dsatopk-audit]}
audit=${2:-${DSATOPK_AUDIT:-build/src/dsatopk-audit}}
[ -x "$audit" ] || { echo "make-seed-captures.sh: $audit is not an executable" >&2; exit 2; }
mkdir -p "$dir"

partial=
trap 'rm -f "$partial"' EXIT
# write NAME COMPRESS RECORD...: each RECORD is a quoted string of synth options.
write() {
    name=$1 compress=$2
    shift 2
    partial="$dir/$name.tmp.$$"
    rm -f "$partial"
    for record in "$@"; do
        # shellcheck disable=SC2086 # word splitting of the record's options is intended
        "$audit" synth $compress --append --k 2048 $record -o "$partial" >/dev/null
    done
    mv -f "$partial" "$dir/$name"
    partial=
    echo "$dir/$name: $# record(s), $(wc -c <"$dir/$name") bytes"
}

# plateau: m distinct positives, the rest exact 0.0; boundary in the plateau while m < k.
for shape in 64x32768 4x32768 8x131072; do
    rows=${shape%x*} length=${shape#*x}
    set --
    for m in 0 256 1024 4095 8192; do
        set -- "$@" "--family plateau --rows $rows --length $length --seed 7 --distinct $m"
    done
    write "plateau_$shape.bin" --compress "$@"
done

# tie: T exact 1.0 ties straddling the boundary.
for shape in 64x32768 4x32768 8x131072; do
    rows=${shape%x*} length=${shape#*x}
    set --
    for t in 64 512 4096 16384; do
        set -- "$@" "--family tie --rows $rows --length $length --seed 11 --ties $t"
    done
    write "tie_$shape.bin" --compress "$@"
done

# relu: boundary in the zero plateau at L = 16384 (64 and 256 rows), among positives at 32768.
write relu_64x16384.bin --compress "--family relu --rows 64 --length 16384 --seed 13"
write relu_256x16384.bin --compress "--family relu --rows 256 --length 16384 --seed 13"
write relu_64x32768.bin --compress "--family relu --rows 64 --length 32768 --seed 13"

# narrow: the staging-overflow regime of SGLang #17747.
write narrow_64x32768.bin --compress "--family narrow --rows 64 --length 32768 --seed 17"
write narrow_8x131072.bin --compress "--family narrow --rows 8 --length 131072 --seed 17"

# random: 64 x 262144 distinct values, the overflow regime of SGLang #36807 (64 MiB; zlib
# would not shrink it).
write random_64x262144.bin "" "--family random --rows 64 --length 262144 --seed 19"

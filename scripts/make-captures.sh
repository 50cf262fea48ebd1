#!/bin/sh
# Regenerates the shipped captures (captures/README.md lists them) with dsatopk-audit synth.
# usage: scripts/make-captures.sh PATH/TO/dsatopk-audit [DIR]     (DIR: default captures)
#
# Every file is built under a temporary name and renamed into place when complete, so an
# interrupted run leaves the previous captures intact. The output is byte-identical on every
# machine (docs/SYNTH.md); tests/cli/test_captures.sh checks that against captures/.
set -eu

audit=${1:?usage: scripts/make-captures.sh PATH/TO/dsatopk-audit [DIR]}
dir=${2:-captures}
mkdir -p "$dir"

current=
# begin NAME: start building DIR/NAME; add appends one record to it; finish renames it.
begin() {
    current="$dir/$1"
    partial="$current.tmp.$$"
    rm -f "$partial"
}
add() {
    "$audit" synth --compress --append "$@" -o "$partial" >/dev/null
}
finish() {
    mv -f "$partial" "$current"
}
trap 'rm -f "${partial:-}"' EXIT

# The zero plateau of a ReLU indexer at the seed-harness shape: boundary inside the plateau
# (m = 0, 1024) and just past it (m = 4095 >= k).
begin plateau.bin
for m in 0 1024 4095; do
    add --family plateau --rows 64 --length 32768 --k 2048 --seed 7 --distinct "$m"
done
finish

# Exact 1.0 ties straddling the boundary, a small and a large tie set.
begin tie.bin
for t in 512 4096; do
    add --family tie --rows 4 --length 32768 --k 2048 --seed 11 --ties "$t"
done
finish

# The public PR fixture: at L = 16384 the boundary sits in the zero plateau.
begin relu.bin
add --family relu --rows 64 --length 16384 --k 2048 --seed 13
finish

# Values within 1e-6 of 1.0: one coarse bin, the radix staging-overflow regime.
begin narrow.bin
add --family narrow --rows 8 --length 32768 --k 2048 --seed 17
finish

# The indexer model: boundary among positives (rho 0.9, mu -1), near the plateau edge
# (0.9, -2), inside the plateau (0.99, -2).
begin indexer.bin
for model in "0.9 -1" "0.9 -2" "0.99 -2"; do
    set -- $model
    add --family indexer --rows 4 --length 32768 --k 2048 --seed 19 --rho "$1" --mu "$2"
done
finish

# Edge cases, one record each: the generic control, -inf, all-equal rows, short rows, row
# offsets, padded strides, page tables (64 and 1), signed zeros, NaNs, subnormals.
begin edge.bin
edge="--rows 8 --length 4096 --k 2048 --seed 23"
for family in random neginf allequal short offsets padded; do
    add --family "$family" $edge
done
add --family paged --page-size 64 $edge
add --family paged --page-size 1 $edge
for family in signedzero nan subnormal; do
    add --family "$family" $edge
done
finish
trap - EXIT

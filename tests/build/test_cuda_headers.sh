#!/usr/bin/env bash
# Every header that a CUDA source (.cu, .cuh) includes with quotes must be in meson.build's
# cuda_headers: Debian's meson gives nvcc no dependency file, and that list is what rebuilds the
# CUDA objects when a header changes (see meson.build). Run from the source root.
set -u
status=0
for source in kernels/*.cu kernels/*.cuh tests/plugins/*.cu tests/plugins/*.cuh; do
    [ -f "$source" ] || continue
    dir=$(dirname "$source")
    for name in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$source"); do
        header=""
        for candidate in "$dir/$name" "src/$name"; do
            if [ -f "$candidate" ]; then
                header=$(realpath --relative-to=. "$candidate")
                break
            fi
        done
        if [ -z "$header" ]; then
            echo "$source: cannot find the included \"$name\"" >&2
            status=1
        elif ! grep -q "'$header'" meson.build; then
            echo "$source includes $header, which meson.build's cuda_headers does not list" >&2
            status=1
        fi
    done
done
exit $status

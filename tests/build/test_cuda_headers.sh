#!/usr/bin/env bash
# Every header that a CUDA source (.cu, .cuh) includes with quotes, directly or through another
# header, must be in meson.build's cuda_headers: Debian's meson gives nvcc no dependency file,
# and that list is what rebuilds the CUDA objects when a header changes (see meson.build). Run
# from the source root.
set -u
status=0
queue=(kernels/*.cu kernels/*.cuh tests/plugins/*.cu tests/plugins/*.cuh)
declare -A seen=()
while [ ${#queue[@]} -gt 0 ]; do
    file=${queue[0]}
    queue=("${queue[@]:1}")
    [ -f "$file" ] || continue
    dir=$(dirname "$file")
    for name in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file"); do
        header=""
        for candidate in "$dir/$name" src/*/"$name" kernels/"$name"; do
            if [ -f "$candidate" ]; then
                header=$(realpath --relative-to=. "$candidate")
                break
            fi
        done
        if [ -z "$header" ]; then
            echo "$file: cannot find the included \"$name\"" >&2
            status=1
            continue
        fi
        [ -n "${seen[$header]:-}" ] && continue
        seen[$header]=1
        queue+=("$header")
        if ! grep -q "'$header'" meson.build; then
            echo "$file includes $header, which meson.build's cuda_headers does not list" >&2
            status=1
        fi
    done
done
exit $status

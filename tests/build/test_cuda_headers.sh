#!/usr/bin/env bash
# Every header that a CUDA source (.cu, .cuh) includes with quotes, directly or through another
# header, must be in meson.build's cuda_headers: Debian's meson gives nvcc no dependency file,
# and that list is what rebuilds the CUDA objects when a header changes (see meson.build). And
# kernels/ is the lowest layer: nothing under it may include a header of src/. Run from the
# source root.
set -u
status=0
mapfile -t queue < <(find kernels \( -name '*.cu' -o -name '*.cuh' -o -name '*.c' \) | sort; find tests/plugins \( -name '*.cu' -o -name '*.cuh' \) | sort)
declare -A seen=()
while [ ${#queue[@]} -gt 0 ]; do
    file=${queue[0]}
    queue=("${queue[@]:1}")
    [ -f "$file" ] || continue
    dir=$(dirname "$file")
    for name in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file"); do
        header=""
        # The include paths: the includer's folder, kernels/include (bare names), kernels/
        # (layer/name.cuh), and for the test plugins the host headers they build against.
        for candidate in "$dir/$name" kernels/include/"$name" kernels/"$name" src/*/"$name"; do
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
        case $file:$header in
        kernels/*:src/*)
            echo "$file includes $header: kernels/ must not depend on src/" >&2
            status=1
            ;;
        esac
        [ -n "${seen[$header]:-}" ] && continue
        seen[$header]=1
        queue+=("$header")
        case $file in *.c) continue ;; esac
        if ! grep -q "'$header'" meson.build; then
            echo "$file includes $header, which meson.build's cuda_headers does not list" >&2
            status=1
        fi
    done
done
exit $status

#!/usr/bin/env bash
# scripts/find_flashinfer.py, which meson asks for FlashInfer's headers (kernels/meson.build):
# it finds a flashinfer package on the python path without importing it (the package here would
# fail to import), reads its version beside the headers, takes an explicit include directory,
# and exits 1 with the reason when there are no headers. Run from the source root.
set -u
status=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check() { # DESCRIPTION EXPECTED ACTUAL
    if [ "$2" = "$3" ]; then echo "ok - $1"; else echo "not ok - $1: expected [$2], got [$3]"; status=1; fi
}
site="$tmp/site"
mkdir -p "$site/flashinfer/data/include/flashinfer"
: >"$site/flashinfer/data/include/flashinfer/topk.cuh"
echo 'raise RuntimeError("importing flashinfer needs torch")' >"$site/flashinfer/__init__.py"
printf '"""Build metadata."""\n__version__ = "9.8.7"\n' >"$site/flashinfer/_build_meta.py"

out=$(PYTHONPATH="$site" python3 scripts/find_flashinfer.py "")
check "finds the package on the path without importing it" \
    "$site/flashinfer/data/include"$'\n'"9.8.7" "$out"
out=$(python3 scripts/find_flashinfer.py "$site/flashinfer/data/include")
check "an explicit include directory, with the version beside it" \
    "$site/flashinfer/data/include"$'\n'"9.8.7" "$out"
mkdir -p "$tmp/bare/flashinfer"
: >"$tmp/bare/flashinfer/topk.cuh"
out=$(python3 scripts/find_flashinfer.py "$tmp/bare")
check "an include directory without package metadata: version unknown" \
    "$tmp/bare"$'\n'"unknown" "$out"
python3 scripts/find_flashinfer.py "$tmp" >"$tmp/out" 2>"$tmp/err"
check "a directory without flashinfer/topk.cuh: exit 1" 1 "$?"
check "... naming the option and the missing header" 1 \
    "$(grep -c "^-Dflashinfer_include=$tmp: no flashinfer/topk.cuh there" "$tmp/err")"
# No package: a virtual environment of its own sees no site-packages but its own.
if python3 -m venv --without-pip "$tmp/venv" >/dev/null 2>&1; then
    PYTHONNOUSERSITE=1 "$tmp/venv/bin/python3" scripts/find_flashinfer.py "" >"$tmp/out" 2>"$tmp/err"
    check "no package: exit 1" 1 "$?"
    check "... saying the headers were not found" 1 "$(grep -c '^flashinfer headers not found' "$tmp/err")"
else
    echo "ok - # SKIP no package: python3 -m venv is not available (python3-venv)"
fi
exit $status

#!/usr/bin/env bash
# Installs the build dependencies (Debian packages) when missing and builds into build/.
# Usage: scripts/bootstrap.sh [BUILD_DIR] [extra meson setup options...]
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}
shift || true

packages=(meson ninja-build pkg-config gcc libcjson-dev libsodium-dev libssl-dev libcmocka-dev zlib1g-dev
          python3 python3-numpy python3-jsonschema)
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
        missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "bootstrap: installing ${missing[*]}" >&2
    if [ "$(id -u)" -ne 0 ]; then sudo=sudo; else sudo=; fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The CUDA toolkit (nvcc 12 or newer) is needed to build; it is not a Debian package here.
if ! command -v nvcc >/dev/null 2>&1; then
    for candidate in /usr/local/cuda/bin /usr/local/cuda-13.0/bin; do
        [ -x "$candidate/nvcc" ] && export PATH="$candidate:$PATH" && break
    done
fi
command -v nvcc >/dev/null 2>&1 || {
    echo "bootstrap: nvcc not found: install the CUDA Toolkit (13.x) and put nvcc on PATH" >&2
    exit 4
}

# The test helpers use numpy from whichever python3 is first on PATH.
if ! python3 -c 'import numpy' 2>/dev/null; then
    python3 -m pip install --quiet numpy
fi

if [ ! -f "$build_dir/build.ninja" ]; then
    meson setup "$build_dir" "$@" >/dev/null
fi
ninja -C "$build_dir" >/dev/null
echo "bootstrap: built $build_dir/src/dsatopk-audit ($("$build_dir/src/dsatopk-audit" --version))" >&2

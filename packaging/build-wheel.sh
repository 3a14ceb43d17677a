#!/usr/bin/env bash
# packaging/build-wheel.sh OUT_DIR - the Python agent as a wheel for the system CPython 3.11
# (`make wheel`): python/ built by Debian's pip and setuptools (python3-pip, python3-setuptools,
# python3-wheel) with --no-build-isolation --no-index, so nothing is fetched. The build runs on a
# copy of python/ so the source tree gets no build/ or egg-info; setup.py compiles the C sources
# it needs from src/ and proto/ (SKYPROF_SOURCE_DIR). Prints the path of the .whl on stdout.
set -euo pipefail
OUT=$(mkdir -p "$1" && cd "$1" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
PY=${SKYPROF_WHEEL_PYTHON:-/usr/bin/python3}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cp -r "$SRC/python" "$WORK/python"
find "$WORK/python" \( -name build -o -name '*.egg-info' -o -name __pycache__ \) -prune \
  -exec rm -rf {} + 2>/dev/null || true
find "$WORK/python" -name '*.so' -delete
rm -f "$OUT"/skyprof-*.whl
(cd "$WORK" && SKYPROF_SOURCE_DIR="$SRC" PYTHONPATH= "$PY" -m pip wheel -q --no-build-isolation \
  --no-index --no-deps -w "$OUT" ./python >&2)
ls "$OUT"/skyprof-*.whl

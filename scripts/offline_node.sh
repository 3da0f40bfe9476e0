#!/usr/bin/env bash
# Run a PosBench command on an offline GPU node that has its own torch, numpy, pandas, PyYAML and
# tqdm but no network: installs the wheels `make wheelhouse` collected (copied along in
# wheelhouse/) into a folder, puts it and this checkout on PYTHONPATH, and runs the command.
#   scripts/offline_node.sh python3 -m suite.bench.gpu
#   scripts/offline_node.sh python3 -m suite.run +sweep=gpu logger=none
set -euo pipefail
cd "$(dirname "$0")/.."
site=${POSBENCH_SITE:-/tmp/posbench-site}
ls wheelhouse/*.whl > /dev/null 2>&1 || { echo "no wheelhouse/*.whl here: run 'make wheelhouse' on a connected machine and copy wheelhouse/ along" >&2; exit 2; }
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$site" wheelhouse/*.whl
export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec "$@"

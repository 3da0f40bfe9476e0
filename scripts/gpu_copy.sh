#!/usr/bin/env bash
# The GPU board in one command, on a machine with one CUDA GPU (offline nodes included: it goes
# through scripts/offline_node.sh when wheelhouse/ is there): trains conf/sweep/gpu_copy.yaml (the
# classic six on copy at L = 512, small model, two seeds), stops within BUDGET seconds (default
# 540; a run cut short resumes from its checkpoint on the next call), packs the stored runs into
# published/gpu_copy.jsonl.gz and builds reports/gpu_copy/ from them. RESULTS (default results)
# is where the runs go.
set -euo pipefail
cd "$(dirname "$0")/.."
budget=${BUDGET:-540}
results=${RESULTS:-results}
run=()
if ls wheelhouse/*.whl > /dev/null 2>&1; then run=(scripts/offline_node.sh); fi
python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA GPU here: this script trains on one')"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
status=0
timeout --signal=INT "$budget" "${run[@]}" python3 -m suite.run +sweep=gpu_copy logger=none results_dir="$results" || status=$?
if [ "$status" -ne 0 ]; then echo "the sweep stopped with status $status (124: the $budget s budget); packing what is stored" >&2; fi
"${run[@]}" python3 -m suite.results.shipped pack gpu_copy --results "$results" --replace
"${run[@]}" python3 -m suite.report gpu_copy --from published --force
exit "$status"

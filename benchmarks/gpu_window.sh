#!/usr/bin/env bash
# The GPU window (benchmarks/gpu_window.py): every stage in its own process under its own time limit,
# so a hang or a crash in one still leaves the others' files in $OUT. Under 8 minutes on one GPU:
# checks 40 s + profile 60 s + train 80 s + decode 80 s + compiled 150 s at most (410 s), plus start-up.
# `checks` runs the tests that need a GPU (the CUDA graph's tokens against eager decoding, a training
# step under torch.cuda.set_sync_debug_mode("error")); on a CPU they are skipped.
#
#   OUT=/some/folder bash benchmarks/gpu_window.sh                 # on the GPU machine ($OUT set there)
#   OUT=/tmp/w bash benchmarks/gpu_window.sh --device cpu --tiny   # the same path on a CPU, in seconds
#
# Extra arguments go to every stage. Files in $OUT: summary.txt, results.jsonl, sections.md,
# profile.txt, trace.json.gz, window.log (at most 6). Back here: `python -m benchmarks.gpu_window
# merge <files>/sections.md` puts the sections into BENCHMARKS.md.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-window}
mkdir -p "$OUT"
PYTHON=${PYTHON:-python3}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
LIMITS=${GPU_WINDOW_LIMITS:-"checks=40 profile=60 train=80 decode=80 compiled=150"}
CHECKS="tests/generate/test_graphs.py::test_the_cuda_graph_replays_the_eager_tokens
        tests/train/test_shapes.py::test_a_training_step_never_waits_for_the_gpu"
{
  echo "gpu_window: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $($PYTHON -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU")' 2>&1)"
  for pair in $LIMITS; do
    stage=${pair%%=*}; limit=${pair#*=}
    began=$(date +%s)
    if [ "$stage" = checks ]; then
      # shellcheck disable=SC2086
      timeout --kill-after=10 "$limit" "$PYTHON" -m pytest -n 0 -q -p no:cacheprovider $CHECKS
      status=$?; [ "$status" -eq 5 ] && status=0  # 5: every test skipped (no GPU)
      [ "$status" -eq 0 ] && echo "[checks] stage done: the GPU tests passed (or were skipped without a GPU)" \
        | tee -a "$OUT/summary.txt" >/dev/null
    else
      timeout --kill-after=10 "$limit" "$PYTHON" -m benchmarks.gpu_window "$stage" --out "$OUT" "$@"
      status=$?
    fi
    if [ "$status" -ne 0 ]; then
      reason="exit status $status"; [ "$status" -eq 124 ] && reason="ran past its limit of $limit s"
      echo "[$stage] FAILED: $reason after $(( $(date +%s) - began )) s (see window.log)" | tee -a "$OUT/summary.txt"
    fi
  done
} 2>&1 | tee -a "$OUT/window.log"

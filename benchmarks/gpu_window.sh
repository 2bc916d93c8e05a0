#!/usr/bin/env bash
# The GPU window (benchmarks/gpu_window.py): every stage in its own process under its own time limit,
# so a hang or a crash in one still leaves the others' files in $OUT. Under 8 minutes on one GPU:
# profile 75 s + train 100 s + decode 100 s + compiled 180 s at most, plus start-up.
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
LIMITS=${GPU_WINDOW_LIMITS:-"profile=75 train=100 decode=100 compiled=180"}
{
  echo "gpu_window: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $($PYTHON -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU")' 2>&1)"
  for pair in $LIMITS; do
    stage=${pair%%=*}; limit=${pair#*=}
    began=$(date +%s)
    timeout --kill-after=10 "$limit" "$PYTHON" -m benchmarks.gpu_window "$stage" --out "$OUT" "$@"
    status=$?
    if [ "$status" -ne 0 ]; then
      reason="exit status $status"; [ "$status" -eq 124 ] && reason="ran past its limit of $limit s"
      echo "[$stage] FAILED: $reason after $(( $(date +%s) - began )) s (see window.log)" | tee -a "$OUT/summary.txt"
    fi
  done
} 2>&1 | tee -a "$OUT/window.log"

#!/usr/bin/env bash
# One command for a fresh machine: set clearformer up in ./.venv, then run the main job
# (the seed walkthrough, then the toy translation). `./setup.sh --no-demo` only sets up.
set -euo pipefail
cd "$(dirname "$0")"

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "==> creating .venv"
  "$PYTHON" -m venv .venv
fi
PIP=(.venv/bin/python -m pip --disable-pip-version-check)
"${PIP[@]}" install -q --upgrade pip

# torch: keep one that is already there (>= 2.3); otherwise take the CPU build 2.13.0.
# (An unpinned `torch` would pull a multi-GB CUDA build.)
if ! .venv/bin/python -c "import torch, sys; v = tuple(int(x) for x in torch.__version__.split('+')[0].split('.')[:2]); sys.exit(v < (2, 3))" 2>/dev/null; then
  echo "==> installing torch 2.13.0 (CPU)"
  "${PIP[@]}" install -q torch==2.13.0
fi
echo "==> installing clearformer and its tools"
# hf: Transformers, tokenizers and CTranslate2, so that the import/export tests run too (offline).
"${PIP[@]}" install -q -e ".[serve,dev,hf,firefox]"

# The browser tests drive Debian's Chromium (never a downloaded browser). Install it where we may:
# as root, or in CI, where a failure must stop us; elsewhere say how, since it needs sudo.
if [ -n "${CI:-}" ]; then
  bash scripts/install-browser.sh .venv/bin/python
elif [ "$(id -u)" = 0 ]; then
  bash scripts/install-browser.sh .venv/bin/python || echo "note: could not install Chromium; the browser tests will be skipped"
elif ! command -v chromium >/dev/null 2>&1; then
  echo "note: the browser tests need Chromium: sudo bash scripts/install-browser.sh (skipped without it)"
fi

# `translate --po` writes catalogues that tests/catalog check with GNU gettext's msgfmt: the same rule.
if [ -n "${CI:-}" ]; then
  bash scripts/install-gettext.sh
elif [ "$(id -u)" = 0 ]; then
  bash scripts/install-gettext.sh || echo "note: could not install gettext; the msgfmt checks will be skipped"
elif ! command -v msgfmt >/dev/null 2>&1; then
  echo "note: the catalogue tests need msgfmt: sudo bash scripts/install-gettext.sh (skipped without it)"
fi

if [ "${1:-}" = "--no-demo" ]; then
  exit 0
fi
CF=.venv/bin/clearformer
echo
echo "==> 1/3  The seeds' walkthrough: 'I love you', every number (clearformer explain --example i-love-you)"
"$CF" explain --example i-love-you --decimals 4
echo "==> 2/3  Training the toy translator (clearformer train --preset toy-translate)"
# --overwrite: running setup.sh again retrains runs/toy-translate instead of stopping at the existing run.
"$CF" train --preset toy-translate --overwrite
echo "==> 3/3  Translating (clearformer translate \"I love you\")"
"$CF" translate "I love you"
echo
echo "Done. Next: .venv/bin/clearformer explain \"I love you\"   |   .venv/bin/clearformer serve"

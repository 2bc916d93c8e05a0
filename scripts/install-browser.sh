#!/usr/bin/env bash
# Install what clearformer's browser tests (tests/viz/test_browser.py) need, without downloading a browser:
#   - Debian's `chromium` package (the system browser at /usr/bin/chromium), via apt-get;
#   - Playwright's Python package, which drives that browser through `executable_path`.
# Never runs `playwright install`. Idempotent: does nothing for what is already there.
# Usage: scripts/install-browser.sh [PYTHON]   (PYTHON defaults to .venv/bin/python, else python3)
set -euo pipefail

python="${1:-}"
if [ -z "$python" ]; then
    if [ -x .venv/bin/python ]; then python=.venv/bin/python; else python=python3; fi
fi

if command -v chromium >/dev/null 2>&1; then
    echo "install-browser: chromium already installed ($(command -v chromium))"
else
    sudo=""
    if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    # fonts-liberation: metric-compatible Latin fonts, so the page and screenshots render text the same way.
    $sudo apt-get install -y -qq --no-install-recommends chromium fonts-liberation >/dev/null
    echo "install-browser: installed $(chromium --version 2>/dev/null || echo chromium)"
fi

if "$python" -c "import playwright" >/dev/null 2>&1; then
    echo "install-browser: playwright already installed for $python"
else
    "$python" -m pip install -q "playwright>=1.40"
    echo "install-browser: installed playwright for $python"
fi

#!/usr/bin/env bash
# Install GNU gettext's msgfmt, the checker of the catalogues `clearformer translate --po` writes
# (tests/catalog run `msgfmt --check`): Debian's `gettext` package, via apt-get. Idempotent.
# Usage: scripts/install-gettext.sh
set -euo pipefail

if command -v msgfmt >/dev/null 2>&1; then
    echo "install-gettext: msgfmt already installed ($(command -v msgfmt))"
    exit 0
fi
sudo=""
if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends gettext >/dev/null
echo "install-gettext: installed $(msgfmt --version | head -1)"

#!/usr/bin/env bash
# Install (if needed) the distribution's headless Chromium, which the report's browser tests open.
set -euo pipefail
if ! command -v chromium >/dev/null 2>&1; then
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
chromium --version

#!/usr/bin/env bash
# Prints the path of the Chromium the web view's browser test drives (e2e, TestUIInABrowser): CHROMIUM when set,
# else a chromium on PATH, else Debian's chromium package, installed here (as root, through apt; about a minute,
# first run only).
set -euo pipefail

if [ -n "${CHROMIUM:-}" ]; then
  echo "$CHROMIUM"
  exit 0
fi
if path=$(command -v chromium); then
  echo "$path"
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "no chromium: install Debian's chromium package (apt-get install chromium) or set CHROMIUM to a Chromium binary" >&2
  exit 1
fi
echo "installing Debian's chromium for the browser test (first run only)" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq --no-install-recommends chromium >&2 ||
  { apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends chromium >&2; }
command -v chromium

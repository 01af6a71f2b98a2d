#!/usr/bin/env bash
# Prints the path of a headless Chromium for the admin page's browser
# tests (examples/operate), installing Debian's chromium package first
# where none is found: once per machine. $CHROMIUM, if set, names one.
# Chromium is a browser, not a Go module, so it cannot come from the
# module proxy; Debian's package is what the tests are written against.
set -euo pipefail

if [ -n "${CHROMIUM:-}" ] && [ -x "$CHROMIUM" ]; then
	echo "$CHROMIUM"; exit 0
fi
if path=$(command -v chromium); then
	echo "$path"; exit 0
fi
if ! command -v apt-get >/dev/null; then
	echo "no chromium, and no apt-get to install Debian's: install Chromium and set CHROMIUM to its path" >&2
	exit 1
fi
as_root=()
if [ "$(id -u)" -ne 0 ]; then
	if ! sudo -n true 2>/dev/null; then
		echo "no chromium: install Debian's (sudo apt-get install chromium), or set CHROMIUM to a Chromium's path" >&2
		exit 1
	fi
	as_root=(sudo -n)
fi
echo "installing Debian's chromium package (once per machine)" >&2
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq >&2
"${as_root[@]}" apt-get install -y -qq --no-install-recommends chromium >&2
command -v chromium

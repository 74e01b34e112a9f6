#!/usr/bin/env bash
# Fail when a tracked C file differs from .clang-format.
set -euo pipefail
files=$(git ls-files '*.c' '*.h')
[ -n "$files" ] || exit 0
bad=0
for f in $files; do
	if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
		echo "check-format: $f is not formatted (run: make format)" >&2
		bad=1
	fi
done
exit $bad

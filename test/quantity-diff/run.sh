#!/usr/bin/env bash
# The quantity differential (docs/quantity-differential.md): build this folder's Go program
# against k8s.io/apimachinery (the Go module proxy; go.sum pins it) and compare it with the C
# parser through quantity_driver, on apimachinery's test strings and 100,000 seeded random ones.
# Usage: run.sh BUILD_DIR [quantity-diff flags...]   (BUILD_DIR holds quantity_driver)
set -euo pipefail
build=$(cd "$1" && pwd)
shift
here=$(cd "$(dirname "$0")" && pwd)
export PATH="/usr/local/go/bin:$PATH"
export GOFLAGS=-mod=mod
export CGO_ENABLED=0
command -v go >/dev/null 2>&1 || { echo "quantity-diff: Go >= 1.24 is needed (k8s.io/apimachinery v0.33)" >&2; exit 1; }
[ -x "$build/quantity_driver" ] || { echo "quantity-diff: $build/quantity_driver is missing (make build)" >&2; exit 1; }
(cd "$here" && go build -o "$build/quantity-diff" .)
exec "$build/quantity-diff" -driver "$build/quantity_driver" -table "$here/apimachinery-table.txt" "$@"

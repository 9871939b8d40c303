#!/usr/bin/env bash
# Compiles every example and bench spec to a bundle and prints one line per
# spec: the SHA-256 of the bundle's bytes, or why it did not compile. Two
# builds that print the same lines make byte-identical bundles: the check
# that a change to the compiler's structure left its output alone.
#
#   bash scripts/bundle-hashes.sh [OCTET] > hashes.txt
#   OCTET_HASH_SPECS="examples/tiny-llama.pbtxt ..." bash scripts/bundle-hashes.sh
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
octet="${1:-$root/build/tools/octet/octet}"
specs="${OCTET_HASH_SPECS:-$(cd "$root" && ls examples/*.pbtxt \
  examples/hf/*/config.json bench/specs/*.pbtxt)}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for spec in $specs; do
  out="$work/$(echo "$spec" | tr '/' '_').octet"
  if "$octet" compile "$root/$spec" -o "$out" >"$work/log" 2>&1; then
    echo "$(sha256sum "$out" | cut -c1-64)  $spec"
  else
    echo "does-not-compile  $spec: $(grep -m1 -i 'error' "$work/log" |
      cut -c1-120)"
  fi
done

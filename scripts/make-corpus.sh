#!/usr/bin/env bash
# Writes data/corpus.txt: a plain English text corpus (about 2.6 MB) built
# from Debian's `fortunes` package, for byte-level training of tiny models.
# Deterministic: the files are concatenated in byte order of their names,
# so the same package version gives the same corpus byte for byte.
#   scripts/make-corpus.sh [OUTPUT]      (default data/corpus.txt)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/data/corpus.txt}"
source_dir=/usr/share/games/fortunes

if [ ! -d "$source_dir" ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "make-corpus: installing the fortunes package"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq >/dev/null
  $SUDO apt-get install -y -qq --no-install-recommends fortunes >/dev/null
fi

tmp="$(mktemp "$out.tmp-XXXXXX")"
trap 'rm -f "$tmp"' EXIT
# Fortune files separate entries with lines holding a lone "%"; the .dat
# files are binary indexes and the .u8 names are links to the same text.
find "$source_dir" -maxdepth 1 -type f ! -name '*.dat' -printf '%f\n' |
  LC_ALL=C sort |
  while read -r name; do
    sed 's/^%$//' "$source_dir/$name"
  done >"$tmp"
mv "$tmp" "$out"
trap - EXIT
echo "make-corpus: wrote $out ($(wc -c <"$out") bytes, sha256 $(sha256sum "$out" | cut -c1-16))"

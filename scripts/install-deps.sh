#!/usr/bin/env bash
# Installs every build and test dependency of octet from Debian's packages.
# Idempotent: when everything is present it prints one line and exits.
set -euo pipefail

packages=(
  cmake ninja-build ccache g++ pkg-config
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  libprotobuf-dev protobuf-compiler libgtest-dev libgmock-dev
  nlohmann-json3-dev libcli11-dev libpcre2-dev zlib1g-dev
  python3 fortunes
)
# The documentation packages of the English corpus (scripts/make-en-data.sh).
mapfile -t -O ${#packages[@]} packages < <(grep -v '^#' "$(dirname "$0")/en-doc-packages.txt")

# Python packages: HF tokenizers, which trains the English corpus's BPE
# tokenizer (scripts/train-tokenizer.py) and which the tokenizer tests
# compare against; quiet, and a no-op once they import.
install_python_test_packages() {
  if command -v python3 >/dev/null && ! python3 -c 'import tokenizers' >/dev/null 2>&1; then
    python3 -m pip install -q -r "$(dirname "$0")/requirements-test.txt" >/dev/null 2>&1 ||
      echo "octet: pip could not install scripts/requirements-test.txt; the tokenizer oracle tests will skip"
  fi
}

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  install_python_test_packages
  echo "octet: all build dependencies present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "octet: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "octet: dependencies installed"
install_python_test_packages

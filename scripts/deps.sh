#!/usr/bin/env bash
# Sourced by the README's commands: makes sure the Debian 12 packages pagedattn builds with are
# present. As root it installs what is missing with apt; otherwise it prints the install line.
PAGEDATTN_DEBIAN_PACKAGES=(cmake ninja-build g++ clang libomp-14-dev
                           libxsimd-dev catch2 libfmt-dev libbenchmark-dev)

pagedattn_ensure_packages() {
  local missing=() package
  for package in "${PAGEDATTN_DEBIAN_PACKAGES[@]}"; do
    if [ "$(dpkg-query -W -f='${db:Status-Status}' "$package" 2>/dev/null)" != "installed" ]; then
      missing+=("$package")
    fi
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -eq 0 ]; then
    echo "pagedattn: installing ${missing[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
  else
    echo "pagedattn: missing Debian packages. Install them with:"
    echo "  sudo apt-get install -y ${missing[*]}"
    return 1
  fi
}

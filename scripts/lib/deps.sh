# shellcheck shell=bash
#
# Dependency bootstrap shared by scripts/test and scripts/demo (sourced, not run).
#
#   asio_wheel_ensure_deps [PACKAGE...]
#
# Checks with dpkg-query which of the given Debian packages (default: all of ASIO_WHEEL_DEPS)
# are missing and installs them with apt-get, through sudo when not root. Where that is not
# possible (not Debian, or neither root nor sudo) it prints the missing packages and the
# command that installs them, and returns 1. Set ASIO_WHEEL_SKIP_DEPS=1 to skip the check
# (e.g. on another distribution with the equivalents installed).

# Everything scripts/test can use: the toolchain, Asio, doctest, Google Benchmark, and clang
# with its runtime libraries (libFuzzer) for the fuzz stage.
ASIO_WHEEL_DEPS=(cmake ninja-build g++ libasio-dev doctest-dev libbenchmark-dev clang
  libclang-rt-14-dev pkg-config)

asio_wheel_ensure_deps() {
  local packages=("$@")
  if [ ${#packages[@]} -eq 0 ]; then
    packages=("${ASIO_WHEEL_DEPS[@]}")
  fi

  if [ "${ASIO_WHEEL_SKIP_DEPS:-0}" = 1 ]; then
    echo "deps: check skipped (ASIO_WHEEL_SKIP_DEPS=1)"
    return 0
  fi

  if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
    echo "deps: this is not a Debian-like system (no dpkg-query/apt-get), so nothing can be" >&2
    echo "      checked or installed automatically. Needed (Debian 12 package names):" >&2
    echo "        ${packages[*]}" >&2
    echo "      On Debian/Ubuntu:" >&2
    echo "        sudo apt-get update && sudo apt-get install -y --no-install-recommends ${packages[*]}" >&2
    echo "      With the equivalents installed, rerun with ASIO_WHEEL_SKIP_DEPS=1." >&2
    return 1
  fi

  local missing=() package status
  for package in "${packages[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null) || status=
    if [ "$status" != "install ok installed" ]; then
      missing+=("$package")
    fi
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "deps: all ${#packages[@]} packages present"
    return 0
  fi
  echo "deps: missing: ${missing[*]}"

  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    # sudo without a password, or with a terminal to ask for one; never hang in CI.
    if command -v sudo >/dev/null 2>&1 && { sudo -n true 2>/dev/null || [ -t 0 ]; }; then
      sudo=(sudo)
    else
      echo "deps: not root and no usable sudo; install them with:" >&2
      echo "        sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
      return 1
    fi
  fi

  echo "deps: installing with apt-get${sudo:+ (via sudo)}"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q &&
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      "${missing[@]}"
  local rc=$?
  if [ $rc -ne 0 ]; then
    echo "deps: apt-get failed ($rc); the missing packages were: ${missing[*]}" >&2
    return 1
  fi
}

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

# Everything scripts/test can use: the toolchain, Asio, doctest, Google Benchmark, clang
# with its runtime libraries (libFuzzer) for the fuzz stage, and clang 19 with libc++ and its
# sanitizer runtimes for the asan-ubsan stage. Boost is apart (asio_wheel_ensure_boost).
ASIO_WHEEL_DEPS=(cmake ninja-build g++ libasio-dev doctest-dev libbenchmark-dev clang
  libclang-rt-14-dev pkg-config clang-19 libc++-19-dev libc++abi-19-dev libclang-rt-19-dev)

# The Boost a Debian 12 user builds Boost.Asio programs with: Boost 1.81 (Boost.Asio 1.26,
# with Beast). Debian's default Boost, libboost-dev, is 1.74 (libboost1.74-dev), which
# conflicts with it: one Boost's headers in /usr/include at a time.
ASIO_WHEEL_BOOST_PACKAGE=libboost1.81-dev

#   asio_wheel_ensure_boost
#
# Makes ASIO_WHEEL_BOOST_PACKAGE the installed Boost (for the boost stage of scripts/test,
# and for anything else that needs the system's Boost.Asio and the rest of Boost, Beast
# included). apt-get replaces a conflicting Boost 1.74 only when ASIO_WHEEL_REPLACE_BOOST=1
# (CI sets it, or set it yourself); otherwise this says what is in the way and returns 1,
# so that a developer's Boost is never swapped behind their back.
asio_wheel_ensure_boost() {
  local package=$ASIO_WHEEL_BOOST_PACKAGE status
  status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null) || status=
  if [ "$status" = "install ok installed" ] || [ "${ASIO_WHEEL_SKIP_DEPS:-0}" = 1 ]; then
    asio_wheel_ensure_deps "$package"
    return
  fi
  local conflicting
  conflicting=$(dpkg-query -W -f='${Package} ${Status}\n' 'libboost1.74-dev' 'libboost-dev' \
    2>/dev/null | sed -n 's/ install ok installed$//p' | tr '\n' ' ')
  if [ -n "$conflicting" ] && [ "${ASIO_WHEEL_REPLACE_BOOST:-0}" != 1 ]; then
    echo "deps: $package is needed, and conflicts with the installed ${conflicting% }." >&2
    echo "      Rerun with ASIO_WHEEL_REPLACE_BOOST=1 to let apt-get replace it, or run:" >&2
    echo "        sudo apt-get install -y --no-install-recommends $package" >&2
    return 1
  fi
  asio_wheel_ensure_deps "$package"
}

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

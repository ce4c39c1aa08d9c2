// The version macros of include/asio_wheel/version.hpp, reached through asio_wheel.hpp as a
// user reaches them: the number in Boost's encoding and the string agree with the three parts,
// and the parts with the version CMake configured (ASIO_WHEEL_TEST_PROJECT_VERSION, from
// tests/CMakeLists.txt; version_consistency checks CMake and CHANGELOG.md against the header).

#include <asio_wheel.hpp>

#include <doctest/doctest.h>

#include <string>

static_assert(ASIO_WHEEL_VERSION == ASIO_WHEEL_VERSION_MAJOR * 100000 +
                                        ASIO_WHEEL_VERSION_MINOR * 100 + ASIO_WHEEL_VERSION_PATCH,
              "ASIO_WHEEL_VERSION is MAJOR * 100000 + MINOR * 100 + PATCH (Boost's XXYYZZ)");
static_assert(ASIO_WHEEL_VERSION_MINOR < 1000 && ASIO_WHEEL_VERSION_PATCH < 100,
              "the XXYYZZ encoding holds a minor below 1000 and a patch below 100");

TEST_CASE("the version string is MAJOR.MINOR.PATCH and matches CMake's project version") {
  const std::string parts = std::to_string(ASIO_WHEEL_VERSION_MAJOR) + "." +
                            std::to_string(ASIO_WHEEL_VERSION_MINOR) + "." +
                            std::to_string(ASIO_WHEEL_VERSION_PATCH);
  CHECK(std::string(ASIO_WHEEL_VERSION_STRING) == parts);
  CHECK(std::string(ASIO_WHEEL_VERSION_STRING) == ASIO_WHEEL_TEST_PROJECT_VERSION);
  CHECK(ASIO_WHEEL_VERSION / 100000 == ASIO_WHEEL_VERSION_MAJOR);
  CHECK(ASIO_WHEEL_VERSION / 100 % 1000 == ASIO_WHEEL_VERSION_MINOR);
  CHECK(ASIO_WHEEL_VERSION % 100 == ASIO_WHEEL_VERSION_PATCH);
}

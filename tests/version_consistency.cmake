# Distributed under the Boost Software License, Version 1.0. (See accompanying
# file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
#
# ctest version_consistency (cmake -P): the version is written once, in
# include/asio_wheel/version.hpp; checks that everything else says the same:
#   - the CMake project version this build was configured with (ASIO_WHEEL_PROJECT_VERSION),
#   - the package version file and the pkg-config files generated in the build tree
#     (ASIO_WHEEL_BUILD_DIR; when install rules are on),
#   - CHANGELOG.md: an "## [Unreleased]" section first, then the latest release's heading
#     "## [X.Y.Z] - YYYY-MM-DD" naming this version (Keep a Changelog).
# (find_package accepting 1.0 and refusing 2.0: tests/consumer/find_package.)
# The macros' arithmetic (ASIO_WHEEL_VERSION, the string) is checked by version_test.cpp.

foreach(_var ASIO_WHEEL_SOURCE_DIR ASIO_WHEEL_PROJECT_VERSION)
  if(NOT DEFINED ${_var} OR "${${_var}}" STREQUAL "")
    message(FATAL_ERROR "version_consistency: ${_var} is not set")
  endif()
endforeach()

set(_failures)
macro(_fail)
  string(CONCAT _msg ${ARGN})
  list(APPEND _failures "${_msg}")
  message(SEND_ERROR "version_consistency: ${_msg}")
endmacro()

file(STRINGS "${ASIO_WHEEL_SOURCE_DIR}/include/asio_wheel/version.hpp" _lines
     REGEX "^#define ASIO_WHEEL_VERSION_(MAJOR|MINOR|PATCH) [0-9]+$")
set(_version)
foreach(_part MAJOR MINOR PATCH)
  string(REGEX MATCH "ASIO_WHEEL_VERSION_${_part} ([0-9]+)" _ "${_lines}")
  if(CMAKE_MATCH_1 STREQUAL "")
    message(FATAL_ERROR "version_consistency: version.hpp has no ASIO_WHEEL_VERSION_${_part}")
  endif()
  list(APPEND _version "${CMAKE_MATCH_1}")
endforeach()
list(JOIN _version "." _version)
message(STATUS "version.hpp: ${_version}")

if(NOT ASIO_WHEEL_PROJECT_VERSION STREQUAL _version)
  _fail("CMake's project version is ${ASIO_WHEEL_PROJECT_VERSION} (reconfigure?), version.hpp says ${_version}")
endif()

if(ASIO_WHEEL_BUILD_DIR AND EXISTS "${ASIO_WHEEL_BUILD_DIR}/asio_wheelConfigVersion.cmake")
  file(STRINGS "${ASIO_WHEEL_BUILD_DIR}/asio_wheelConfigVersion.cmake" _pv
       REGEX "^set\\(PACKAGE_VERSION \"")
  if(NOT _pv MATCHES "\"${_version}\"")
    _fail("asio_wheelConfigVersion.cmake: '${_pv}', expected ${_version}")
  endif()
  foreach(_pc asio_wheel asio_wheel_boost)
    file(STRINGS "${ASIO_WHEEL_BUILD_DIR}/${_pc}.pc" _pcv REGEX "^Version: ")
    if(NOT _pcv STREQUAL "Version: ${_version}")
      _fail("${_pc}.pc: '${_pcv}', expected 'Version: ${_version}'")
    endif()
  endforeach()
  message(STATUS "package version file and pkg-config files: ${_version}")
else()
  message(STATUS "no install rules in this build: package files not checked")
endif()

# CHANGELOG.md, Keep a Changelog: level-2 headings are "[Unreleased]" then releases, newest
# first.
file(STRINGS "${ASIO_WHEEL_SOURCE_DIR}/CHANGELOG.md" _headings REGEX "^## ")
list(LENGTH _headings _n)
if(_n LESS 2)
  _fail("CHANGELOG.md needs an '## [Unreleased]' section and at least one release")
else()
  list(GET _headings 0 _first)
  list(GET _headings 1 _release)
  if(NOT _first STREQUAL "## [Unreleased]")
    _fail("CHANGELOG.md's first section is '${_first}', not '## [Unreleased]'")
  endif()
  string(REPLACE "." "\\." _version_re "${_version}")
  if(NOT _release MATCHES "^## \\[${_version_re}\\] - [0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]$")
    _fail("CHANGELOG.md's latest release is '${_release}', not '## [${_version}] - YYYY-MM-DD'")
  endif()
endif()
if(_failures)
  message(FATAL_ERROR "version_consistency: the versions disagree")
endif()
message(STATUS "version_consistency: version.hpp, CMake, the package files and CHANGELOG.md say ${_version}")

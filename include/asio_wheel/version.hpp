//
// version.hpp
// ~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_VERSION_HPP
#define ASIO_WHEEL_VERSION_HPP

// The one place the version is written: CMakeLists.txt reads these three lines for the
// project version (and so the package's version file and the pkg-config files), and
// tests/version_consistency.cmake checks that CHANGELOG.md's latest release agrees.

/// The major version: a change here breaks source compatibility (Semantic Versioning).
/// @ingroup version
#define ASIO_WHEEL_VERSION_MAJOR 1
/// The minor version: features added compatibly.
/// @ingroup version
#define ASIO_WHEEL_VERSION_MINOR 0
/// The patch version: fixes only.
/// @ingroup version
#define ASIO_WHEEL_VERSION_PATCH 0

/// The version as one number, in Boost's encoding (as BOOST_BEAST_VERSION, BOOST_VERSION):
/// MAJOR * 100000 + MINOR * 100 + PATCH, so 1.2.3 is 100203.
/// @ingroup version
#define ASIO_WHEEL_VERSION                                                                         \
  (ASIO_WHEEL_VERSION_MAJOR * 100000 + ASIO_WHEEL_VERSION_MINOR * 100 + ASIO_WHEEL_VERSION_PATCH)

/// @cond INTERNAL
#define ASIO_WHEEL_VERSION_STRINGIZE_2(x) #x
#define ASIO_WHEEL_VERSION_STRINGIZE(x) ASIO_WHEEL_VERSION_STRINGIZE_2(x)
/// @endcond

/// The version as a string literal, "MAJOR.MINOR.PATCH".
/// @ingroup version
#define ASIO_WHEEL_VERSION_STRING                                                                  \
  ASIO_WHEEL_VERSION_STRINGIZE(ASIO_WHEEL_VERSION_MAJOR)                                           \
  "." ASIO_WHEEL_VERSION_STRINGIZE(ASIO_WHEEL_VERSION_MINOR) "." ASIO_WHEEL_VERSION_STRINGIZE(     \
      ASIO_WHEEL_VERSION_PATCH)

#endif // ASIO_WHEEL_VERSION_HPP

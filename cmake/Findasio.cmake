# Distributed under the Boost Software License, Version 1.0. (See accompanying
# file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)

#[=======================================================================[.rst:
Findasio
--------

Finds standalone Asio (https://think-async.com/Asio/), which is header-only and, on Debian
and most distributions, ships no CMake package of its own.

A CMake package config for asio (vcpkg, Conan, a hand-made one) is tried first. Otherwise the
headers are searched for with ``find_path(asio.hpp)`` and the version is read from
``asio/version.hpp``.

Imported targets
^^^^^^^^^^^^^^^^

``asio::asio``
  INTERFACE target carrying the include directory and ``Threads::Threads`` (on Windows also
  Winsock's ``ws2_32`` and ``mswsock``, which Asio's socket code calls). It defines no
  macros: Debian's asio already is the standalone flavour, and defining configuration macros
  (``ASIO_STANDALONE``, ``ASIO_NO_DEPRECATED``, ...) here would silently change what the
  consumer's code sees.

Result variables
^^^^^^^^^^^^^^^^

``asio_FOUND``, ``asio_VERSION`` (e.g. ``1.22.1``), ``asio_INCLUDE_DIRS``.

Cache variables
^^^^^^^^^^^^^^^

``asio_INCLUDE_DIR``: the directory containing ``asio.hpp``.

This file is installed beside asio_wheel's package config, which extends ``CMAKE_MODULE_PATH``
to find it.
#]=======================================================================]

include(FindPackageHandleStandardArgs)

# 1. A real package config wins, if it provides the target we promise.
if(NOT TARGET asio::asio AND NOT asio_INCLUDE_DIR)
  set(_asio_config_args CONFIG QUIET)
  if(asio_FIND_VERSION)
    list(PREPEND _asio_config_args ${asio_FIND_VERSION})
  endif()
  find_package(asio ${_asio_config_args})
  unset(_asio_config_args)
  if(asio_FOUND AND TARGET asio::asio)
    if(NOT asio_FIND_QUIETLY)
      message(STATUS "Found asio: ${asio_DIR} (found version \"${asio_VERSION}\")")
    endif()
    return()
  endif()
  # A config without asio::asio, or none at all: fall back to the headers.
  unset(asio_FOUND)
endif()

# 2. Plain headers.
find_path(asio_INCLUDE_DIR NAMES asio.hpp DOC "Directory containing asio.hpp (standalone Asio)")
mark_as_advanced(asio_INCLUDE_DIR)

if(asio_INCLUDE_DIR AND EXISTS "${asio_INCLUDE_DIR}/asio/version.hpp")
  # #define ASIO_VERSION 102201 // 1.22.1
  file(STRINGS "${asio_INCLUDE_DIR}/asio/version.hpp" _asio_version_line
       REGEX "^#[ \t]*define[ \t]+ASIO_VERSION[ \t]+[0-9]+")
  string(REGEX REPLACE "^#[ \t]*define[ \t]+ASIO_VERSION[ \t]+([0-9]+).*$" "\\1" _asio_version_num
                       "${_asio_version_line}")
  if(_asio_version_num MATCHES "^[0-9]+$")
    math(EXPR _asio_major "${_asio_version_num} / 100000")
    math(EXPR _asio_minor "${_asio_version_num} / 100 % 1000")
    math(EXPR _asio_patch "${_asio_version_num} % 100")
    set(asio_VERSION "${_asio_major}.${_asio_minor}.${_asio_patch}")
    set(asio_VERSION_MAJOR "${_asio_major}")
    set(asio_VERSION_MINOR "${_asio_minor}")
    set(asio_VERSION_PATCH "${_asio_patch}")
  endif()
  unset(_asio_version_line)
  unset(_asio_version_num)
  unset(_asio_major)
  unset(_asio_minor)
  unset(_asio_patch)
endif()

# Asio's reactor and scheduler use threads; consumers need -pthread on every platform that has
# it. Forward QUIET so that an optional find_package(asio) stays silent.
if(asio_FIND_QUIETLY)
  find_package(Threads QUIET)
else()
  find_package(Threads)
endif()

find_package_handle_standard_args(
  asio
  REQUIRED_VARS asio_INCLUDE_DIR Threads_FOUND
  VERSION_VAR asio_VERSION
  HANDLE_VERSION_RANGE)

if(asio_FOUND)
  set(asio_INCLUDE_DIRS "${asio_INCLUDE_DIR}")
  # Guard: a parent project may already have created the target (its own Findasio, a package
  # manager); one definition per directory scope is all CMake allows.
  if(NOT TARGET asio::asio)
    add_library(asio::asio INTERFACE IMPORTED)
    set_target_properties(asio::asio PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${asio_INCLUDE_DIR}"
                                                INTERFACE_LINK_LIBRARIES Threads::Threads)
    # Asio's Windows sockets: without them any program that includes asio.hpp fails to link.
    if(WIN32)
      set_property(TARGET asio::asio APPEND PROPERTY INTERFACE_LINK_LIBRARIES ws2_32 mswsock)
    endif()
  endif()
endif()

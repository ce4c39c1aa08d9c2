# Distributed under the Boost Software License, Version 1.0. (See accompanying
# file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)

#[=======================================================================[.rst:
Findboost_asio
--------------

Finds Boost.Asio, header-only, for ``asio_wheel::asio_wheel_boost``. The rest of Boost
(config, system, ...) comes from ``find_package(Boost)``, as its ``Boost::headers`` target.

``boost/asio.hpp`` is searched for beside Boost's headers. Setting ``boost_asio_INCLUDE_DIR``
to another directory holding ``boost/asio.hpp`` uses that Boost.Asio instead, in front of
the Boost found (``scripts/test --boost-asio DIR`` does that); the version is read from its
``boost/asio/version.hpp``, and is Asio's (Boost 1.79 has 1.22.1, Boost 1.89 1.36.0).

Imported targets
^^^^^^^^^^^^^^^^

``boost_asio::boost_asio``
  INTERFACE target carrying the include directory, ``Boost::headers`` and
  ``Threads::Threads`` (on Windows also ``ws2_32`` and ``mswsock``). Like Findasio.cmake it defines no configuration macros.

Result variables
^^^^^^^^^^^^^^^^

``boost_asio_FOUND``, ``boost_asio_VERSION`` (e.g. ``1.36.0``), ``boost_asio_INCLUDE_DIRS``.

Cache variables
^^^^^^^^^^^^^^^

``boost_asio_INCLUDE_DIR``: the directory containing ``boost/asio.hpp``.

This file is installed beside asio_wheel's package config, which extends ``CMAKE_MODULE_PATH``
to find it.
#]=======================================================================]

include(FindPackageHandleStandardArgs)

# Quiet: an unsuitable or missing Boost is reported below, as boost_asio's.
if(NOT TARGET Boost::headers)
  find_package(Boost QUIET)
endif()

set(_boost_asio_hints)
if(Boost_INCLUDE_DIRS)
  set(_boost_asio_hints HINTS ${Boost_INCLUDE_DIRS})
elseif(TARGET Boost::headers)
  get_target_property(_boost_asio_hints Boost::headers INTERFACE_INCLUDE_DIRECTORIES)
  set(_boost_asio_hints HINTS ${_boost_asio_hints})
endif()
find_path(boost_asio_INCLUDE_DIR NAMES boost/asio.hpp ${_boost_asio_hints}
          DOC "Directory containing boost/asio.hpp (Boost.Asio)")
mark_as_advanced(boost_asio_INCLUDE_DIR)
unset(_boost_asio_hints)

unset(boost_asio_VERSION)
if(boost_asio_INCLUDE_DIR AND EXISTS "${boost_asio_INCLUDE_DIR}/boost/asio/version.hpp")
  # #define BOOST_ASIO_VERSION 103600 // 1.36.0
  file(STRINGS "${boost_asio_INCLUDE_DIR}/boost/asio/version.hpp" _boost_asio_version_line
       REGEX "^#[ \t]*define[ \t]+BOOST_ASIO_VERSION[ \t]+[0-9]+")
  string(REGEX REPLACE "^#[ \t]*define[ \t]+BOOST_ASIO_VERSION[ \t]+([0-9]+).*$" "\\1"
                       _boost_asio_version_num "${_boost_asio_version_line}")
  if(_boost_asio_version_num MATCHES "^[0-9]+$")
    math(EXPR _boost_asio_major "${_boost_asio_version_num} / 100000")
    math(EXPR _boost_asio_minor "${_boost_asio_version_num} / 100 % 1000")
    math(EXPR _boost_asio_patch "${_boost_asio_version_num} % 100")
    set(boost_asio_VERSION "${_boost_asio_major}.${_boost_asio_minor}.${_boost_asio_patch}")
  endif()
  unset(_boost_asio_version_line)
  unset(_boost_asio_version_num)
  unset(_boost_asio_major)
  unset(_boost_asio_minor)
  unset(_boost_asio_patch)
endif()

if(boost_asio_FIND_QUIETLY)
  find_package(Threads QUIET)
else()
  find_package(Threads)
endif()

set(_boost_asio_have_boost FALSE)
if(TARGET Boost::headers)
  set(_boost_asio_have_boost TRUE)
endif()

find_package_handle_standard_args(
  boost_asio
  REQUIRED_VARS boost_asio_INCLUDE_DIR _boost_asio_have_boost Threads_FOUND
  VERSION_VAR boost_asio_VERSION
  HANDLE_VERSION_RANGE)
unset(_boost_asio_have_boost)

if(boost_asio_FOUND)
  set(boost_asio_INCLUDE_DIRS "${boost_asio_INCLUDE_DIR}")
  if(NOT TARGET boost_asio::boost_asio)
    add_library(boost_asio::boost_asio INTERFACE IMPORTED)
    set_target_properties(
      boost_asio::boost_asio PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${boost_asio_INCLUDE_DIR}"
                                        INTERFACE_LINK_LIBRARIES "Boost::headers;Threads::Threads")
    # Boost.Asio's Windows sockets, as in Findasio.cmake.
    if(WIN32)
      set_property(TARGET boost_asio::boost_asio APPEND PROPERTY INTERFACE_LINK_LIBRARIES ws2_32
                                                                                       mswsock)
    endif()
  endif()
endif()

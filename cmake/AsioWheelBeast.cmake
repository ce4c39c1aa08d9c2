# Distributed under the Boost Software License, Version 1.0. (See accompanying
# file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
#
# Defines asio_wheel::asio_wheel_beast (INTERFACE: asio_wheel::asio_wheel_boost, whose
# Boost.Asio it uses) when the Boost.Asio flavour exists and Beast's basic_stream.hpp is found
# beside its Boost. Sets ASIO_WHEEL_BEAST_FOUND. Beast is header-only, so nothing else is
# linked; its headers come with Boost::headers.

set(ASIO_WHEEL_BEAST_FOUND FALSE)
if(TARGET asio_wheel_boost)
  set(_asio_wheel_beast_hints)
  if(boost_asio_INCLUDE_DIR)
    list(APPEND _asio_wheel_beast_hints "${boost_asio_INCLUDE_DIR}")
  endif()
  if(Boost_INCLUDE_DIRS)
    list(APPEND _asio_wheel_beast_hints ${Boost_INCLUDE_DIRS})
  endif()
  find_path(asio_wheel_beast_INCLUDE_DIR NAMES boost/beast/core/basic_stream.hpp
            HINTS ${_asio_wheel_beast_hints} DOC "Directory containing boost/beast/ (Beast)")
  mark_as_advanced(asio_wheel_beast_INCLUDE_DIR)
  unset(_asio_wheel_beast_hints)
  if(asio_wheel_beast_INCLUDE_DIR)
    add_library(asio_wheel_beast INTERFACE)
    add_library(asio_wheel::asio_wheel_beast ALIAS asio_wheel_beast)
    target_link_libraries(asio_wheel_beast INTERFACE asio_wheel_boost)
    set(ASIO_WHEEL_BEAST_FOUND TRUE)
  endif()
endif()

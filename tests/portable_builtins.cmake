# Distributed under the Boost Software License, Version 1.0. (See accompanying
# file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
#
# ctest portable_builtins (cmake -P): the headers (and the .ipp files they include) use a
# compiler's own extensions (__builtin_*, __sync_*, __atomic_*, 128-bit integers, __typeof__,
# __extension__, __attribute__) only in the wrappers that also have portable code for the
# compilers without them (MSVC among them), which we cannot build with here:
# detail/bit_ops.hpp (countr_zero, countl_zero) and detail/prefetch.hpp. Elsewhere one such
# call makes a header fail to compile there (session 31 found two: wait()'s
# __builtin_sub_overflow and drain_sweep's __builtin_ctzll). Comments (//, /* */ and the
# lines of a /** */ block) and string literals are not uses; a name split by a backslash-newline
# is one.

cmake_minimum_required(VERSION 3.21)

if(NOT DEFINED ASIO_WHEEL_SOURCE_DIR OR ASIO_WHEEL_SOURCE_DIR STREQUAL "")
  message(FATAL_ERROR "portable_builtins: ASIO_WHEEL_SOURCE_DIR is not set")
endif()
set(_wrappers asio_wheel/detail/bit_ops.hpp asio_wheel/detail/prefetch.hpp)
list(JOIN _wrappers ", " _wrapper_list)
set(_extensions "__builtin_|__sync_|__atomic_|__int128|__uint128|__typeof|__extension__|__attribute__")
set(_root "${ASIO_WHEEL_SOURCE_DIR}/include")
file(GLOB_RECURSE _headers RELATIVE "${_root}" "${_root}/*.hpp" "${_root}/*.ipp")
list(LENGTH _headers _count)
if(_count LESS 10)
  message(FATAL_ERROR "portable_builtins: only ${_count} headers under ${_root}")
endif()
set(_found 0)
foreach(_header IN LISTS _headers)
  if(_header IN_LIST _wrappers)
    continue()
  endif()
  file(READ "${_root}/${_header}" _text)
  # Lines continued with a backslash joined (as the preprocessor does first), comments and
  # string literals out, then one list item per line: ';', '[' and ']' would split or join
  # CMake's list items, so they go first.
  string(REPLACE "\\\n" "" _text "${_text}")
  if(NOT _text MATCHES "${_extensions}")
    continue()
  endif()
  string(REGEX REPLACE "/\\*([^*]|\\*+[^*/])*\\*+/" " " _text "${_text}")
  string(REGEX REPLACE "\"([^\"\\\\\n]|\\\\.)*\"" "\"\"" _text "${_text}")
  string(REGEX REPLACE "//[^\n]*" "" _text "${_text}")
  string(REGEX REPLACE "[][;]" " " _text "${_text}")
  string(REPLACE "\n" ";" _lines "${_text}")
  foreach(_line IN LISTS _lines)
    if(_line MATCHES "${_extensions}")
      string(STRIP "${_line}" _line)
      message(SEND_ERROR "portable_builtins: ${_header}: '${_line}': a compiler extension "
                         "outside the wrappers (${_wrapper_list}); call the wrapper, or add "
                         "one with portable code beside it")
      math(EXPR _found "${_found} + 1")
    endif()
  endforeach()
endforeach()
if(_found GREATER 0)
  message(FATAL_ERROR "portable_builtins: ${_found} uses outside the wrappers")
endif()
message(STATUS "portable_builtins: ${_count} headers, compiler extensions only in ${_wrapper_list}")

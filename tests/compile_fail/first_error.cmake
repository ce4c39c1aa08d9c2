# Distributed under the Boost Software License, Version 1.0. (See accompanying
# file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
#
# cmake -DBUILD_DIR=... -DTARGET=... -DEXPECT=<regex> -P first_error.cmake
#
# Builds TARGET, which must not compile, and passes when the compiler's first error line
# (GCC's and Clang's "file:line:col: error: ...", MSVC's "file(line): error Cnnnn: ...")
# matches EXPECT: the message a user sees first says what to do, whatever follows it.
foreach(_var BUILD_DIR TARGET EXPECT)
  if(NOT DEFINED ${_var})
    message(FATAL_ERROR "first_error.cmake: ${_var} not given")
  endif()
endforeach()
execute_process(COMMAND "${CMAKE_COMMAND}" --build "${BUILD_DIR}" --target "${TARGET}"
                RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
if(_rc EQUAL 0)
  message(FATAL_ERROR "${TARGET} compiled; it must not")
endif()
string(REGEX MATCH "[^\n]*(: |\\): )(fatal )?error( C[0-9]+)?:[^\n]*" _first "${_out}")
if(_first STREQUAL "")
  message(FATAL_ERROR "${TARGET} failed without a compiler error line:\n${_out}")
endif()
if(NOT _first MATCHES "${EXPECT}")
  message(FATAL_ERROR "${TARGET}: the first error line does not match '${EXPECT}':\n${_first}")
endif()
message(STATUS "first error line: ${_first}")

# Distributed under the Boost Software License, Version 1.0. (See accompanying
# file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
#
# cmake -DBUILD_DIR=... -DTARGET=... -DEXPECT=<regex> -P link_fail.cmake
#
# Builds TARGET, whose translation units compile but must not link together, and passes when
# the build fails and its output matches EXPECT (the linker's undefined reference, which
# names what differs), and the output has no compiler error.
foreach(_var BUILD_DIR TARGET EXPECT)
  if(NOT DEFINED ${_var})
    message(FATAL_ERROR "link_fail.cmake: ${_var} not given")
  endif()
endforeach()
execute_process(COMMAND "${CMAKE_COMMAND}" --build "${BUILD_DIR}" --target "${TARGET}"
                RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
if(_rc EQUAL 0)
  message(FATAL_ERROR "${TARGET} linked; it must not")
endif()
if(_out MATCHES "\\.(cpp|hpp|ipp):[0-9]+(:[0-9]+)?: (fatal )?error")
  message(FATAL_ERROR "${TARGET} failed to compile, not to link:\n${_out}")
endif()
if(NOT _out MATCHES "${EXPECT}")
  message(FATAL_ERROR "${TARGET}: the link failed without matching '${EXPECT}':\n${_out}")
endif()
string(REGEX MATCH "[^\n]*separate_compilation_config_must_match_src_hpp[^\n]*" _line "${_out}")
message(STATUS "link error: ${_line}")

# Distributed under the Boost Software License, Version 1.0. (See accompanying
# file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
#
# cmake -DPROGRAM=... -DEXPECT=<regex> -P expect_message.cmake
#
# Runs PROGRAM, which misuses the library and must stop (an assertion: SIGABRT, which ctest
# would count as a failure whatever the output), and passes when its output matches EXPECT.
foreach(_var PROGRAM EXPECT)
  if(NOT DEFINED ${_var})
    message(FATAL_ERROR "expect_message.cmake: ${_var} not given")
  endif()
endforeach()
execute_process(COMMAND "${PROGRAM}" RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out
                TIMEOUT 30)
if(_rc EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} did not stop (exit status 0):\n${_out}")
endif()
if(NOT _out MATCHES "${EXPECT}")
  message(FATAL_ERROR "${PROGRAM} stopped (${_rc}) without the message '${EXPECT}':\n${_out}")
endif()
message(STATUS "stopped (${_rc}) with the message")

# Distributed under the Boost Software License, Version 1.0. (See accompanying
# file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
#
# Runs one consumer-project test (cmake -P), as registered by tests/CMakeLists.txt:
#   ASIO_WHEEL_CONSUMER_KIND=find_package      install the build tree into a fresh prefix, then
#                                              configure/build/run consumer/find_package against it
#   ASIO_WHEEL_CONSUMER_KIND=add_subdirectory  configure/build/run consumer/add_subdirectory,
#                                              which adds the source tree as a subdirectory
#   ASIO_WHEEL_CONSUMER_FLAVOUR=standalone|boost  the target the consumer links:
#                                              asio_wheel::asio_wheel or asio_wheel_boost
#   ASIO_WHEEL_CONSUMER_COMPILED=ON|OFF        link the flavour's separately compiled mode
#                                              (asio_wheel::asio_wheel_compiled or _boost_compiled)
#   ASIO_WHEEL_CONSUMER_CACHE                  -D arguments for the consumer's configure,
#                                              separated by '|' (where this build found Asio)
# The work directory is recreated on every run, so nothing stale can make the test pass.

cmake_minimum_required(VERSION 3.21...3.25)

foreach(_var ASIO_WHEEL_CONSUMER_KIND ASIO_WHEEL_CONSUMER_WORK_DIR ASIO_WHEEL_SOURCE_DIR
             ASIO_WHEEL_CONSUMER_GENERATOR ASIO_WHEEL_CONSUMER_CXX_COMPILER)
  if(NOT DEFINED ${_var} OR "${${_var}}" STREQUAL "")
    message(FATAL_ERROR "run.cmake: ${_var} is not set")
  endif()
endforeach()

set(_kind "${ASIO_WHEEL_CONSUMER_KIND}")
set(_flavour "${ASIO_WHEEL_CONSUMER_FLAVOUR}")
if(_flavour STREQUAL "")
  set(_flavour standalone)
endif()
if(_flavour STREQUAL "standalone")
  set(_targets_file asio_wheelTargets.cmake)
  set(_pc_name asio_wheel)
elseif(_flavour STREQUAL "boost")
  set(_targets_file asio_wheelBoostTargets.cmake)
  set(_pc_name asio_wheel_boost)
else()
  message(FATAL_ERROR "run.cmake: unknown ASIO_WHEEL_CONSUMER_FLAVOUR '${_flavour}'")
endif()
set(_compiled OFF)
if(ASIO_WHEEL_CONSUMER_COMPILED)
  set(_compiled ON)
  set(_pc_name "${_pc_name}_compiled")
endif()
string(REPLACE "|" ";" _consumer_cache "${ASIO_WHEEL_CONSUMER_CACHE}")
set(_work "${ASIO_WHEEL_CONSUMER_WORK_DIR}")
set(_config "${ASIO_WHEEL_CONSUMER_CONFIG}")
if(_config STREQUAL "")
  set(_config Debug)
endif()

function(run_step _what)
  string(REPLACE ";" " " _pretty "${ARGN}")
  message(STATUS "[${_kind}, ${_flavour}, compiled ${_compiled}] ${_what}: ${_pretty}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE _result TIMEOUT 240)
  if(NOT _result EQUAL 0)
    message(FATAL_ERROR "[${_kind}] ${_what} failed (${_result})")
  endif()
endfunction()

file(REMOVE_RECURSE "${_work}")
file(MAKE_DIRECTORY "${_work}")

set(_configure_args
    -S "${ASIO_WHEEL_SOURCE_DIR}/tests/consumer/${_kind}"
    -B "${_work}/build"
    -G "${ASIO_WHEEL_CONSUMER_GENERATOR}"
    "-DCMAKE_CXX_COMPILER=${ASIO_WHEEL_CONSUMER_CXX_COMPILER}"
    "-DCMAKE_CXX_FLAGS=${ASIO_WHEEL_CONSUMER_CXX_FLAGS}"
    "-DCMAKE_EXE_LINKER_FLAGS=${ASIO_WHEEL_CONSUMER_EXE_LINKER_FLAGS}"
    "-DCMAKE_BUILD_TYPE=${_config}"
    # Only what the test provides: not the user package registry, not a system install.
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
    "-DASIO_WHEEL_CONSUMER_FLAVOUR=${_flavour}"
    "-DASIO_WHEEL_CONSUMER_COMPILED=${_compiled}"
    ${_consumer_cache})
if(ASIO_WHEEL_CONSUMER_MAKE_PROGRAM)
  list(APPEND _configure_args "-DCMAKE_MAKE_PROGRAM=${ASIO_WHEEL_CONSUMER_MAKE_PROGRAM}")
endif()

if(_kind STREQUAL "find_package")
  if(NOT ASIO_WHEEL_BUILD_DIR)
    message(FATAL_ERROR "run.cmake: ASIO_WHEEL_BUILD_DIR is not set")
  endif()
  set(_prefix "${_work}/prefix")
  run_step("install" "${CMAKE_COMMAND}" --install "${ASIO_WHEEL_BUILD_DIR}" --prefix "${_prefix}"
           --config "${_config}")

  # The package must be relocatable: it is installed into a prefix chosen only now.
  foreach(_file include/asio_wheel.hpp share/cmake/asio_wheel/asio_wheelConfig.cmake
                share/cmake/asio_wheel/asio_wheelConfigVersion.cmake
                share/cmake/asio_wheel/${_targets_file} share/cmake/asio_wheel/Findasio.cmake
                share/cmake/asio_wheel/Findboost_asio.cmake share/pkgconfig/${_pc_name}.pc)
    if(NOT EXISTS "${_prefix}/${_file}")
      message(FATAL_ERROR "[${_kind}] not installed: ${_file}")
    endif()
  endforeach()
  if(_compiled)
    file(GLOB _compiled_export "${_prefix}/share/cmake/asio_wheel/${_pc_name}Targets.cmake")
    file(GLOB_RECURSE _compiled_lib
         "${_prefix}/*${_pc_name}.lib" "${_prefix}/*${_pc_name}.a")
    if(NOT _compiled_export OR NOT _compiled_lib)
      message(FATAL_ERROR "[${_kind}] ${_pc_name}: its export or its library is not installed")
    endif()
  endif()

  # The version the installed package must report, from the one place it is written.
  file(STRINGS "${ASIO_WHEEL_SOURCE_DIR}/include/asio_wheel/version.hpp" _version_lines
       REGEX "^#define ASIO_WHEEL_VERSION_(MAJOR|MINOR|PATCH) [0-9]+$")
  set(_version)
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX MATCH "ASIO_WHEEL_VERSION_${_part} ([0-9]+)" _ "${_version_lines}")
    list(APPEND _version "${CMAKE_MATCH_1}")
  endforeach()
  list(JOIN _version "." _version)

  # pkg-config: the include directory it reports must hold the installed headers.
  find_program(_pkg_config NAMES pkg-config pkgconf)
  if(_pkg_config)
    set(ENV{PKG_CONFIG_PATH} "${_prefix}/share/pkgconfig")
    execute_process(
      COMMAND "${_pkg_config}" --cflags ${_pc_name}
      OUTPUT_VARIABLE _cflags
      OUTPUT_STRIP_TRAILING_WHITESPACE
      RESULT_VARIABLE _result)
    if(NOT _result EQUAL 0 OR NOT _cflags MATCHES "-I([^ ]+)")
      message(FATAL_ERROR "[${_kind}] pkg-config --cflags ${_pc_name} failed: '${_cflags}'")
    endif()
    set(_pc_include "${CMAKE_MATCH_1}")
    if(NOT EXISTS "${_pc_include}/asio_wheel.hpp")
      message(FATAL_ERROR "[${_kind}] pkg-config include dir ${_pc_include} has no asio_wheel.hpp")
    endif()
    if(_compiled AND NOT _cflags MATCHES "-DASIO_WHEEL_SEPARATE_COMPILATION")
      message(FATAL_ERROR "[${_kind}] ${_pc_name}.pc does not select the separate mode: '${_cflags}'")
    endif()
    if(_flavour STREQUAL "boost" AND NOT _cflags MATCHES "-DASIO_WHEEL_USE_BOOST_ASIO")
      message(FATAL_ERROR "[${_kind}] ${_pc_name}.pc does not select Boost.Asio: '${_cflags}'")
    endif()
    message(STATUS "[${_kind}] pkg-config --cflags ${_pc_name}: ${_cflags}")
    execute_process(
      COMMAND "${_pkg_config}" --modversion ${_pc_name}
      OUTPUT_VARIABLE _pc_version
      OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(NOT _pc_version STREQUAL _version)
      message(FATAL_ERROR "[${_kind}] ${_pc_name}.pc says version '${_pc_version}', version.hpp '${_version}'")
    endif()
  else()
    message(STATUS "[${_kind}] pkg-config not found; .pc file not checked")
  endif()

  list(APPEND _configure_args "-DCMAKE_PREFIX_PATH=${_prefix}"
       "-DASIO_WHEEL_CONSUMER_EXPECTED_VERSION=${_version}")
  run_step("configure" "${CMAKE_COMMAND}" ${_configure_args})

  # It must have been this prefix's package that was found.
  file(STRINGS "${_work}/build/CMakeCache.txt" _found_dir REGEX "^asio_wheel_DIR:")
  string(REGEX REPLACE "^[^=]*=" "" _found_dir "${_found_dir}")
  file(REAL_PATH "${_found_dir}" _found_dir)
  file(REAL_PATH "${_prefix}" _real_prefix)
  string(FIND "${_found_dir}" "${_real_prefix}/" _at)
  if(NOT _at EQUAL 0)
    message(FATAL_ERROR "[${_kind}] found asio_wheel in ${_found_dir}, not in ${_real_prefix}")
  endif()
elseif(_kind STREQUAL "add_subdirectory")
  list(APPEND _configure_args "-DASIO_WHEEL_SOURCE_DIR=${ASIO_WHEEL_SOURCE_DIR}")
  run_step("configure" "${CMAKE_COMMAND}" ${_configure_args})
else()
  message(FATAL_ERROR "run.cmake: unknown ASIO_WHEEL_CONSUMER_KIND '${_kind}'")
endif()

run_step("build" "${CMAKE_COMMAND}" --build "${_work}/build" --config "${_config}")

set(_exe "${_work}/build/asio_wheel_consumer")
if(NOT EXISTS "${_exe}")
  set(_exe "${_work}/build/${_config}/asio_wheel_consumer") # multi-config generators
endif()
run_step("run" "${_exe}")

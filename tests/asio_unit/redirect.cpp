//
// asio_unit/redirect.cpp
// ~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// Asio's own unit test of asio::cancel_after or asio::cancel_at (src/tests/unit/cancel_after.cpp
// or cancel_at.cpp of Asio 1.31 and later), compiled as it is but calling asio_wheel's
// adapters: a mechanical redirection done when it is compiled, nothing of Asio's copied.
//
// ASIO_WHEEL_ASIO_UNIT_TEST_FILE names the test file (a string literal, set by
// tests/CMakeLists.txt from ASIO_WHEEL_ASIO_UNIT_TEST_DIR). Every header that the test file
// includes is included first, so that their include guards keep them from being read again
// below; then the two names are macros for asio_wheel's, and the test file is included. Its
// calls are unqualified, after `using namespace asio`, so each `cancel_after(...)` and
// `cancel_at(...)` becomes `::asio_wheel::cancel_after(...)` / `::asio_wheel::cancel_at(...)`;
// the test's own identifiers (cancel_after_function_object_test, the suite's name, which is
// a string) are other tokens and stay as they are. The test's main() reports each test case
// "passed" or "failed" and returns non-zero on any failure.

#include <asio_wheel/cancel_after.hpp>

#include <asio/cancel_after.hpp>
#include <asio/cancel_at.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

#include <functional>

#include "unit_test.hpp" // beside the test file: its directory is on the include path

#define cancel_after ::asio_wheel::cancel_after
#define cancel_at ::asio_wheel::cancel_at

#include ASIO_WHEEL_ASIO_UNIT_TEST_FILE

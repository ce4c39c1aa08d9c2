//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// The separately compiled part as a user's own source, compiled with its target's
// configuration: with the defaults for the link-time configuration check (tests/CMakeLists.txt;
// its object comes first on the link line, before the users' translation units), and with the
// shard macros of the tests that set them, in the separately compiled mode.

#include <asio_wheel/src.hpp>

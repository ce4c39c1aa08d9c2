//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// A translation unit of a separately compiled program that includes every header and uses no
// timer: it must link as well (it takes part in the configuration check all the same).

#include <asio_wheel.hpp>

int link_config_no_timer() {
  return 0;
}

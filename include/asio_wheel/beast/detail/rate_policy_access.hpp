//
// beast/detail/rate_policy_access.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_BEAST_DETAIL_RATE_POLICY_ACCESS_HPP
#define ASIO_WHEEL_BEAST_DETAIL_RATE_POLICY_ACCESS_HPP

#include <boost/beast/core/basic_stream.hpp>
#include <boost/beast/core/rate_policy.hpp>

#include <cstddef>

namespace asio_wheel::beast_detail {

// Names the specialization below; never defined.
struct rate_policy_key;

} // namespace asio_wheel::beast_detail

// A rate policy's interface is private: Beast's policies (and a user's, as Beast's documentation
// tells them to write one) befriend boost::beast::rate_policy_access, whose members are private
// too and befriend every specialization of boost::beast::basic_stream. This specialization, for
// a key type of ours that no program can name otherwise, is the one door through that
// friendship: asio_wheel::basic_stream calls a policy exactly as Beast's stream does.
namespace boost::beast {

template <class Policy>
class basic_stream<::asio_wheel::beast_detail::rate_policy_key, Policy,
                   ::asio_wheel::beast_detail::rate_policy_key> {
public:
  static std::size_t available_read_bytes(Policy& p) {
    return rate_policy_access::available_read_bytes(p);
  }
  static std::size_t available_write_bytes(Policy& p) {
    return rate_policy_access::available_write_bytes(p);
  }
  static void transfer_read_bytes(Policy& p, std::size_t n) {
    rate_policy_access::transfer_read_bytes(p, n);
  }
  static void transfer_write_bytes(Policy& p, std::size_t n) {
    rate_policy_access::transfer_write_bytes(p, n);
  }
  static void on_timer(Policy& p) { rate_policy_access::on_timer(p); }
};

} // namespace boost::beast

namespace asio_wheel::beast_detail {

template <class Policy>
using rate_policy_access = ::boost::beast::basic_stream<rate_policy_key, Policy, rate_policy_key>;

} // namespace asio_wheel::beast_detail

#endif // ASIO_WHEEL_BEAST_DETAIL_RATE_POLICY_ACCESS_HPP

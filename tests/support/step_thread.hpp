//
// step_thread.hpp
// ~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_TEST_STEP_THREAD_HPP
#define ASIO_WHEEL_TEST_STEP_THREAD_HPP

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace asio_wheel::test {

// One thread that runs the steps given to it, one at a time, each before run() returns: the
// same thread, so the same shard, for every step (on_new_thread takes a new one each time).
class step_thread {
public:
  step_thread() : thread_([this] { loop(); }) {}
  step_thread(const step_thread&) = delete;
  step_thread& operator=(const step_thread&) = delete;
  ~step_thread() {
    {
      std::lock_guard lock(mutex_);
      quit_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }

  void run(std::function<void()> step) {
    std::unique_lock lock(mutex_);
    step_ = std::move(step);
    changed_.notify_all();
    changed_.wait(lock, [&] { return !step_; });
  }

private:
  void loop() {
    std::unique_lock lock(mutex_);
    for (;;) {
      changed_.wait(lock, [&] { return step_ || quit_; });
      if (!step_)
        return;
      step_();
      step_ = nullptr;
      changed_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::function<void()> step_;
  bool quit_ = false;
  std::thread thread_; // last: it starts with the members above made
};

} // namespace asio_wheel::test

#endif // ASIO_WHEEL_TEST_STEP_THREAD_HPP

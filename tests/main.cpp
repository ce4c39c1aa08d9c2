// The doctest main shared by every tests/*_test.cpp executable (object library
// asio_wheel_test_main), and by the bundle (ASIO_WHEEL_TEST_BUNDLE: several test files in one
// program, each file its own ctest, chosen with --source-file).
//
// --asio-wheel-require-cases (our option; doctest ignores what it does not know): fail when
// no test case passed the filters. A bundle's ctest selects its file by name, so a renamed or
// misspelled file would otherwise run nothing and pass.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>

namespace {

// Written by the listener at the end of the run: how many test cases the filters let run.
unsigned cases_passing_filters = 0;

struct case_counter : doctest::IReporter {
  explicit case_counter(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& stats) override {
    cases_passing_filters = stats.numTestCasesPassingFilters;
  }
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

} // namespace

DOCTEST_REGISTER_LISTENER("asio_wheel_case_counter", 1, case_counter);

int main(int argc, char** argv) {
  bool require_cases = false;
  for (int i = 1; i < argc; ++i)
    require_cases = require_cases || std::strcmp(argv[i], "--asio-wheel-require-cases") == 0;
  doctest::Context context(argc, argv);
  const int result = context.run();
  if (context.shouldExit() || result != 0 || !require_cases)
    return result;
  if (cases_passing_filters == 0) {
    std::fprintf(stderr, "asio_wheel test main: no test case passed the filters "
                         "(--asio-wheel-require-cases)\n");
    return 1;
  }
  return 0;
}

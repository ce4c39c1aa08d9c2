// The doctest main shared by every tests/*_test.cpp executable (object library
// asio_wheel_test_main).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

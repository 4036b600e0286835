// Error and Status: messages name the argument and its value; throw_if_error throws Error only
// for failures.
#include <catch2/catch.hpp>

#include "pagedattn/core/error.hpp"

using namespace pagedattn;

TEST_CASE("make_error names the argument, the value and the requirement", "[errors]") {
  const Status status = detail::make_error(Errc::out_of_range, "slot_mapping[3]", -7, "must be < 64");
  REQUIRE_FALSE(status.ok());
  REQUIRE(status.code() == Errc::out_of_range);
  REQUIRE(status.argument() == "slot_mapping[3]");
  REQUIRE(status.message() == "pagedattn: slot_mapping[3] = -7: must be < 64");
  REQUIRE(detail::make_error(Errc::invalid_argument, "scale", 0.5f, "x").message() ==
          "pagedattn: scale = 0.5: x");
  REQUIRE(detail::make_error(Errc::unsupported, "isa", std::string_view("amx"), "y").message() ==
          "pagedattn: isa = 'amx': y");
}

TEST_CASE("throw_if_error throws Error carrying the status, and nothing on success", "[errors]") {
  REQUIRE_NOTHROW(detail::throw_if_error(Status{}));
  try {
    detail::throw_if_error(detail::make_error(Errc::size_overflow, "num_blocks", 1ull << 63, "too big"));
    FAIL("expected an Error");
  } catch (const Error& error) {
    REQUIRE(error.code() == Errc::size_overflow);
    REQUIRE(error.argument() == "num_blocks");
    REQUIRE(std::string(error.what()) == "pagedattn: num_blocks = 9223372036854775808: too big");
  }
}

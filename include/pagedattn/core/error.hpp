// Error reporting: pagedattn::Error (thrown) and pagedattn::Status (returned by validate functions).
#pragma once

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "pagedattn/config.hpp"

namespace pagedattn {

/// Category of a failure.
enum class Errc {
  ok = 0,            ///< No error.
  invalid_argument,  ///< An argument has a bad value (shape, stride, scale, flag...).
  size_mismatch,     ///< Two arguments that must agree in size do not.
  out_of_range,      ///< An index or slot lies outside its container.
  size_overflow,     ///< A size computation does not fit in 64 bits.
  unsupported,       ///< Valid request this build or CPU cannot serve (e.g. an ISA).
  runtime_failure,   ///< The operating system refused something (threads, permissions).
};

/// Outcome of a validation: `ok()` or an error code with a message naming the argument and value.
class Status {
 public:
  /// A success.
  Status() = default;
  /// A failure of category `code` (not Errc::ok) on `argument`, described by `message`.
  Status(Errc code, std::string argument, std::string message)
      : code_(code), argument_(std::move(argument)), message_(std::move(message)) {}

  /// True when no error occurred.
  [[nodiscard]] bool ok() const noexcept { return code_ == Errc::ok; }
  /// The error category (Errc::ok on success).
  [[nodiscard]] Errc code() const noexcept { return code_; }
  /// Name of the offending argument (empty on success).
  [[nodiscard]] const std::string& argument() const noexcept { return argument_; }
  /// Full human-readable message (empty on success).
  [[nodiscard]] const std::string& message() const noexcept { return message_; }

 private:
  Errc code_ = Errc::ok;
  std::string argument_;
  std::string message_;
};

/// Exception thrown by the library's throwing entry points; carries the failing Status.
class Error : public std::runtime_error {
 public:
  /// Wraps a failed `status`.
  explicit Error(Status status) : std::runtime_error(status.message()), status_(std::move(status)) {}
  /// The error category.
  [[nodiscard]] Errc code() const noexcept { return status_.code(); }
  /// Name of the offending argument.
  [[nodiscard]] const std::string& argument() const noexcept { return status_.argument(); }
  /// The failed status.
  [[nodiscard]] const Status& status() const noexcept { return status_; }

 private:
  Status status_;
};

namespace detail {

/// Text of a value for an error message: integers and floats exactly, strings quoted, other
/// pointers as hexadecimal addresses ("0x7f00deadbeef"; "nullptr").
template <class T>
std::string describe_value(const T& value) {
  if constexpr (std::is_same_v<T, bool>) {
    return value ? "true" : "false";
  } else if constexpr (std::is_pointer_v<T> && !std::is_same_v<std::remove_cv_t<std::remove_pointer_t<T>>, char>) {
    if (value == nullptr) return "nullptr";
    char buffer[2 + 2 * sizeof(std::uintptr_t)] = {'0', 'x'};
    const auto result = std::to_chars(buffer + 2, buffer + sizeof(buffer), reinterpret_cast<std::uintptr_t>(value), 16);
    return std::string(buffer, result.ptr);
  } else if constexpr (std::is_null_pointer_v<T>) {
    return "nullptr";
  } else if constexpr (std::is_arithmetic_v<T>) {
    char buffer[64];
    const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
    return std::string(buffer, result.ptr);
  } else if constexpr (std::is_enum_v<T>) {
    return describe_value(static_cast<std::underlying_type_t<T>>(value));
  } else {
    const std::string_view text(value);
    std::string quoted;
    quoted.reserve(text.size() + 2);
    quoted.push_back('\'');
    quoted.append(text);
    quoted.push_back('\'');
    return quoted;
  }
}

/// A failed Status: "pagedattn: <argument> = <value>: <requirement>".
template <class T>
Status make_error(Errc code, std::string_view argument, const T& value,
                  std::string_view requirement) {
  std::string message = "pagedattn: ";
  message.append(argument).append(" = ").append(describe_value(value)).append(": ");
  message.append(requirement);
  return Status(code, std::string(argument), std::move(message));
}

/// Throws Error(status) when `status` failed (or prints and aborts when built without exceptions).
inline void throw_if_error(Status status) {
  if (status.ok()) return;
#if PAGEDATTN_HAS_EXCEPTIONS
  throw Error(std::move(status));
#else
  std::fprintf(stderr, "%s\n", status.message().c_str());
  std::abort();
#endif
}

}  // namespace detail
}  // namespace pagedattn

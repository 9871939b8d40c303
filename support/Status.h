#ifndef OCTET_SUPPORT_STATUS_H
#define OCTET_SUPPORT_STATUS_H

// Error values for code that must not depend on LLVM (the runtime, the spec
// reader). A failed Status carries a message written for the user: it names
// the field or file at fault and, where there is one, the fix.

#include <optional>
#include <string>
#include <utility>

namespace octet {

class [[nodiscard]] Status {
public:
  static Status ok() { return Status(); }
  static Status error(std::string message) {
    Status s;
    s.message_ = std::move(message);
    s.failed_ = true;
    return s;
  }
  bool isOk() const { return !failed_; }
  explicit operator bool() const { return !failed_; }
  const std::string &message() const { return message_; }
  // Prepends context ("while reading X: ") to a failure.
  Status withContext(const std::string &context) const {
    if (!failed_)
      return *this;
    return error(context + ": " + message_);
  }

private:
  std::string message_;
  bool failed_ = false;
};

template <typename T> class [[nodiscard]] StatusOr {
public:
  StatusOr(T value) : value_(std::move(value)) {}
  StatusOr(Status status) : status_(std::move(status)) {}
  bool isOk() const { return value_.has_value(); }
  explicit operator bool() const { return isOk(); }
  const Status &status() const { return status_; }
  T &value() { return *value_; }
  const T &value() const { return *value_; }
  T &operator*() { return *value_; }
  T *operator->() { return &*value_; }

private:
  std::optional<T> value_;
  Status status_;
};

} // namespace octet

// Propagates a failed Status.
#define OCTET_RETURN_IF_ERROR(expr)                                            \
  do {                                                                         \
    ::octet::Status octetStatus_ = (expr);                                     \
    if (!octetStatus_)                                                         \
      return octetStatus_;                                                     \
  } while (0)

#endif

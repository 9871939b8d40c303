#ifndef OCTET_TESTS_UNIT_COMM_MENTIONS_H
#define OCTET_TESTS_UNIT_COMM_MENTIONS_H

// Checks on messages, each showing the whole text when it fails.

#include "support/Status.h"

#include <gtest/gtest.h>

#include <string>

namespace octet::test {

inline ::testing::AssertionResult mentions(const std::string &text,
                                           const std::string &part) {
  if (text.find(part) != std::string::npos)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "'" << part << "' is not in: " << text;
}

// A failure whose message is one line that mentions `part`.
inline ::testing::AssertionResult failsWith(const Status &status,
                                            const std::string &part) {
  if (status)
    return ::testing::AssertionFailure()
           << "succeeded; expected an error mentioning '" << part << "'";
  if (status.message().find('\n') != std::string::npos)
    return ::testing::AssertionFailure()
           << "a message of more than one line: " << status.message();
  return mentions(status.message(), part);
}

template <typename T>
::testing::AssertionResult failsWith(const StatusOr<T> &value,
                                     const std::string &part) {
  if (value.isOk())
    return ::testing::AssertionFailure()
           << "succeeded; expected an error mentioning '" << part << "'";
  return failsWith(value.status(), part);
}

} // namespace octet::test

#endif

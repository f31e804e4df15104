// trainkit/optim/detail/number_text.hpp — shortest round-trip text of a float for error messages.
//
// Config errors quote the value the user gave ("beta2 must be in [0,1): 1.5"); std::to_string
// would print "1.500000" and hide the difference between 0.95 and 0.9500001.
#pragma once

#include <charconv>
#include <string>

namespace trainkit::optim::detail {

inline std::string number_text(float value) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, value);
  return std::string(buf, r.ptr);
}

/// The same for a double setting (a ratio); its own name, so that no call becomes ambiguous.
inline std::string double_text(double value) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, value);
  return std::string(buf, r.ptr);
}

}  // namespace trainkit::optim::detail

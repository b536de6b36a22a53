// JSON string escaping for the hand-written JSON of metrics and traces.
#ifndef RINGSIDE_COMMON_JSON_ESCAPE_H_
#define RINGSIDE_COMMON_JSON_ESCAPE_H_

#include <string>

#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace ringside {

// Escapes `s` for use inside a JSON string literal (RFC 8259 section 7).
inline std::string JsonEscape(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

}  // namespace ringside

#endif  // RINGSIDE_COMMON_JSON_ESCAPE_H_

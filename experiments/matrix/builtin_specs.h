// The specs compiled into the binary. Their text is the file under specs/ itself,
// embedded at build time (BUILD: builtin_specs_gen), so the file a user reads and
// edits and the spec `ringside demo` runs cannot differ.
#ifndef RINGSIDE_EXPERIMENTS_MATRIX_BUILTIN_SPECS_H_
#define RINGSIDE_EXPERIMENTS_MATRIX_BUILTIN_SPECS_H_

#include "absl/strings/string_view.h"

namespace ringside {

// experiments/matrix/specs/demo.textproto: the README's demo on loopback.
absl::string_view DemoSpecText();

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_MATRIX_BUILTIN_SPECS_H_

#include "experiments/cli/argv_parser.h"

#include <algorithm>
#include <optional>

#include "absl/container/flat_hash_set.h"
#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace ringside {
namespace {

// The closest of `names` to `name` if it is close enough to be a typo, else "".
std::string Closest(absl::string_view name, const std::vector<std::string>& names) {
  const int limit = std::max<int>(2, static_cast<int>(name.size()) / 3);
  std::string best;
  int best_distance = limit + 1;
  for (const std::string& candidate : names) {
    const int d = EditDistance(name, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return best;
}

// Every verb's visible flags, without repeats, and the first verb that lists each.
std::vector<std::pair<std::string, const char*>> AllVerbFlags() {
  std::vector<std::pair<std::string, const char*>> all;
  absl::flat_hash_set<std::string> seen;
  for (const Command& c : Commands()) {
    for (std::string& n : CommandFlagNames(c, /*hidden=*/false)) {
      if (CommandFlag(c, n, /*hidden=*/false) != nullptr && seen.insert(n).second) all.emplace_back(n, c.name);
    }
  }
  return all;
}

// The error for `--name`, which `command` does not take.
absl::Status NotAFlagOf(const Command& command, const std::string& name,
                        const std::vector<std::string>& own) {
  const auto all = AllVerbFlags();
  for (const auto& [flag, verb] : all) {
    if (flag == name) {
      return UsageError(absl::StrCat("--", name, " is not a flag of `", command.name, "` (it is one of `",
                                     verb, "`; see ringside ", command.name, " --help)"));
    }
  }
  // A typo of the verb's own flags first, then of another verb's.
  std::string hint;
  if (const std::string mine = Closest(name, own); !mine.empty()) {
    hint = absl::StrCat("; did you mean --", mine, "?");
  } else {
    std::vector<std::string> names;
    for (const auto& entry : all) names.push_back(entry.first);
    if (const std::string other = Closest(name, names); !other.empty()) {
      for (const auto& [flag, verb] : all) {
        if (flag == other) hint = absl::StrCat("; did you mean --", other, " (a flag of `", verb, "`)?");
      }
    }
  }
  return UsageError(absl::StrCat("unknown flag --", name, hint, " (see ringside ", command.name, " --help)"));
}

}  // namespace

int EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<int> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    int diagonal = row[0];  // row[i-1][j-1]
    row[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const int above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// Steps: split each word into name and value, normalise the name, find it among the
// verb's flags (then as a --noNAME boolean), take the value from the next word if it
// needs one, and hand the text to the flag's own parser.
absl::StatusOr<ParsedArgs> ParseVerbArgs(const Command& command, absl::Span<const std::string> words) {
  auto takes = [&command](const std::string& name) -> absl::CommandLineFlag* {
    return CommandFlag(command, name, /*hidden=*/true);
  };
  ParsedArgs parsed;
  for (size_t i = 0; i < words.size(); ++i) {
    absl::string_view word = words[i];
    if (word == "--") {
      parsed.positional.insert(parsed.positional.end(), words.begin() + i + 1, words.end());
      break;
    }
    if (word.size() < 2 || word[0] != '-') {
      if (command.program_after_flags) {
        parsed.positional.insert(parsed.positional.end(), words.begin() + i, words.end());
        break;
      }
      parsed.positional.emplace_back(word);
      continue;
    }
    word.remove_prefix(absl::StartsWith(word, "--") ? 2 : 1);
    const size_t eq = word.find('=');
    std::string name = absl::StrReplaceAll(word.substr(0, eq), {{"-", "_"}});
    std::optional<std::string> value;
    if (eq != absl::string_view::npos) value = std::string(word.substr(eq + 1));
    if (name == "help" || name == "h") {
      parsed.help = true;
      continue;
    }
    absl::CommandLineFlag* flag = takes(name);
    if (flag == nullptr && !value.has_value() && absl::StartsWith(name, "no")) {
      flag = takes(name.substr(2));
      if (flag != nullptr && flag->IsOfType<bool>()) {
        name = name.substr(2);
        value = "false";
      } else {
        flag = nullptr;
      }
    }
    if (flag == nullptr) return NotAFlagOf(command, name, CommandFlagNames(command, /*hidden=*/false));
    if (!value.has_value()) {
      if (flag->IsOfType<bool>()) {
        value = "true";
      } else if (i + 1 < words.size()) {
        value = words[++i];
      } else {
        return UsageError(absl::StrCat("--", name, " needs a value"));
      }
    }
    std::string error;
    if (!flag->ParseFrom(*value, &error)) {
      return UsageError(absl::StrCat("bad value for --", name, ": ", error));
    }
    parsed.given.insert(std::string(flag->Name()));
  }
  return parsed;
}

}  // namespace ringside

#include "ddp_ring/gloo_errors.h"

#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <exception>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

namespace ringside {
namespace {

// Gloo's messages can span lines (stack traces of EnforceNotMet); statuses are one line.
std::string OneLine(absl::string_view text) {
  std::string line = absl::StrReplaceAll(text, {{"\n", " | "}, {"\r", ""}});
  absl::StripTrailingAsciiWhitespace(&line);
  return line;
}

}  // namespace

absl::Status GlooExceptionToStatus(std::exception_ptr error, absl::Duration timeout) {
  try {
    std::rethrow_exception(error);
  } catch (const gloo::IoException& e) {
    const std::string detail = OneLine(e.what());
    const std::string lower = absl::AsciiStrToLower(detail);
    // TCP transport wording: "Timed out waiting ...ms for recv operation", "Read
    // timeout", "Write timeout", "Connect timeout".
    if (absl::StrContains(lower, "timed out") || absl::StrContains(lower, "timeout")) {
      return absl::DeadlineExceededError(
          absl::StrCat("timed out after ", absl::FormatDuration(timeout), " (", detail, ")"));
    }
    if (absl::StrContains(lower, "closed by peer") ||
        absl::StrContains(lower, "connection reset") ||
        absl::StrContains(lower, "broken pipe")) {
      return absl::UnavailableError(absl::StrCat("peer closed the connection (", detail, ")"));
    }
    return absl::UnavailableError(absl::StrCat("I/O error (", detail, ")"));
  } catch (const gloo::EnforceNotMet& e) {
    return absl::InternalError(absl::StrCat("Gloo check failed (", OneLine(e.what()), ")"));
  } catch (const std::exception& e) {
    return absl::InternalError(OneLine(e.what()));
  } catch (...) {
    return absl::InternalError("unknown exception");
  }
}

absl::Status StatusFromException(std::exception_ptr error, int rank, absl::string_view what,
                                 absl::Duration timeout) {
  const absl::Status status = GlooExceptionToStatus(error, timeout);
  return absl::Status(status.code(),
                      absl::StrCat("rank ", rank, ": ", what, " failed: ", status.message()));
}

void BlockSigpipeInThisThread() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

ScopedSigpipeBlock::ScopedSigpipeBlock() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, &old_);
}

ScopedSigpipeBlock::~ScopedSigpipeBlock() {
  if (sigismember(&old_, SIGPIPE) == 1) return;  // Was blocked already: keep as is.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  const timespec zero = {0, 0};
  while (sigtimedwait(&set, nullptr, &zero) == SIGPIPE) {
  }
  pthread_sigmask(SIG_SETMASK, &old_, nullptr);
}

}  // namespace ringside

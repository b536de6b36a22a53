// What the Gloo backend needs around Gloo's I/O: its exceptions as Statuses, and the
// SIGPIPE guard its socket writes need. Internal to the Gloo backend
// (gloo_process_group.h, gloo_rendezvous.h, gloo_transfer.h).
#ifndef RINGSIDE_DDP_RING_GLOO_ERRORS_H_
#define RINGSIDE_DDP_RING_GLOO_ERRORS_H_

#include <signal.h>

#include <exception>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ringside {

// Maps an exception thrown by Gloo to a Status without any prefix: DeadlineExceeded
// "timed out after <timeout> (<Gloo's words>)" for Gloo's timeouts; Unavailable "peer
// closed the connection (...)" or "I/O error (...)" for other I/O failures; Internal
// for failed Gloo checks and anything else. `timeout` only words the message. Gloo's
// messages can span lines (stack traces); the result is one line.
absl::Status GlooExceptionToStatus(std::exception_ptr error, absl::Duration timeout);

// The same, prefixed "rank <rank>: <what> failed: ".
absl::Status StatusFromException(std::exception_ptr error, int rank, absl::string_view what,
                                 absl::Duration timeout);

// Gloo's TCP transport writes with writev(2), which raises SIGPIPE when the peer has
// gone, and SIGPIPE's default action ends the process. Every thread that does Gloo I/O
// therefore runs with SIGPIPE blocked (the write then just fails with EPIPE and Gloo
// throws): the worker thread for its whole life, the caller of NewGlooProcessGroup
// while it builds the device (whose event-loop thread inherits the mask) and the full
// mesh. No process-wide signal disposition is changed.
void BlockSigpipeInThisThread();

// Blocks SIGPIPE in this thread for the object's life.
class ScopedSigpipeBlock {
 public:
  ScopedSigpipeBlock();
  // Discards the SIGPIPEs raised meanwhile (they would be delivered on unblocking),
  // then restores the caller's mask.
  ~ScopedSigpipeBlock();

  ScopedSigpipeBlock(const ScopedSigpipeBlock&) = delete;
  ScopedSigpipeBlock& operator=(const ScopedSigpipeBlock&) = delete;

 private:
  sigset_t old_;
};

}  // namespace ringside

#endif  // RINGSIDE_DDP_RING_GLOO_ERRORS_H_

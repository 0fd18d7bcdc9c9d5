// The SIGTERM flag and the callback that turns it into a stop at a step boundary.
#include "train/stop_signal.h"

#include <csignal>

namespace tandem::train {

namespace {

volatile std::sig_atomic_t g_sigterm = 0;

extern "C" void on_sigterm(int) { g_sigterm = 1; }

}  // namespace

void install_stop_on_sigterm() {
  struct sigaction sa {};
  sa.sa_handler = on_sigterm;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a blocking read or MPI progress call resumes; the loop polls the flag
  sigaction(SIGTERM, &sa, nullptr);
}

bool stop_signal_received() { return g_sigterm != 0; }

// Ranks get the signal at slightly different times: agree, or one would wait in the next
// all-reduce for a peer that already left the loop. The flag rides in the step's agreement (after
// backward) rather than an all-reduce of its own, so the stop takes effect at that step's end.
StopOnSignal::StopOnSignal(Trainer& t)
    : share_(t.agreement().add(1, [](double* flag) { flag[0] = stop_signal_received() ? 1.0 : 0.0; })) {}

void StopOnSignal::after_step(Trainer& t) {
  if (t.agreement().sum(share_)[0] > 0 && !stopped_) {
    stopped_ = true;
    t.log().info("SIGTERM: stopping after step {}", t.state().step);
    t.request_stop();
  }
}

}  // namespace tandem::train

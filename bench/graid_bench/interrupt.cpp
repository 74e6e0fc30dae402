#include "interrupt.h"

#include <csignal>

namespace graid::bench {

namespace {

// Lock-free and async-signal-safe, as a handler's only write must be.
volatile std::sig_atomic_t g_interrupted = 0;

void on_signal(int) {
  g_interrupted = 1;
}

}  // namespace

void install_interrupt_handlers() noexcept {
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

bool interrupted() noexcept {
  return g_interrupted != 0;
}

}  // namespace graid::bench

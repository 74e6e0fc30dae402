// Ctrl-C and SIGTERM during a run: stop issuing I/O, drain, and let the destructors remove the
// member files (gigabytes of tmpfs, i.e. RAM, if they were left behind).
#pragma once

namespace graid::bench {

// Installs SIGINT and SIGTERM handlers that only set a flag. Call once, early in main().
void install_interrupt_handlers() noexcept;

// True once SIGINT or SIGTERM has arrived.
bool interrupted() noexcept;

}  // namespace graid::bench

// systemd's readiness protocol without libsystemd: one datagram to $NOTIFY_SOCKET.
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

namespace graid::daemon {

// Sends `state` (e.g. "READY=1\nSTATUS=serving") when NOTIFY_SOCKET is set (the daemon runs as a
// Type=notify unit); does nothing otherwise. Returns false when the socket was set but the
// message could not be sent.
bool sd_notify(std::string_view state);

// The interval systemd's watchdog expects WATCHDOG=1 within (WATCHDOG_USEC, where WATCHDOG_PID
// is unset or this process), or nullopt when no watchdog is asked for.
std::optional<std::chrono::milliseconds> watchdog_interval();

// Reads an eventfd's count so that it stops being readable.
void drain_eventfd(int fd);

}  // namespace graid::daemon

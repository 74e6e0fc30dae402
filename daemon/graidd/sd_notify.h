// systemd's readiness protocol without libsystemd: one datagram to $NOTIFY_SOCKET.
#pragma once

#include <string_view>

namespace graid::daemon {

// Sends `state` (e.g. "READY=1\nSTATUS=serving") when NOTIFY_SOCKET is set (the daemon runs as a
// Type=notify unit); does nothing otherwise. Returns false when the socket was set but the
// message could not be sent.
bool sd_notify(std::string_view state);

}  // namespace graid::daemon

// Routes one control request line to the registry and formats its response line.
#pragma once

#include <string>
#include <string_view>

#include "control/control_server.h"
#include "graidd/registry.h"

namespace graid::daemon {

// Parses `line` (control_protocol.h), runs the verb on `registry`, and returns the response
// line, or for `list event` with `wait` and nothing to list yet a reply deferred until an event
// comes or the wait (at most 300 s) is over (control_server.h). Never throws: malformed requests,
// unknown verbs and arguments of the wrong type are answered with bad_request; engine failures with
// the code error_code_for() gives them.
control::Reply dispatch(Registry& registry, std::string_view line, const std::string& version);

}  // namespace graid::daemon

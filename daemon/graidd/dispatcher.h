// Routes one control request line to the registry and formats its response line.
#pragma once

#include <string>
#include <string_view>

#include "graidd/registry.h"

namespace graid::daemon {

// Parses `line` (control_protocol.h), runs the verb on `registry`, and returns the response
// line. Never throws: malformed requests, unknown verbs and arguments of the wrong type are
// answered with bad_request; engine failures with the code error_code_for() gives them.
std::string dispatch(Registry& registry, std::string_view line, const std::string& version);

}  // namespace graid::daemon

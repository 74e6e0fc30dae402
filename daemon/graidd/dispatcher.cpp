#include "graidd/dispatcher.h"

#include <spdlog/spdlog.h>

#include <array>

#include "control/control_protocol.h"
#include "graidd/request_args.h"

namespace graid::daemon {

using control::ErrorCode;
using nlohmann::json;

namespace {

using Verb = Result<json> (Registry::*)(const json&);

struct Route {
  std::string_view verb, object;
  Verb fn;
  bool changes;  // logged at info level
};

constexpr std::array kRoutes{
    Route{"create", "pd", &Registry::create_pd, true},
    Route{"list", "pd", &Registry::list_pd, false},
    Route{"describe", "pd", &Registry::describe_pd, false},
    Route{"delete", "pd", &Registry::delete_pd, true},
    Route{"edit", "pd", &Registry::edit_pd, true},
    Route{"create", "dg", &Registry::create_dg, true},
    Route{"list", "dg", &Registry::list_dg, false},
    Route{"describe", "dg", &Registry::describe_dg, false},
    Route{"delete", "dg", &Registry::delete_dg, true},
    Route{"edit", "dg", &Registry::edit_dg, true},
    Route{"create", "vd", &Registry::create_vd, true},
    Route{"list", "vd", &Registry::list_vd, false},
    Route{"describe", "vd", &Registry::describe_vd, false},
    Route{"delete", "vd", &Registry::delete_vd, true},
    Route{"edit", "vd", &Registry::edit_vd, true},
    Route{"export", "vd", &Registry::export_vd, true},
    Route{"unexport", "vd", &Registry::unexport_vd, true},
    Route{"replace", "pd", &Registry::replace_pd, true},
    Route{"start", "check", &Registry::start_check, true},
    Route{"stop", "check", &Registry::stop_check, true},
    Route{"describe", "controller", &Registry::describe_controller, false},
    Route{"list", "event", &Registry::list_event, false},
    Route{"stats", "", &Registry::stats, false},
};

}  // namespace

std::string dispatch(Registry& registry, std::string_view line, const std::string& version) {
  control::RequestId id;
  auto request = control::parse_request(line, &id);
  if (!request.is_ok())
    return control::format_response_error(id, ErrorCode::kBadRequest, request.status().message());
  const auto& r = *request;
  if (r.verb == "version" && r.object.empty())
    return control::format_response_ok(id, json{{"version", version}, {"api", 1}});
  for (const auto& route : kRoutes) {
    if (route.verb != r.verb || route.object != r.object) continue;
    try {
      registry.refresh();
      auto result = (registry.*route.fn)(r.args);
      if (!result.is_ok()) {
        const auto code = control::error_code_for(result.status().code());
        if (route.changes)
          spdlog::info("{} {}: refused: {}", r.verb, r.object, result.status().message());
        return control::format_response_error(id, code, result.status().message());
      }
      if (route.changes) spdlog::info("{} {}: done", r.verb, r.object);
      return control::format_response_ok(id, *result);
    } catch (const BadArguments& e) {
      return control::format_response_error(id, ErrorCode::kBadRequest, e.what());
    } catch (const json::exception& e) {
      // A mistyped argument (a string where a number belongs, say): the verbs read their
      // arguments before changing anything.
      return control::format_response_error(id, ErrorCode::kBadRequest,
                                            fmt::format("bad arguments: {}", e.what()));
    } catch (const std::exception& e) {
      spdlog::error("{} {}: {}", r.verb, r.object, e.what());
      return control::format_response_error(id, ErrorCode::kInternal, e.what());
    }
  }
  return control::format_response_error(
      id, ErrorCode::kBadRequest,
      fmt::format("unknown command \"{}{}{}\"", r.verb, r.object.empty() ? "" : " ", r.object));
}

}  // namespace graid::daemon

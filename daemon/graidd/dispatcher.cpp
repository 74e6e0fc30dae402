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
    Route{"test", "event", &Registry::test_event, true},
    Route{"stats", "", &Registry::stats, false},
};

// `list event --wait`: at most this long.
constexpr std::uint64_t kMaxEventWaitSeconds = 300;

// Runs one route and formats its response line.
std::string answer(Registry& registry, const Route& route, const control::RequestId& id,
                   const control::Request& r) {
  // What a change raised (a member failed) is logged, and on disk, before it is answered.
  struct Settle {
    Registry& registry;
    bool changes;
    ~Settle() {
      if (!changes) return;
      registry.refresh();  // a PD added or moved is the health monitor's at once
      registry.settle_events();
    }
  } settle{registry, route.changes};
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

// `list event` with `wait` (seconds): answered at once when there are events after `since`,
// else once one comes or the wait is over (an empty list then).
control::Reply list_event_waiting(Registry& registry, const Route& route,
                                  const control::RequestId& id, const control::Request& r) {
  std::uint64_t wait = 0;
  std::uint64_t since = 0;
  try {
    wait = arg_opt_u64(r.args, "wait").value_or(0);
    since = arg_opt_u64(r.args, "since").value_or(0);
  } catch (const BadArguments& e) {
    return control::format_response_error(id, ErrorCode::kBadRequest, e.what());
  }
  if (wait > kMaxEventWaitSeconds)
    return control::format_response_error(
        id, ErrorCode::kBadRequest,
        fmt::format("wait: {} s is over the limit of {} s", wait, kMaxEventWaitSeconds));
  const EventLog& events = registry.events();
  if (wait == 0 || !events.since(since, 1).events.empty()) return answer(registry, route, id, r);
  control::Deferred later;
  later.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(wait);
  later.retry = [&registry, &events, &route, id, r,
                 since](bool last) -> std::optional<std::string> {
    if (!last && events.since(since, 1).events.empty()) return std::nullopt;
    return answer(registry, route, id, r);
  };
  return later;
}

}  // namespace

control::Reply dispatch(Registry& registry, std::string_view line, const std::string& version) {
  control::RequestId id;
  auto request = control::parse_request(line, &id);
  if (!request.is_ok())
    return control::format_response_error(id, ErrorCode::kBadRequest, request.status().message());
  const auto& r = *request;
  if (r.verb == "version" && r.object.empty())
    return control::format_response_ok(id, json{{"version", version}, {"api", 1}});
  for (const auto& route : kRoutes) {
    if (route.verb != r.verb || route.object != r.object) continue;
    if (r.verb == "list" && r.object == "event" && r.args.is_object() && r.args.contains("wait"))
      return list_event_waiting(registry, route, id, r);
    return answer(registry, route, id, r);
  }
  return control::format_response_error(
      id, ErrorCode::kBadRequest,
      fmt::format("unknown command \"{}{}{}\"", r.verb, r.object.empty() ? "" : " ", r.object));
}

}  // namespace graid::daemon

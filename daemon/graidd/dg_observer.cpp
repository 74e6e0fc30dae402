#include "graidd/dg_observer.h"

#include <fmt/format.h>

namespace graid::daemon {

void DgObserver::on_event(const ArrayEvent& e) {
  std::optional<std::uint32_t> pd;
  if (e.member) {
    MutexLock lock(mutex_);
    if (auto it = slot_to_pd_.find(*e.member); it != slot_to_pd_.end()) pd = it->second;
  }
  std::string kind;
  std::string message = e.message;
  switch (e.kind) {
    case ArrayEventKind::kStarted:
      return;  // the registry says dg_created / dg_assembled itself
    case ArrayEventKind::kMemberFailed:
      kind = "member_failed";
      message = fmt::format("member slot {} failed: {}", e.member.value_or(0), e.message);
      break;
    case ArrayEventKind::kMemberBack:
      kind = "member_back";
      break;
    case ArrayEventKind::kHealthChanged:
      kind = std::string("dg_") + std::string(array_health_name(e.health));
      message = fmt::format("{} -> {}", array_health_name(e.previous_health),
                            array_health_name(e.health));
      break;
    case ArrayEventKind::kInitStarted:
      kind = "init_started";
      message = fmt::format("{}: {} stripes to initialise", e.message, e.counts.stripes);
      break;
    case ArrayEventKind::kInitFinished:
      kind = "init_finished";
      message = fmt::format("initialised {} stripes", e.counts.stripes);
      break;
    case ArrayEventKind::kResyncStarted:
      kind = "resync_started";
      message = fmt::format("{}: {} stripes to re-sync", e.message, e.counts.stripes);
      break;
    case ArrayEventKind::kResyncFinished:
      kind = "resync_finished";
      message = fmt::format("re-synced {} stripes, {} could not be", e.counts.stripes,
                            e.counts.unsynced_stripes);
      break;
    case ArrayEventKind::kAssemblyOverride:
      kind = "assembly_override";
      break;
    case ArrayEventKind::kSpareAdded:
      kind = "spare_added";
      message = fmt::format("hot spare in slot {}", e.member.value_or(0));
      break;
    case ArrayEventKind::kStopped:
      kind = "dg_stopped";
      message = fmt::format("stopped, {}", e.message);
      break;
    case ArrayEventKind::kMemberReplaced:
      kind = "member_replaced";
      message = fmt::format("member slot {}: {}", e.member.value_or(0), e.message);
      break;
    case ArrayEventKind::kRebuildStarted:
      kind = "rebuild_started";
      message = fmt::format("member slot {}: {} ({} MiB to go)", e.member.value_or(0), e.message,
                            e.counts.bytes >> 20);
      break;
    case ArrayEventKind::kRebuildProgress:
      kind = "rebuild_progress";
      message = fmt::format("member slot {}: {}", e.member.value_or(0), e.message);
      break;
    case ArrayEventKind::kRebuildFinished:
      kind = "rebuild_finished";
      message = fmt::format("member slot {}: {}", e.member.value_or(0), e.message);
      break;
    case ArrayEventKind::kRebuildStopped:
      kind = "rebuild_stopped";
      message = fmt::format("member slot {}: {}", e.member.value_or(0), e.message);
      break;
    case ArrayEventKind::kCheckStarted:
      kind = "check_started";
      message = fmt::format("{} ({} stripes)", e.message, e.counts.stripes);
      break;
    case ArrayEventKind::kCheckMismatch:
      kind = "check_mismatch";
      break;
    case ArrayEventKind::kCheckFinished:
      kind = "check_finished";
      break;
    case ArrayEventKind::kCheckStopped:
      kind = "check_stopped";
      break;
    case ArrayEventKind::kJournalReplayed:
      kind = "journal_replayed";
      break;
    case ArrayEventKind::kInitStopped:
      kind = "init_stopped";
      break;
    case ArrayEventKind::kReplaceStarted:
      kind = "replace_started";
      message = fmt::format("member slot {}: {}", e.member.value_or(0), e.message);
      break;
    case ArrayEventKind::kReplaceFinished:
      kind = "replace_finished";
      message = fmt::format("member slot {}: {}", e.member.value_or(0), e.message);
      break;
    case ArrayEventKind::kReplaceStopped:
      kind = "replace_stopped";
      message = fmt::format("member slot {}: {}", e.member.value_or(0), e.message);
      break;
    case ArrayEventKind::kResyncStopped:
      kind = "resync_stopped";
      break;
    case ArrayEventKind::kDataLost:
      kind = "data_lost";
      break;
    case ArrayEventKind::kLostRangeRewritten:
      kind = "lost_range_rewritten";
      break;
  }
  Event event;
  event.severity = severity_of(kind);
  event.kind = std::move(kind);
  event.dg_id = dg_id_;
  event.pd_id = pd;
  event.slot = e.member;
  event.message = std::move(message);
  // On disk before the rebuild or spare takeover it wakes starts (EventLog::add).
  log_.add(std::move(event));
  MutexLock lock(wake_mutex_);
  if (wake_) wake_(e.kind);
}

}  // namespace graid::daemon

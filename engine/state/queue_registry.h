// The queues attached to an array and the counts of those destroyed. Internal to engine/array.
#pragma once

#include <vector>

#include "graid/array.h"
#include "graid/thread_annotations.h"

namespace graid {

// Taken when a queue is attached or destroyed and by Array::stats() and quiesce(); never on the
// I/O path.
struct QueueRegistry {
  mutable Mutex mutex;
  std::vector<ArrayQueue::Impl*> queues GUARDED_BY(mutex);
  QueueStats retired_totals GUARDED_BY(mutex);
  std::vector<MemberIoStats> retired_members GUARDED_BY(mutex);
};

}  // namespace graid

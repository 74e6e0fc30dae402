// A DG's background job paced by one of its speed settings (rebuild_speed, init_speed, ...):
// the bandwidth cap and the share of the time that setting gives, both read again after every
// window, so `graidctl edit dg` applies to a job already running.
#pragma once

#include "graid/array.h"

namespace graid::daemon {

// Sets `control.rate` and `control.share` (RebuildControl, CheckControl, InitControl) from
// `array`'s setting `speed`; `array` must outlive the job.
template <typename Control>
void pace_by_setting(Control& control, const Array& array, BackgroundSpeed ArraySettings::*speed) {
  control.rate = [&array, speed] { return background_speed_bytes(array.settings().*speed); };
  control.share = [&array, speed] { return background_busy_share(array.settings().*speed); };
}

}  // namespace graid::daemon

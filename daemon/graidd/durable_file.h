// Files in graidd's state dir that must outlive a crash or a power cut (state.json, the event
// log, the instance id): writes that are whole or an error, a file replaced whole, and the
// directory entry itself made durable.
#pragma once

#include <string>
#include <string_view>

#include "graid/status.h"

namespace graid::daemon {

// Writes all of `text` to `fd` (EINTR retried; a short write goes on). kIoError naming `what`.
Status write_all(int fd, std::string_view text, std::string_view what);

// fsync of directory `dir`: a name created, renamed or removed in it survives a power cut.
Status fsync_directory(const std::string& dir);

// Replaces `path` (in directory `dir`) with `text` atomically: PATH.tmp written (mode 0600) and
// fsynced, renamed over PATH, the directory fsynced. A crash leaves the old file or the new.
Status replace_file(const std::string& dir, const std::string& path, std::string_view text);

}  // namespace graid::daemon

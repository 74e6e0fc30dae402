// What graidd keeps in its state dir (default /var/lib/graid): what the drives cannot hold. The
// truth about arrays is in their superblocks; this file adds the daemon's ids for PDs and DGs,
// which PDs it owns (by path), the maintenance markers, and the exports to restore at start.
//
// One file, `state.json`, replaced atomically: written to `state.json.tmp`, fsynced, renamed over
// the old one, and the directory fsynced, so a crash leaves either the old or the new file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "graid/status.h"

namespace graid::daemon {

struct PdEntry {
  std::uint32_t pd_id = 0;
  std::string path;
  bool marker_offline = false;  // `edit pd <id> marker offline`
  bool global_spare = false;    // `edit pd <id> hotspare global` (a free PD any DG may take)
};

struct DgEntry {
  std::uint32_t dg_id = 0;
  std::string uuid;  // the array's UUID (superblock)
};

struct ExportEntry {
  std::uint32_t dg_id = 0;
  std::uint32_t vd_id = 0;
  std::string kind = "nbd";  // "nbd" or "ublk"
  std::string address;       // nbd: "unix:/path" or "tcp:ADDR:PORT"; ublk: "/dev/ublkbN"
  std::string name;
  bool read_only = false;
  std::optional<std::uint32_t> dev_id;  // ublk: the device id, re-attached or asked for again
  std::string tls_psk;                  // nbd: the PSK file clients must use (TLS), or ""
  bool insecure_tcp = false;            // nbd: TCP without TLS, asked for with --insecure-tcp
};

struct PersistedState {
  std::vector<PdEntry> pds;
  std::vector<DgEntry> dgs;
  std::vector<ExportEntry> exports;
};

// The state file's format version; a file of a newer version is refused, not misread.
inline constexpr int kStateVersion = 1;

// Reads `dir`/state.json. A missing file is an empty state (a first start); a file that is not
// valid (not JSON, wrong shape, newer version, duplicate ids) is kCorrupt, naming the problem:
// the daemon refuses to start rather than forget drives.
Result<PersistedState> load_state(const std::string& dir);
// Writes `dir`/state.json atomically (see above). Creates `dir` (mode 0700) if missing.
Status save_state(const std::string& dir, const PersistedState& state);

}  // namespace graid::daemon

// graidctl examine PATH: a member's graid metadata read straight from the drive or file, as
// `mdadm --examine` reads md's, without graidd: what an administrator runs on a drive pulled from
// a dead server, or beside a running graidd without disturbing it.
//
// Read-only: the device is opened O_RDONLY (O_DIRECT where the filesystem has it, so the page
// cache holds nothing stale), with no flock and no O_EXCL, and nothing is ever written. What it
// reads (docs/on-disk-format.md): the superblock (array, this member, the member table, the VD
// table, lost ranges, job checkpoints, settings), the write-intent bitmap's header and bit pages
// (regions set: what a re-sync or re-add would cover) and the write-hole journal area (records of
// the current epoch: what an assembly would replay). Every value is decoded by graid_format's
// codecs, which treat the bytes as untrusted.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace graid::cli {

// The examination of one path as the JSON of docs/cli.md ("examine"): {"path", "size",
// "superblock": {"found", ...}, "members", "vds", "lost_ranges", "bitmap", "journal"}, or with
// "error" where the path cannot be read. Never throws.
nlohmann::json examine_path(const std::string& path);

// Whether an examination found a superblock this build reads.
bool examined_ok(const nlohmann::json& examined);

// The table text of one examination, ending with a newline.
std::string render_examine(const nlohmann::json& examined);

}  // namespace graid::cli

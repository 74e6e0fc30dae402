#include "profiles.h"

#include <algorithm>
#include <array>

namespace graid::bench {

namespace {

constexpr std::uint32_t kKiB = 1024;

constexpr std::array kProfiles = {
    Profile{"4k-randread", 4 * kKiB, AccessPattern::kRandom, 100},
    Profile{"4k-randwrite", 4 * kKiB, AccessPattern::kRandom, 0},
    Profile{"64k-randwrite", 64 * kKiB, AccessPattern::kRandom, 0},
    Profile{"64k-seqread", 64 * kKiB, AccessPattern::kSequential, 100},
    Profile{"64k-seqwrite", 64 * kKiB, AccessPattern::kSequential, 0},
    Profile{"1m-seqread", 1024 * kKiB, AccessPattern::kSequential, 100},
    Profile{"1m-seqwrite", 1024 * kKiB, AccessPattern::kSequential, 0},
    Profile{"8k-randrw70", 8 * kKiB, AccessPattern::kRandom, 70},
    // Database-like mixes the reviews use alongside the 70/30 one.
    Profile{"8k-randrw80", 8 * kKiB, AccessPattern::kRandom, 80},
    Profile{"8k-randrw90", 8 * kKiB, AccessPattern::kRandom, 90},
    // A database mix with larger pages and more writes (the suite's "16K 60/40").
    Profile{"16k-randrw60", 16 * kKiB, AccessPattern::kRandom, 60},
};

std::string known_names() {
  std::string names = "all";
  for (const Profile& p : kProfiles) {
    names += ", ";
    names += p.name;
  }
  return names;
}

void add_unique(std::vector<Profile>& out, const Profile& profile) {
  const bool seen =
      std::any_of(out.begin(), out.end(), [&](const Profile& p) { return p.name == profile.name; });
  if (!seen) out.push_back(profile);
}

}  // namespace

std::span<const Profile> all_profiles() noexcept {
  return kProfiles;
}

Result<std::vector<Profile>> resolve_profiles(std::span<const std::string> specs) {
  std::vector<Profile> out;
  for (const std::string& spec : specs) {
    std::string_view rest = spec;
    while (true) {
      const std::size_t comma = rest.find(',');
      const std::string_view name = rest.substr(0, comma);
      if (name == "all") {
        for (const Profile& p : kProfiles)
          add_unique(out, p);
      } else {
        const auto* it = std::find_if(kProfiles.begin(), kProfiles.end(),
                                      [&](const Profile& p) { return p.name == name; });
        if (it == kProfiles.end()) {
          return make_error(Errc::kInvalidArgument, "--profile: unknown profile '{}' (known: {})",
                            name, known_names());
        }
        add_unique(out, *it);
      }
      if (comma == std::string_view::npos) break;
      rest = rest.substr(comma + 1);
    }
  }
  if (out.empty()) {
    return make_error(Errc::kInvalidArgument, "--profile: no profile given (known: {})",
                      known_names());
  }
  return out;
}

}  // namespace graid::bench

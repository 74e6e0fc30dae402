// Shell completion for graidctl: the candidates for the word being typed, computed by graidctl
// itself from its command tree (command_tree.h), so completion knows every verb, alias, object
// and option graidctl does, and, for ids, asks graidd which pds, dgs and vds exist. The bash
// script (cli/graidctl.bash, installed as a bash-completion file) only calls
// `graidctl __complete INDEX WORDS...` and hands the answer to compgen.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace graid::cli {

// What the word being typed is.
struct Completion {
  bool files = false;                   // a path: the shell completes file names
  std::vector<std::string> candidates;  // otherwise these words (all of them; the shell filters)
};

// Live ids: "pd", "dg" or "vd" (of dg `dg_id`), as text; empty when graidd cannot say.
using IdSource = std::function<std::vector<std::string>(const std::string& object,
                                                        std::optional<std::uint32_t> dg_id)>;

// The candidates for words[index] (words: the command line after "graidctl"; index may be
// words.size() for a new word). `socket` receives a --socket given on the line, for the caller's
// IdSource.
Completion complete(const std::vector<std::string>& words, std::size_t index, const IdSource& ids,
                    std::string* socket = nullptr);

}  // namespace graid::cli

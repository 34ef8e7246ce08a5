// llama.cpp's command-line habits: its multi-letter single-dash options (-ngl, -cnv, -sys, -ctk, ...) are
// rewritten to this CLI's long names before parsing (CLI11 reads "-ngl" as -n with the value "gl"), and a
// command that is not one of ours is named in the error rather than reported as a missing subcommand.
#pragma once

#include <string>
#include <vector>

namespace tilellm::cli {

// argv with every llama.cpp multi-letter option (alone, or as "-opt=value") replaced by its long name here.
std::vector<std::string> translate_llama_flags(int argc, char** argv);

// Throws naming the word when the first argument is neither an option nor one of `commands`.
void check_command(const std::vector<std::string>& args, const std::vector<std::string>& commands);

}  // namespace tilellm::cli

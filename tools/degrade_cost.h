// The accuracy cost of --degrade tile-mask=F, measured before a run that may use it and printed: the
// perplexity of a text with the mask off and on, by tilellm perplexity's method (chunks of n_ctx tokens
// from an empty cache, the second half of each scored).
#pragma once

#include <string>

#include "model/model.h"
#include "runtime/session.h"

namespace tilellm::cli {

struct DegradeCost {
  double unmasked = 0, masked = 0;
  int64_t scored = 0;  // tokens scored in each run
  std::string text;    // what was scored ("FILE, 4 chunks of 128")
};

// so: the session's options with so.tile_mask set. file: the text ("" : the repository's
// tests/data/text/declaration_of_independence.txt, when the build's source tree has it).
DegradeCost measure_degrade_cost(const Model& model, SessionOptions so, std::string file, int64_t n_ctx,
                                 int64_t chunks);

}  // namespace tilellm::cli

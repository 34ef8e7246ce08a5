// The commit this binary was built from (cmake/build_commit.cmake writes the header on every build).
#include "build_commit.h"

#include "commands.h"

namespace tilellm::cli {

const char* build_commit() {
  return TILELLM_BUILD_COMMIT;
}

}  // namespace tilellm::cli

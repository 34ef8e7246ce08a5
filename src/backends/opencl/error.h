// OpenCL error reporting. Every CL call's status goes through check(), which throws tilellm::Error naming the
// call that failed and the status by its name (the table is in error.cpp).
#pragma once

#include <CL/cl.h>

#include <string_view>

#include "base/error.h"

namespace tilellm::opencl {

// "CL_INVALID_VALUE", ...; "unknown OpenCL error" for a code not in the table.
const char* cl_error_name(cl_int err);

[[noreturn]] void check_failed(cl_int err, std::string_view call);

// Throws tilellm::Error("OpenCL: <call> failed: <NAME> (<code>)") unless err is CL_SUCCESS.
inline void check(cl_int err, std::string_view call) {
  if (err != CL_SUCCESS) check_failed(err, call);
}

}  // namespace tilellm::opencl

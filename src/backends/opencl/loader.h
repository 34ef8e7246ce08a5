// The OpenCL runtime, loaded when first used: the binary does not link libOpenCL, so it starts on a machine
// without an OpenCL ICD loader, runs everything else there, and lists this backend as unavailable with the
// reason. loader.cpp defines every OpenCL entry point the backend calls (the declarations of CL/cl.h) as a
// forwarder to the function of that name in the library, looked up once with dlsym; until the library is
// loaded, or when it lacks a function, a call returns CL_INVALID_PLATFORM (and a null object), so a missing
// runtime surfaces as the error the backend already reports by name.
//
// The library is libOpenCL.so.1 (the ICD loader every Linux OpenCL driver plugs into); the environment
// variable TILELLM_OPENCL_LIBRARY names another file instead (a debugging switch: tests point it at a path
// that does not exist to run as a machine without OpenCL would).
#pragma once

#include <string>

namespace tilellm::opencl {

// Loads the library on the first call; "" when it is loaded, else one line saying why it could not be.
const std::string& library_error();

}  // namespace tilellm::opencl

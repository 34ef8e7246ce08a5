// The OpenCL entry points as forwarders into the library loaded at run time (see loader.h).
#include "backends/opencl/loader.h"

#include <CL/cl.h>
#include <dlfcn.h>

#include <cstdlib>

namespace tilellm::opencl {
namespace {

struct Library {
  void* handle = nullptr;
  std::string error;
};

const Library& library() {
  static const Library lib = [] {
    Library l;
    const char* env = std::getenv("TILELLM_OPENCL_LIBRARY");
    const std::string name = env && *env ? env : "libOpenCL.so.1";
    l.handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!l.handle) {
      const char* why = dlerror();
      l.error = name + " could not be loaded (" + (why ? why : "unknown reason") +
                "): install an OpenCL ICD loader and a driver (Debian: ocl-icd-libopencl1 and e.g. "
                "pocl-opencl-icd)";
    }
    return l;
  }();
  return lib;
}

void* symbol(const char* name) {
  const Library& l = library();
  return l.handle ? dlsym(l.handle, name) : nullptr;
}

}  // namespace

const std::string& library_error() {
  return library().error;
}

}  // namespace tilellm::opencl

// One forwarder per entry point: FN returns cl_int, OBJ returns an object and reports through its last
// parameter, errcode_ret. The function pointer is looked up once, on the first call (thread-safe static
// initialisation); null when the library is missing or lacks the entry point.
#define TL_CL_RESOLVE(name) \
  static const auto fn_ = reinterpret_cast<decltype(&::name)>(tilellm::opencl::symbol(#name))
#define TL_CL_FN(name, params, args)             \
  extern "C" cl_int CL_API_CALL name params {    \
    TL_CL_RESOLVE(name);                         \
    return fn_ ? fn_ args : CL_INVALID_PLATFORM; \
  }
#define TL_CL_OBJ(type, name, params, args)              \
  extern "C" type CL_API_CALL name params {              \
    TL_CL_RESOLVE(name);                                 \
    if (fn_) return fn_ args;                            \
    if (errcode_ret) *errcode_ret = CL_INVALID_PLATFORM; \
    return nullptr;                                      \
  }

TL_CL_FN(clGetPlatformIDs, (cl_uint num_entries, cl_platform_id* platforms, cl_uint* num_platforms),
         (num_entries, platforms, num_platforms))
TL_CL_FN(clGetPlatformInfo,
         (cl_platform_id platform, cl_platform_info param_name, size_t param_value_size, void* param_value,
          size_t* param_value_size_ret),
         (platform, param_name, param_value_size, param_value, param_value_size_ret))
TL_CL_FN(clGetDeviceIDs,
         (cl_platform_id platform, cl_device_type device_type, cl_uint num_entries, cl_device_id* devices,
          cl_uint* num_devices),
         (platform, device_type, num_entries, devices, num_devices))
TL_CL_FN(clGetDeviceInfo,
         (cl_device_id device, cl_device_info param_name, size_t param_value_size, void* param_value,
          size_t* param_value_size_ret),
         (device, param_name, param_value_size, param_value, param_value_size_ret))
TL_CL_OBJ(cl_context, clCreateContext,
          (const cl_context_properties* properties, cl_uint num_devices, const cl_device_id* devices,
           void(CL_CALLBACK* pfn_notify)(const char* errinfo, const void* private_info, size_t cb,
                                         void* user_data),
           void* user_data, cl_int* errcode_ret),
          (properties, num_devices, devices, pfn_notify, user_data, errcode_ret))
TL_CL_FN(clReleaseContext, (cl_context context), (context))
TL_CL_OBJ(cl_command_queue, clCreateCommandQueue,
          (cl_context context, cl_device_id device, cl_command_queue_properties properties,
           cl_int* errcode_ret),
          (context, device, properties, errcode_ret))
TL_CL_FN(clReleaseCommandQueue, (cl_command_queue command_queue), (command_queue))
TL_CL_OBJ(cl_mem, clCreateBuffer,
          (cl_context context, cl_mem_flags flags, size_t size, void* host_ptr, cl_int* errcode_ret),
          (context, flags, size, host_ptr, errcode_ret))
TL_CL_OBJ(cl_mem, clCreateImage,
          (cl_context context, cl_mem_flags flags, const cl_image_format* image_format,
           const cl_image_desc* image_desc, void* host_ptr, cl_int* errcode_ret),
          (context, flags, image_format, image_desc, host_ptr, errcode_ret))
TL_CL_FN(clReleaseMemObject, (cl_mem memobj), (memobj))
TL_CL_OBJ(cl_program, clCreateProgramWithSource,
          (cl_context context, cl_uint count, const char** strings, const size_t* lengths,
           cl_int* errcode_ret),
          (context, count, strings, lengths, errcode_ret))
TL_CL_OBJ(cl_program, clCreateProgramWithBinary,
          (cl_context context, cl_uint num_devices, const cl_device_id* device_list, const size_t* lengths,
           const unsigned char** binaries, cl_int* binary_status, cl_int* errcode_ret),
          (context, num_devices, device_list, lengths, binaries, binary_status, errcode_ret))
TL_CL_FN(clBuildProgram,
         (cl_program program, cl_uint num_devices, const cl_device_id* device_list, const char* options,
          void(CL_CALLBACK* pfn_notify)(cl_program program, void* user_data), void* user_data),
         (program, num_devices, device_list, options, pfn_notify, user_data))
TL_CL_FN(clGetProgramInfo,
         (cl_program program, cl_program_info param_name, size_t param_value_size, void* param_value,
          size_t* param_value_size_ret),
         (program, param_name, param_value_size, param_value, param_value_size_ret))
TL_CL_FN(clGetProgramBuildInfo,
         (cl_program program, cl_device_id device, cl_program_build_info param_name, size_t param_value_size,
          void* param_value, size_t* param_value_size_ret),
         (program, device, param_name, param_value_size, param_value, param_value_size_ret))
TL_CL_FN(clReleaseProgram, (cl_program program), (program))
TL_CL_OBJ(cl_kernel, clCreateKernel, (cl_program program, const char* kernel_name, cl_int* errcode_ret),
          (program, kernel_name, errcode_ret))
TL_CL_FN(clReleaseKernel, (cl_kernel kernel), (kernel))
TL_CL_FN(clSetKernelArg, (cl_kernel kernel, cl_uint arg_index, size_t arg_size, const void* arg_value),
         (kernel, arg_index, arg_size, arg_value))
TL_CL_FN(clGetKernelWorkGroupInfo,
         (cl_kernel kernel, cl_device_id device, cl_kernel_work_group_info param_name,
          size_t param_value_size, void* param_value, size_t* param_value_size_ret),
         (kernel, device, param_name, param_value_size, param_value, param_value_size_ret))
TL_CL_FN(clEnqueueNDRangeKernel,
         (cl_command_queue command_queue, cl_kernel kernel, cl_uint work_dim,
          const size_t* global_work_offset, const size_t* global_work_size, const size_t* local_work_size,
          cl_uint num_events_in_wait_list, const cl_event* event_wait_list, cl_event* event),
         (command_queue, kernel, work_dim, global_work_offset, global_work_size, local_work_size,
          num_events_in_wait_list, event_wait_list, event))
TL_CL_FN(clEnqueueReadBuffer,
         (cl_command_queue command_queue, cl_mem buffer, cl_bool blocking_read, size_t offset, size_t size,
          void* ptr, cl_uint num_events_in_wait_list, const cl_event* event_wait_list, cl_event* event),
         (command_queue, buffer, blocking_read, offset, size, ptr, num_events_in_wait_list, event_wait_list,
          event))
TL_CL_FN(clEnqueueWriteBuffer,
         (cl_command_queue command_queue, cl_mem buffer, cl_bool blocking_write, size_t offset, size_t size,
          const void* ptr, cl_uint num_events_in_wait_list, const cl_event* event_wait_list, cl_event* event),
         (command_queue, buffer, blocking_write, offset, size, ptr, num_events_in_wait_list, event_wait_list,
          event))
TL_CL_FN(clEnqueueWriteImage,
         (cl_command_queue command_queue, cl_mem image, cl_bool blocking_write, const size_t* origin,
          const size_t* region, size_t input_row_pitch, size_t input_slice_pitch, const void* ptr,
          cl_uint num_events_in_wait_list, const cl_event* event_wait_list, cl_event* event),
         (command_queue, image, blocking_write, origin, region, input_row_pitch, input_slice_pitch, ptr,
          num_events_in_wait_list, event_wait_list, event))
TL_CL_FN(clEnqueueCopyBuffer,
         (cl_command_queue command_queue, cl_mem src_buffer, cl_mem dst_buffer, size_t src_offset,
          size_t dst_offset, size_t size, cl_uint num_events_in_wait_list, const cl_event* event_wait_list,
          cl_event* event),
         (command_queue, src_buffer, dst_buffer, src_offset, dst_offset, size, num_events_in_wait_list,
          event_wait_list, event))
TL_CL_FN(clEnqueueFillBuffer,
         (cl_command_queue command_queue, cl_mem buffer, const void* pattern, size_t pattern_size,
          size_t offset, size_t size, cl_uint num_events_in_wait_list, const cl_event* event_wait_list,
          cl_event* event),
         (command_queue, buffer, pattern, pattern_size, offset, size, num_events_in_wait_list,
          event_wait_list, event))
TL_CL_FN(clFinish, (cl_command_queue command_queue), (command_queue))
TL_CL_FN(clFlush, (cl_command_queue command_queue), (command_queue))
TL_CL_FN(clWaitForEvents, (cl_uint num_events, const cl_event* event_list), (num_events, event_list))
TL_CL_FN(clGetEventProfilingInfo,
         (cl_event event, cl_profiling_info param_name, size_t param_value_size, void* param_value,
          size_t* param_value_size_ret),
         (event, param_name, param_value_size, param_value, param_value_size_ret))
TL_CL_FN(clReleaseEvent, (cl_event event), (event))

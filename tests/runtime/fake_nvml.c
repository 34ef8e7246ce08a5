/* A stand-in for libnvidia-ml.so.1 with the entry points telemetry reads (runtime/telemetry/nvml.h), each
   with NVML's own signature, returning fixed values (the energy counter advances 2 J per read), so that the
   run-time loading and every reading is checked on a machine without an NVIDIA GPU. Loaded by the tests
   through TILELLM_NVML_LIBRARY. */
#include <string.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct {
  unsigned int gpu;
  unsigned int memory;
} nvmlUtilization_t;

static struct nvmlDevice_st { int unused; } the_device;
static unsigned long long energy_mj = 1000000ull;
static int initialized = 0;

nvmlReturn_t nvmlInit_v2(void) {
  initialized = 1;
  return 0;
}
nvmlReturn_t nvmlShutdown(void) {
  initialized = 0;
  return 0;
}
const char* nvmlErrorString(nvmlReturn_t r) {
  return r == 0 ? "Success" : "Fake error";
}
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* n) {
  *n = 1;
  return initialized ? 0 : 1;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t* d) {
  if (i != 0) return 2; /* NVML_ERROR_INVALID_ARGUMENT */
  *d = &the_device;
  return 0;
}
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* name, unsigned int len) {
  (void)d;
  strncpy(name, "Fake NVIDIA H200", len - 1);
  name[len - 1] = 0;
  return 0;
}
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int* mw) {
  (void)d;
  *mw = 312500;
  return 0;
}
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long* mj) {
  (void)d;
  *mj = energy_mj;
  energy_mj += 2000;
  return 0;
}
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int* c) {
  (void)d;
  if (sensor != 0) return 3; /* NVML_ERROR_NOT_SUPPORTED */
  *c = 67;
  return 0;
}
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned int* mhz) {
  (void)d;
  if (type == 1)
    *mhz = 1755; /* SM */
  else if (type == 2)
    *mhz = 2619; /* memory */
  else
    return 3;
  return 0;
}
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t* u) {
  (void)d;
  u->gpu = 93;
  u->memory = 71;
  return 0;
}
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d, unsigned long long* r) {
  (void)d;
  *r = 0x4ull | 0x20ull; /* sw power cap, sw thermal slowdown */
  return 0;
}
nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned int* mw) {
  (void)d;
  *mw = 700000;
  return 0;
}

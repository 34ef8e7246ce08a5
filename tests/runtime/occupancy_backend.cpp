// The "occupancy-test" backend (occupancy_backend.h).
#include "occupancy_backend.h"

#include <algorithm>
#include <memory>

#include "../common/forwarding_backend.h"
#include "backends/registry.h"

namespace tilellm::test {
namespace {

class OccupancyBackend final : public ForwardingBackend {
 public:
  explicit OccupancyBackend(const BackendParams& p)
      : ForwardingBackend(host_backend().make(p)), mask_(p.tile_mask > 0) {}
  std::string_view name() const override { return "occupancy-test"; }

  int occupancy_steps() const override { return 2; }
  void set_occupancy_step(int step) override {
    occupancy_log().occupancy = step;
    occupancy_log().max_occupancy = std::max(occupancy_log().max_occupancy, step);
  }
  bool has_tile_mask() const override { return mask_; }
  void set_tile_mask(bool on) override {
    occupancy_log().mask = on;
    occupancy_log().mask_ever = occupancy_log().mask_ever || on;
  }

 private:
  bool mask_;
};

BackendEntry occupancy_entry() {
  BackendEntry e;
  e.name = "occupancy-test";
  e.mnn_type = 98;
  e.summary = "the host backend's ops, with pacing measures to record (tests only)";
  e.devices = [](const std::string&) {
    return std::vector<DeviceInfo>{{"the host", "recorded", "  (none)\n"}};
  };
  e.make = [](const BackendParams& p) -> std::unique_ptr<Backend> {
    occupancy_log() = OccupancyLog();
    occupancy_log().mask_fraction = p.tile_mask;
    return std::make_unique<OccupancyBackend>(p);
  };
  return e;
}

}  // namespace

OccupancyLog& occupancy_log() {
  static OccupancyLog log;
  return log;
}

TILELLM_REGISTER_BACKEND(occupancy_entry);

}  // namespace tilellm::test

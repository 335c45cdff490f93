//===- LrSchedule.h - The learning-rate schedule after warm-up --*- C++ -*-===//
//
// What the learning rate does after its linear warm-up
// (`learning_rate_schedule` in a config, `--lr-schedule` on the tools, the
// `lr-schedule` option of sd-build-train-step): stay at its peak, or decay to 0
// linearly (MaxDiffusion's schedule) or along a half cosine, over
// `learning_rate_schedule_steps`. One enum shared by the run specification
// (MLIR-free) and the compiler. Header-only.
//
//===----------------------------------------------------------------------===//

#ifndef SD_CONFIG_LRSCHEDULE_H
#define SD_CONFIG_LRSCHEDULE_H

#include "sd/Config/NameTable.h"

#include <optional>
#include <string_view>

namespace sd {

enum class LrSchedule { Constant, Linear, Cosine };

inline constexpr NameTable<LrSchedule, 3> kLrScheduleNames = {{
    {LrSchedule::Constant, "constant"},
    {LrSchedule::Linear, "linear"},
    {LrSchedule::Cosine, "cosine"},
}};

/// The schedule's name: "constant", "linear" or "cosine".
inline std::string_view lrScheduleName(LrSchedule schedule) {
  return lookupName(kLrScheduleNames, schedule);
}

/// The schedule spelled `name`; nullopt for an unknown name.
inline std::optional<LrSchedule> parseLrSchedule(std::string_view name) {
  return lookupKind(kLrScheduleNames, name);
}

} // namespace sd

#endif // SD_CONFIG_LRSCHEDULE_H

//===- ElementType.cpp - The element type of a runtime buffer -------------===//

#include "sd/Runtime/ElementType.h"

#include "sd/Runtime/ProgramABI.h"

namespace sd::rt {

int64_t elementBytes(ElementType type) {
  switch (type) {
  case ElementType::F32:
    return 4;
  case ElementType::BF16:
    return 2;
  }
  return 4;
}

const char *elementTypeName(ElementType type) {
  switch (type) {
  case ElementType::F32:
    return "f32";
  case ElementType::BF16:
    return "bf16";
  }
  return "f32";
}

int32_t abiElementType(ElementType type) {
  switch (type) {
  case ElementType::F32:
    return SD_F32;
  case ElementType::BF16:
    return SD_BF16;
  }
  return SD_F32;
}

std::optional<ElementType> elementTypeFromAbi(int32_t value) {
  switch (value) {
  case SD_F32:
    return ElementType::F32;
  case SD_BF16:
    return ElementType::BF16;
  default:
    return std::nullopt;
  }
}

} // namespace sd::rt

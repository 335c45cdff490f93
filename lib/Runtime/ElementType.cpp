//===- ElementType.cpp - The element type of a runtime buffer -------------===//

#include "sd/Runtime/ElementType.h"

#include "sd/Runtime/ProgramABI.h"

namespace sd::rt {

int64_t elementBytes(ElementType type) {
  switch (type) {
  case ElementType::F32:
    return 4;
  }
  return 4;
}

const char *elementTypeName(ElementType type) {
  switch (type) {
  case ElementType::F32:
    return "f32";
  }
  return "f32";
}

int32_t abiElementType(ElementType type) {
  switch (type) {
  case ElementType::F32:
    return SD_F32;
  }
  return SD_F32;
}

std::optional<ElementType> elementTypeFromAbi(int32_t value) {
  switch (value) {
  case SD_F32:
    return ElementType::F32;
  default:
    return std::nullopt;
  }
}

} // namespace sd::rt

//===- ElementType.h - The element type of a runtime buffer -----*- C++ -*-===//
//
// What every buffer the runtime holds, moves or hands a program is made of:
// the argument specs, the host tensors of TrainingSession, the program's
// signature and each collective name one. The ABI spells it as an
// SdElementType (sd/Runtime/ProgramABI.h); the conversions are here.
//
//===----------------------------------------------------------------------===//

#ifndef SD_RUNTIME_ELEMENTTYPE_H
#define SD_RUNTIME_ELEMENTTYPE_H

#include <cstdint>
#include <optional>

namespace sd::rt {

/// The element type of a buffer: f32, or bfloat16 (sd/Runtime/BFloat16.h).
enum class ElementType { F32, BF16 };

/// Bytes of one element.
int64_t elementBytes(ElementType type);
/// "f32", "bf16".
const char *elementTypeName(ElementType type);

/// The SdElementType of `type`, and back (nullopt for a value the runtime
/// does not know).
int32_t abiElementType(ElementType type);
std::optional<ElementType> elementTypeFromAbi(int32_t value);

} // namespace sd::rt

#endif // SD_RUNTIME_ELEMENTTYPE_H

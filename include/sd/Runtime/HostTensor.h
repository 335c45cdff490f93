//===- HostTensor.h - A typed tensor in host memory -------------*- C++ -*-===//
//
// What a TrainingSession takes and gives for a whole argument or result (a
// batch, a parameter to export or compare), and the typed views of one
// device's block of one: each names its element type, so a caller states
// the type it reads or writes and nothing assumes f32.
//
//===----------------------------------------------------------------------===//

#ifndef SD_RUNTIME_HOSTTENSOR_H
#define SD_RUNTIME_HOSTTENSOR_H

#include "sd/Runtime/BFloat16.h"
#include "sd/Runtime/ElementType.h"

#include <cassert>
#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <vector>

namespace sd::rt {

/// A tensor's elements, row-major, of one element type.
class HostTensor {
public:
  HostTensor() = default;
  /// `elements` zeros of `type`.
  HostTensor(ElementType type, int64_t elements) : type(type) {
    if (type == ElementType::BF16)
      halves.assign(static_cast<size_t>(elements), BFloat16{});
    else
      values.assign(static_cast<size_t>(elements), 0.0f);
  }
  /// f32 elements.
  HostTensor(std::vector<float> values) : values(std::move(values)) {}
  HostTensor(std::initializer_list<float> values) : values(values) {}
  /// bfloat16 elements.
  HostTensor(std::vector<BFloat16> values)
      : type(ElementType::BF16), halves(std::move(values)) {}

  ElementType elementType() const { return type; }
  int64_t size() const {
    return static_cast<int64_t>(type == ElementType::BF16 ? halves.size()
                                                          : values.size());
  }
  int64_t bytes() const { return size() * elementBytes(type); }
  const void *data() const {
    return type == ElementType::BF16 ? static_cast<const void *>(halves.data())
                                     : values.data();
  }
  void *data() {
    return type == ElementType::BF16 ? static_cast<void *>(halves.data())
                                     : values.data();
  }

  /// The elements of an f32 tensor.
  const std::vector<float> &f32() const {
    assert(type == ElementType::F32 && "not an f32 tensor");
    return values;
  }
  std::vector<float> &f32() {
    assert(type == ElementType::F32 && "not an f32 tensor");
    return values;
  }
  /// The elements of a bfloat16 tensor.
  const std::vector<BFloat16> &bf16() const {
    assert(type == ElementType::BF16 && "not a bf16 tensor");
    return halves;
  }
  std::vector<BFloat16> &bf16() {
    assert(type == ElementType::BF16 && "not a bf16 tensor");
    return halves;
  }

private:
  ElementType type = ElementType::F32;
  std::vector<float> values;
  std::vector<BFloat16> halves;
};

/// One device's block of an argument: `elements` elements of `elementType`
/// at `data` (row-major, the argument's local shape).
template <typename Pointer> struct BlockView {
  ElementType elementType = ElementType::F32;
  Pointer data = nullptr;
  int64_t elements = 0;

  /// The elements of an f32 block.
  auto f32() const { return as<float>(ElementType::F32); }
  /// The elements of a bfloat16 block.
  auto bf16() const { return as<BFloat16>(ElementType::BF16); }

private:
  /// `data` as `T` elements, const where the view is; asserts the type.
  template <typename T> auto as([[maybe_unused]] ElementType expected) const {
    assert(elementType == expected && "the block has another element type");
    using Element =
        std::conditional_t<std::is_const_v<std::remove_pointer_t<Pointer>>,
                           const T, T>;
    return static_cast<Element *>(data);
  }
};
using Block = BlockView<void *>;
using ConstBlock = BlockView<const void *>;

} // namespace sd::rt

#endif // SD_RUNTIME_HOSTTENSOR_H

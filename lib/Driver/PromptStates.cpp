//===- PromptStates.cpp - sdsample --text-states
//---------------------------===//
//
// The prompts a text-conditioned model (Wan, Flux) samples from, as a
// text encoder wrote them: diffusers' pipeline arguments `prompt_embeds`,
// `pooled_prompt_embeds` and their `negative_` twins, checked against
// @denoise's conditioning inputs before anything compiles.
//
//===----------------------------------------------------------------------===//

#include "sd/Driver/Sample.h"

#include "sd/Checkpoint/Safetensors.h"

#include "llvm/ADT/STLExtras.h"

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include <cmath>

using namespace mlir;
using namespace mlir::sd;

namespace ckpt = ::sd::ckpt;
namespace rt = ::sd::rt;

namespace {

/// The tensor of `role`'s states: positive or negative.
std::string tensorName(rt::InputRole role, bool negative) {
  std::string name =
      role == rt::InputRole::Pooled ? "pooled_prompt_embeds" : "prompt_embeds";
  return negative ? "negative_" + name : name;
}

/// `shape` with a leading count dimension written as `count`.
std::string withCount(const std::string &count,
                      const std::vector<int64_t> &shape) {
  std::string text = "[" + count;
  for (int64_t d : shape)
    text += ", " + std::to_string(d);
  return text + "]";
}

} // namespace

absl::StatusOr<PromptStates>
mlir::sd::readPromptStates(const std::string &path,
                           const std::vector<ConditionInput> &inputs) {
  absl::StatusOr<ckpt::SafetensorsFile> file =
      readWholeSafetensors(path, "--text-states file");
  if (!file.ok())
    return file.status();
  // One tensor per input: a model with two inputs of one role would take
  // one tensor for both.
  for (size_t i = 0; i < inputs.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (inputs[i].role == inputs[j].role)
        return absl::InvalidArgumentError(absl::StrFormat(
            "@denoise has two inputs of role %s; --text-states feeds one "
            "'%s' each",
            rt::inputRoleName(inputs[i].role),
            tensorName(inputs[i].role, false)));
  std::vector<std::string> known;
  for (const ConditionInput &input : inputs)
    for (bool negative : {false, true})
      known.push_back(tensorName(input.role, negative));
  for (const ckpt::SafetensorsTensor &tensor : file->tensors)
    if (llvm::find(known, tensor.name) == known.end())
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tensor '%s' is not a text state this model takes (%s)", path,
          tensor.name, absl::StrJoin(known, ", ")));

  PromptStates states;
  // The negative prompt's states come for every input or for none.
  bool anyNegative = false, allNegative = true;
  for (const ConditionInput &input : inputs) {
    bool found = file->find(tensorName(input.role, true)) != nullptr;
    anyNegative |= found;
    allNegative &= found;
  }
  if (anyNegative && !allNegative)
    for (const ConditionInput &input : inputs)
      if (!file->find(tensorName(input.role, true)))
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s has a negative prompt's states but no '%s' %s", path,
            tensorName(input.role, true), withCount("1", input.shape)));

  for (bool negative : {false, true}) {
    if (negative && !anyNegative)
      break;
    for (const ConditionInput &input : inputs) {
      std::string name = tensorName(input.role, negative);
      const ckpt::SafetensorsTensor *tensor = file->find(name);
      if (!tensor)
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s has no tensor '%s' %s (the text encoder's output for each "
            "prompt)",
            path, name, withCount("N", input.shape)));
      if (!ckpt::isFloatingDtype(tensor->dtype))
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: tensor '%s' is %s; text states are F32, "
                            "F16, BF16 or F64",
                            path, name, tensor->dtype));
      const std::vector<int64_t> &shape = tensor->shape;
      bool fits =
          shape.size() == input.shape.size() + 1 && shape[0] >= 1 &&
          std::equal(input.shape.begin(), input.shape.end(), shape.begin() + 1);
      if (!fits)
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: tensor '%s' has shape %s, but the model takes %s", path, name,
            shapeString(shape),
            withCount(negative ? "1 or N" : "N", input.shape)));
      int64_t count = shape[0];
      int64_t &expected = negative ? states.negatives : states.prompts;
      if (!negative && expected != 0 && count != expected)
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: tensor '%s' holds %d prompts, but '%s' holds %d", path, name,
            count, tensorName(inputs.front().role, false), expected));
      if (negative && count != 1 && count != states.prompts)
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: tensor '%s' holds %d negative prompts; give one for every "
            "prompt, or one per prompt (%d)",
            path, name, count, states.prompts));
      if (negative && expected != 0 && count != expected)
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: tensor '%s' holds %d negative prompts, but '%s' holds %d",
            path, name, count, tensorName(inputs.front().role, true),
            expected));
      expected = count;
      for (size_t i = 0; i < tensor->values.size(); ++i)
        if (!std::isfinite(tensor->values[i]))
          return absl::InvalidArgumentError(absl::StrFormat(
              "%s: tensor '%s' holds %g at element %d; text states must be "
              "finite",
              path, name, tensor->values[i], i));
      (negative ? states.negative : states.positive).push_back(tensor->values);
    }
  }
  return states;
}

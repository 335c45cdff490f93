//===- AddLora.cpp - low-rank adapters beside the targeted projections ----===//
//
// LoRA as PEFT builds it (see the pass description in Passes.td): for a
// targeted Linear `X` with weight `X.weight` [out..., in], two parameters
// `X.lora_A.weight` [r, in] (uniform in ±1/sqrt(in), PEFT's kaiming
// default) and `X.lora_B.weight` [out..., r] (zeros), and each product
// y = x·Wᵀ becomes y + (x·(s·A)ᵀ)·Bᵀ with s = alpha / r. Every other
// parameter is frozen. Weights reach their products through calls of block
// functions: a callee that receives a targeted weight is cloned with the
// adapters as extra arguments, once per set of targeted argument positions.
//
//===----------------------------------------------------------------------===//

#include "sd/IR/SDOps.h"
#include "sd/Passes/Autodiff.h"
#include "sd/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Regex.h"

#include <cmath>
#include <map>

namespace mlir::sd {
#define GEN_PASS_DEF_ADDLORA
#include "sd/Passes/Passes.h.inc"
} // namespace mlir::sd

using namespace mlir;
using namespace mlir::sd;

namespace {

/// One targeted weight inside a function: the weight, its adapters and the
/// parameter's name (for messages).
struct Target {
  Value weight, a, b;
  std::string name;
};

class LoraBuilder {
public:
  LoraBuilder(ModuleOp module, double scale)
      : module(module), symbols(module), scale(scale),
        builder(module.getContext()) {}

  /// Gives every product of a target's weight in `func` the target's
  /// adapters, through the calls that pass the weight on.
  LogicalResult rewrite(func::FuncOp func, ArrayRef<Target> targets);
  /// Erases the functions that were cloned and that nothing calls any more.
  void eraseUnusedCallees();

private:
  LogicalResult rewriteProduct(DotGeneralOp dot, unsigned operand,
                               const Target &target);
  LogicalResult rewriteCall(func::CallOp call,
                            const std::map<unsigned, const Target *> &targets);
  FailureOr<func::FuncOp>
  specialize(func::FuncOp callee,
             const std::map<unsigned, const Target *> &targets);

  ModuleOp module;
  SymbolTable symbols;
  double scale;
  OpBuilder builder;
  /// The clone of a callee per set of targeted argument positions.
  std::map<std::pair<std::string, std::vector<unsigned>>, func::FuncOp> clones;
  SmallVector<func::FuncOp> originals;
};

/// y = dot(x, W) (or dot(W, x)) gains dot(dot(x, s·A), B) in y's layout.
LogicalResult LoraBuilder::rewriteProduct(DotGeneralOp dot, unsigned operand,
                                          const Target &target) {
  bool weightIsRhs = operand == 1;
  ArrayRef<int64_t> weightBatch =
      weightIsRhs ? dot.getRhsBatch() : dot.getLhsBatch();
  ArrayRef<int64_t> weightContract =
      weightIsRhs ? dot.getRhsContract() : dot.getLhsContract();
  ArrayRef<int64_t> otherContract =
      weightIsRhs ? dot.getLhsContract() : dot.getRhsContract();
  auto weightType = cast<RankedTensorType>(target.weight.getType());
  int64_t last = weightType.getRank() - 1;
  if (!weightBatch.empty() || weightContract.size() != 1 ||
      weightContract[0] != last)
    return dot.emitOpError("uses LoRA target ")
           << target.name
           << " in a product that does not contract its last dimension (its "
              "input features) alone: it is not a Linear layer's weight";
  Value x = dot->getOperand(1 - operand);
  Location loc = dot.getLoc();
  builder.setInsertionPoint(dot);
  // s·A: the scale on the small factor.
  Value factor = ConstantOp::create(
      builder, loc, autodiff::splatAttr(builder, scale, target.a.getType()));
  Value scaledA = MulOp::create(builder, loc, target.a, factor);
  int64_t xc = otherContract[0];
  int64_t bLast = cast<RankedTensorType>(target.b.getType()).getRank() - 1;
  ArrayRef<int64_t> none;
  Value delta;
  if (weightIsRhs) {
    // [x free..., r], then [x free..., out...].
    Value h = DotGeneralOp::create(builder, loc, x, scaledA, none, none,
                                   ArrayRef<int64_t>{xc}, ArrayRef<int64_t>{1});
    int64_t hLast = cast<RankedTensorType>(h.getType()).getRank() - 1;
    delta = DotGeneralOp::create(builder, loc, h, target.b, none, none,
                                 ArrayRef<int64_t>{hLast},
                                 ArrayRef<int64_t>{bLast});
  } else {
    // [r, x free...], then [out..., x free...].
    Value h = DotGeneralOp::create(builder, loc, scaledA, x, none, none,
                                   ArrayRef<int64_t>{1}, ArrayRef<int64_t>{xc});
    delta =
        DotGeneralOp::create(builder, loc, target.b, h, none, none,
                             ArrayRef<int64_t>{bLast}, ArrayRef<int64_t>{0});
  }
  Value y = dot.getResult();
  if (delta.getType() != y.getType())
    return dot.emitOpError("LoRA adapters of ")
           << target.name << " give " << delta.getType() << ", not "
           << y.getType();
  builder.setInsertionPointAfter(dot);
  auto sum = AddOp::create(builder, loc, y, delta);
  y.replaceAllUsesExcept(sum, sum);
  return success();
}

LogicalResult LoraBuilder::rewrite(func::FuncOp func,
                                   ArrayRef<Target> targets) {
  // Per call, the targets it passes on, by operand position.
  llvm::MapVector<Operation *, std::map<unsigned, const Target *>> calls;
  for (const Target &target : targets)
    for (OpOperand &use : llvm::make_early_inc_range(target.weight.getUses())) {
      Operation *user = use.getOwner();
      if (auto dot = dyn_cast<DotGeneralOp>(user)) {
        if (failed(rewriteProduct(dot, use.getOperandNumber(), target)))
          return failure();
      } else if (isa<func::CallOp>(user)) {
        calls[user][use.getOperandNumber()] = &target;
      } else {
        return user->emitOpError("uses LoRA target ")
               << target.name
               << ", which only products (sd.dot_general) and calls may use";
      }
    }
  for (auto &[call, passed] : calls)
    if (failed(rewriteCall(cast<func::CallOp>(call), passed)))
      return failure();
  return success();
}

LogicalResult
LoraBuilder::rewriteCall(func::CallOp call,
                         const std::map<unsigned, const Target *> &targets) {
  auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
  if (!callee || callee.isExternal())
    return call.emitOpError("passes LoRA target ")
           << targets.begin()->second->name << " to a function without body";
  FailureOr<func::FuncOp> clone = specialize(callee, targets);
  if (failed(clone))
    return failure();
  SmallVector<Value> operands(call.getOperands());
  for (const auto &entry : targets) {
    operands.push_back(entry.second->a);
    operands.push_back(entry.second->b);
  }
  builder.setInsertionPoint(call);
  auto newCall = func::CallOp::create(builder, call.getLoc(), *clone, operands);
  for (NamedAttribute attr : call->getDiscardableAttrs())
    newCall->setAttr(attr.getName(), attr.getValue());
  call.replaceAllUsesWith(newCall.getResults());
  call.erase();
  return success();
}

/// `callee` with two more arguments (A, B) per targeted position, at the
/// end, whose products use them.
FailureOr<func::FuncOp>
LoraBuilder::specialize(func::FuncOp callee,
                        const std::map<unsigned, const Target *> &targets) {
  std::pair<std::string, std::vector<unsigned>> key{callee.getSymName().str(),
                                                    {}};
  for (const auto &entry : targets)
    key.second.push_back(entry.first);
  if (auto it = clones.find(key); it != clones.end())
    return it->second;
  func::FuncOp clone = callee.clone();
  clone.setPrivate();
  clone.setSymName((callee.getSymName() + "_lora").str());
  builder.setInsertionPoint(callee);
  builder.insert(clone);
  symbols.insert(clone); // renamed on a clash
  clones[key] = clone;
  if (!llvm::is_contained(originals, callee))
    originals.push_back(callee);
  SmallVector<Target> inner;
  for (const auto &[position, target] : targets) {
    unsigned index = clone.getNumArguments();
    (void)clone.insertArgument(index, target->a.getType(), {}, clone.getLoc());
    (void)clone.insertArgument(index + 1, target->b.getType(), {},
                               clone.getLoc());
    inner.push_back({clone.getArgument(position), clone.getArgument(index),
                     clone.getArgument(index + 1), target->name});
  }
  if (failed(rewrite(clone, inner)))
    return failure();
  return clone;
}

void LoraBuilder::eraseUnusedCallees() {
  // An original may call another: erase until nothing more goes.
  for (bool erased = true; erased;) {
    erased = false;
    for (func::FuncOp &func : originals)
      if (func && SymbolTable::symbolKnownUseEmpty(func, module)) {
        func.erase();
        func = nullptr;
        erased = true;
      }
  }
}

/// PEFT's target_modules: a module (a parameter's name without ".weight")
/// is targeted when it equals a name of the list or ends with "." and one,
/// or, with a regular expression, when the expression matches it whole.
class TargetMatcher {
public:
  TargetMatcher(ArrayRef<std::string> names, StringRef regex)
      : names(names), regex("^(" + posixClasses(regex) + ")$"),
        hasRegex(!regex.empty()) {}

  /// PEFT's expressions are Python's: \d, \w and \s (and their negations)
  /// as the POSIX classes llvm::Regex knows (where "\d" would match "d").
  static std::string posixClasses(StringRef regex) {
    std::string out;
    for (size_t i = 0; i < regex.size(); ++i) {
      char next = i + 1 < regex.size() ? regex[i + 1] : 0;
      const char *cls = nullptr;
      switch (regex[i] == '\\' ? next : 0) {
      case 'd':
        cls = "[0-9]";
        break;
      case 'D':
        cls = "[^0-9]";
        break;
      case 'w':
        cls = "[A-Za-z0-9_]";
        break;
      case 'W':
        cls = "[^A-Za-z0-9_]";
        break;
      case 's':
        cls = "[[:space:]]";
        break;
      case 'S':
        cls = "[^[:space:]]";
        break;
      default:
        break;
      }
      if (cls) {
        out += cls;
        ++i;
      } else {
        out += regex[i];
        if (regex[i] == '\\' && next) {
          out += next;
          ++i;
        }
      }
    }
    return out;
  }

  bool valid(std::string &error) const {
    return !hasRegex || regex.isValid(error);
  }
  /// The index of the list's name that matches `module`, -1 for the
  /// regular expression, or nullopt.
  std::optional<int64_t> match(StringRef module) const {
    for (auto [n, name] : llvm::enumerate(names))
      if (module == name || module.ends_with("." + name))
        return static_cast<int64_t>(n);
    if (hasRegex && regex.match(module))
      return -1;
    return std::nullopt;
  }

private:
  ArrayRef<std::string> names;
  llvm::Regex regex;
  bool hasRegex;
};

class AddLoraPass : public mlir::sd::impl::AddLoraBase<AddLoraPass> {
public:
  using AddLoraBase::AddLoraBase;

  void runOnOperation() override;

private:
  /// Adds the adapters of the targeted parameters of `func` and freezes
  /// the others; counts the targets and the names used.
  LogicalResult addAdapters(func::FuncOp func, const TargetMatcher &matcher,
                            LoraBuilder &lora, int64_t &numTargets,
                            llvm::SmallBitVector &namesUsed);
};

/// The adapters' argument attributes: A [r, in] along the weight's input
/// axis, B [out..., r] along its output axes, the rank unsharded.
static void adapterAttrs(func::FuncOp func, unsigned weightIndex,
                         StringRef module, int64_t rank, NamedAttrList &aAttrs,
                         NamedAttrList &bAttrs) {
  MLIRContext *context = func.getContext();
  auto type = cast<RankedTensorType>(func.getArgument(weightIndex).getType());
  int64_t in = type.getDimSize(type.getRank() - 1);
  auto uniform =
      InitAttr::get(context, InitKind::uniform,
                    APFloat(1.0 / std::sqrt(static_cast<double>(in))));
  auto zeros = InitAttr::get(context, InitKind::zeros, APFloat(0.0));
  SmallVector<int64_t> bStored;
  if (type.getRank() > 2) {
    int64_t out = 1;
    for (int64_t size : type.getShape().drop_back())
      out *= size;
    bStored = {out, rank};
  }
  aAttrs.set(SDDialect::kRoleAttrName,
             ParamAttr::get(context,
                            StringAttr::get(context, module + ".lora_A.weight"),
                            uniform, {}));
  bAttrs.set(SDDialect::kRoleAttrName,
             ParamAttr::get(context,
                            StringAttr::get(context, module + ".lora_B.weight"),
                            zeros, bStored));
  if (auto axes = func.getArgAttrOfType<LogicalAxesAttr>(
          weightIndex, SDDialect::kLogicalAxesAttrName)) {
    ArrayRef<StringAttr> names = axes.getNames();
    StringAttr none = StringAttr::get(context, "_");
    aAttrs.set(SDDialect::kLogicalAxesAttrName,
               LogicalAxesAttr::get(context, {none, names.back()}));
    SmallVector<StringAttr> bAxes(names.drop_back());
    bAxes.push_back(none);
    bAttrs.set(SDDialect::kLogicalAxesAttrName,
               LogicalAxesAttr::get(context, bAxes));
  }
}

LogicalResult AddLoraPass::addAdapters(func::FuncOp func,
                                       const TargetMatcher &matcher,
                                       LoraBuilder &lora, int64_t &numTargets,
                                       llvm::SmallBitVector &namesUsed) {
  MLIRContext *context = func.getContext();
  SmallVector<unsigned> targeted;
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
    auto param = func.getArgAttrOfType<ParamAttr>(i, SDDialect::kRoleAttrName);
    if (!param)
      continue;
    StringRef name = param.getName().getValue();
    if (name.contains(".lora_A.") || name.contains(".lora_B."))
      return func.emitOpError("already has LoRA adapters (parameter ")
             << name << ")";
    func.setArgAttr(i, SDDialect::kFrozenAttrName, UnitAttr::get(context));
    if (!name.consume_back(".weight"))
      continue;
    std::optional<int64_t> match = matcher.match(name);
    if (!match)
      continue;
    if (*match >= 0)
      namesUsed.set(*match);
    auto type = cast<RankedTensorType>(func.getArgument(i).getType());
    ArrayRef<int64_t> stored = param.getStoredShape();
    bool linear = type.getRank() >= 2 && type.hasStaticShape() &&
                  (stored.empty() || (stored.size() == 2 &&
                                      stored.back() == type.getShape().back()));
    if (!linear)
      return func.emitOpError("LoRA target ")
             << param.getName() << " of type " << type
             << " is not a Linear layer's weight [out, in]";
    targeted.push_back(i);
  }
  // Last first, so that the indices of the earlier ones hold.
  SmallVector<Target> targets;
  for (unsigned i : llvm::reverse(targeted)) {
    StringRef module =
        func.getArgAttrOfType<ParamAttr>(i, SDDialect::kRoleAttrName)
            .getName()
            .getValue()
            .drop_back(strlen(".weight"));
    auto type = cast<RankedTensorType>(func.getArgument(i).getType());
    SmallVector<int64_t> aShape = {rank, type.getShape().back()};
    SmallVector<int64_t> bShape(type.getShape().drop_back());
    bShape.push_back(rank);
    NamedAttrList aAttrs, bAttrs;
    adapterAttrs(func, i, module, rank, aAttrs, bAttrs);
    Location loc = func.getArgument(i).getLoc();
    (void)func.insertArgument(i + 1, type.clone(aShape),
                              aAttrs.getDictionary(context), loc);
    (void)func.insertArgument(i + 2, type.clone(bShape),
                              bAttrs.getDictionary(context), loc);
  }
  // The arguments are in place: their values are final.
  for (unsigned n = 0; n < targeted.size(); ++n) {
    unsigned i = targeted[n] + 2 * n;
    StringRef name =
        func.getArgAttrOfType<ParamAttr>(i, SDDialect::kRoleAttrName)
            .getName()
            .getValue();
    targets.push_back({func.getArgument(i), func.getArgument(i + 1),
                       func.getArgument(i + 2), name.str()});
  }
  numTargets = std::max<int64_t>(numTargets, targets.size());
  return lora.rewrite(func, targets);
}

void AddLoraPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (rank <= 0) {
    emitError(module.getLoc())
        << "lora-rank must be positive, not " << rank.getValue();
    return signalPassFailure();
  }
  double alphaValue = alpha > 0 ? alpha.getValue() : rank.getValue();
  if (targets.empty() && targetRegex.empty()) {
    emitError(module.getLoc())
        << "sd-add-lora needs target modules (targets or target-regex)";
    return signalPassFailure();
  }
  TargetMatcher matcher(targets, targetRegex);
  std::string error;
  if (!matcher.valid(error)) {
    emitError(module.getLoc()) << "target-regex '" << targetRegex.getValue()
                               << "' is not a regular expression: " << error;
    return signalPassFailure();
  }
  LoraBuilder lora(module, alphaValue / static_cast<double>(rank));
  int64_t numTargets = 0;
  llvm::SmallBitVector namesUsed(targets.size());
  // The functions with parameters (@loss, @denoise, @forward).
  SmallVector<func::FuncOp> entries;
  for (auto func : module.getOps<func::FuncOp>())
    if (!func.isExternal() &&
        llvm::any_of(llvm::seq(func.getNumArguments()), [&](unsigned i) {
          return func.getArgAttrOfType<ParamAttr>(i, SDDialect::kRoleAttrName);
        }))
      entries.push_back(func);
  for (func::FuncOp func : entries)
    if (failed(addAdapters(func, matcher, lora, numTargets, namesUsed)))
      return signalPassFailure();
  if (numTargets == 0) {
    emitError(module.getLoc())
        << "no parameter is the weight of a LoRA target module ("
        << llvm::join(targets, ", ")
        << (targetRegex.empty() ? "" : " regex " + targetRegex.getValue())
        << ")";
    return signalPassFailure();
  }
  for (auto [n, name] : llvm::enumerate(targets))
    if (!namesUsed.test(n)) {
      emitError(module.getLoc())
          << "LoRA target module '" << name << "' matches no parameter";
      return signalPassFailure();
    }
  lora.eraseUnusedCallees();
  numAdapted = numTargets;
}

} // namespace

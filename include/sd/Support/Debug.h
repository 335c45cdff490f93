//===- Debug.h - LLVM_DEBUG that works with a release LLVM ------*- C++ -*-===//
//
// sd logs its algorithms' steps with LLVM_DEBUG and a DEBUG_TYPE, as LLVM
// and MLIR do, and `sdopt -debug-only=sd-propagate` shows them. Include this
// header instead of llvm/Support/Debug.h.
//
// Distributions ship LLVM as a release build, and llvm/Support/Debug.h
// follows the NDEBUG of whoever includes it: under NDEBUG (our Release
// builds too) LLVM_DEBUG expands to nothing and isCurrentDebugType is a
// macro. The shared libLLVM still exports llvm::DebugFlag,
// llvm::isCurrentDebugType and llvm::setCurrentDebugTypes, so under NDEBUG
// this header restores the active forms of those macros for sd's own code.
// NDEBUG itself, and so assert, stays as the build sets it.
//
//===----------------------------------------------------------------------===//

#ifndef SD_SUPPORT_DEBUG_H
#define SD_SUPPORT_DEBUG_H

#include "llvm/Support/Compiler.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/raw_ostream.h"

#ifdef NDEBUG
#undef isCurrentDebugType
#undef setCurrentDebugType
#undef setCurrentDebugTypes
#undef DEBUG_WITH_TYPE

namespace llvm {
// Declared by llvm/Support/Debug.h only without NDEBUG; libLLVM defines
// them either way.
LLVM_ABI bool isCurrentDebugType(const char *Type, int Level);
LLVM_ABI void setCurrentDebugTypes(const char **Types, unsigned Count);
} // namespace llvm

/// As llvm/Support/Debug.h defines it without NDEBUG.
#define DEBUG_WITH_TYPE(TYPE, ...)                                             \
  do {                                                                         \
    if (::llvm::DebugFlag && ::llvm::isCurrentDebugType(TYPE, 1)) {            \
      __VA_ARGS__;                                                             \
    }                                                                          \
  } while (false)
#endif // NDEBUG

namespace sd {
/// Registers `-debug` and `-debug-only=<type>[,<type>...]` with llvm::cl
/// when LLVM has not (a release libLLVM does not); they set llvm::DebugFlag
/// and the current debug types. Call before parsing the command line.
void registerDebugOptions();
} // namespace sd

#endif // SD_SUPPORT_DEBUG_H

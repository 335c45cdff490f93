//===- SDAttrs.h - sd attributes --------------------------------*- C++ -*-===//
#ifndef SD_IR_SDATTRS_H
#define SD_IR_SDATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"

#include "sd/IR/SDEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "sd/IR/SDAttrs.h.inc"

#endif // SD_IR_SDATTRS_H

# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "sd"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.sd_obj_root, "test", "lit")

config.environment["FILECHECK_OPTS"] = "-enable-var-scope"
config.substitutions.append(("%sd_src_root", config.sd_src_root))
# `asan`: an ASan + UBSan build (scripts/test.sh --sanitize), for the tests
# that measure scale rather than memory safety.
if config.sd_sanitizers.upper() in ("ON", "1", "TRUE", "YES"):
    config.available_features.add("asan")
# The compiler that builds generated OpenMP programs ($SD_CXX, else c++).
config.substitutions.append(("%cxx", os.environ.get("SD_CXX", "c++")))

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
tool_dirs = [config.sd_tools_dir, config.llvm_tools_dir]
llvm_config.add_tool_substitutions(["sdopt", "sdgen", "sdrun", "sddata",
                                    "sdsample", "not", "count", "split-file"],
                                   tool_dirs)
# Device programs compiled by sdrun are cached in the build tree, not in the
# user's cache directory (CI shares one cache between its two builds).
config.environment["SD_CACHE_DIR"] = os.environ.get(
    "SD_CACHE_DIR", os.path.join(config.sd_obj_root, "sd-cache"))

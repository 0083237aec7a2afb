// The Batmobile version this code was built as: the repository's VERSION file, read by CMake
// (src/model/CMakeLists.txt writes version.cpp from version.cpp.in).
#pragma once

namespace batmobile {

// e.g. "1.0.0"; "unknown" where the build found no VERSION file.
const char* package_version();

}  // namespace batmobile

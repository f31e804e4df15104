// trainkit/version.hpp — the library version. The top-level VERSION file is the single source:
// CMake reads it, and a test checks that these numbers agree with it.
#pragma once

#define TRAINKIT_VERSION_MAJOR 0
#define TRAINKIT_VERSION_MINOR 1
#define TRAINKIT_VERSION_PATCH 0

namespace trainkit {
inline constexpr int version_major = TRAINKIT_VERSION_MAJOR;
inline constexpr int version_minor = TRAINKIT_VERSION_MINOR;
inline constexpr int version_patch = TRAINKIT_VERSION_PATCH;
inline constexpr const char* version_string = "0.1.0";
}  // namespace trainkit

# tests/cmake/version_test.cmake — the version has one source, the top-level VERSION file (cmake -P).
# Checks that CMake's project version (passed in as PROJECT_VERSION), the numbers and string in
# include/trainkit/version.hpp, and the Conan recipe (which must read VERSION, not spell a number)
# all agree with it, and that CHANGELOG.md has a section for it or an [Unreleased] one.
# Inputs: SOURCE (repository root), PROJECT_VERSION.
cmake_minimum_required(VERSION 3.25)
file(STRINGS ${SOURCE}/VERSION version LIMIT_COUNT 1)
if(NOT version MATCHES "^([0-9]+)\\.([0-9]+)\\.([0-9]+)$")
  message(FATAL_ERROR "VERSION must be MAJOR.MINOR.PATCH, is '${version}'")
endif()
set(major ${CMAKE_MATCH_1})
set(minor ${CMAKE_MATCH_2})
set(patch ${CMAKE_MATCH_3})
set(failures "")

if(NOT PROJECT_VERSION STREQUAL version)
  string(APPEND failures "CMake project version ${PROJECT_VERSION} != VERSION ${version}\n")
endif()

file(READ ${SOURCE}/include/trainkit/version.hpp header)
foreach(part MAJOR MINOR PATCH)
  string(TOLOWER ${part} var)
  if(NOT header MATCHES "#define TRAINKIT_VERSION_${part} ([0-9]+)")
    string(APPEND failures "version.hpp: no TRAINKIT_VERSION_${part}\n")
  elseif(NOT CMAKE_MATCH_1 STREQUAL ${var})
    string(APPEND failures
           "version.hpp: TRAINKIT_VERSION_${part} is ${CMAKE_MATCH_1}, VERSION says ${${var}}\n")
  endif()
endforeach()
if(NOT header MATCHES "version_string = \"([^\"]*)\"")
  string(APPEND failures "version.hpp: no version_string\n")
elseif(NOT CMAKE_MATCH_1 STREQUAL version)
  string(APPEND failures "version.hpp: version_string is ${CMAKE_MATCH_1}, VERSION says ${version}\n")
endif()

file(READ ${SOURCE}/conan/conanfile.py recipe)
if(recipe MATCHES "\n    version = ")
  string(APPEND failures "conan/conanfile.py spells a version; it must read VERSION in set_version\n")
endif()
if(NOT recipe MATCHES "def set_version\\(self\\):[^\n]*\n[^\n]*\"VERSION\"")
  string(APPEND failures "conan/conanfile.py: set_version() does not read the VERSION file\n")
endif()

file(READ ${SOURCE}/CHANGELOG.md changelog)
if(NOT changelog MATCHES "\n## \\[(Unreleased|${major}\\.${minor}\\.${patch})\\]")
  string(APPEND failures "CHANGELOG.md has neither [Unreleased] nor [${version}]\n")
endif()

if(failures)
  message(FATAL_ERROR "version sources disagree:\n${failures}")
endif()
message("version ${version}: CMake, version.hpp, Conan recipe and CHANGELOG agree")

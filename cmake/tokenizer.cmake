# cmake/tokenizer.cmake — the trainkit::tokenizer target: trainkit plus utf8proc.
#
# The GPT-2 tokenizer takes its Unicode letter/number/space classes from utf8proc (Debian:
# libutf8proc-dev). utf8proc ships a pkg-config file but no CMake package, so we look for it with
# pkg-config first and fall back to find_path/find_library. Without utf8proc the rest of trainkit
# still builds; only targets that link trainkit::tokenizer (tokenizer tests, prepare) are skipped.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(trainkit_utf8proc QUIET IMPORTED_TARGET libutf8proc)
endif()

if(TARGET PkgConfig::trainkit_utf8proc)
  set(trainkit_utf8proc_target PkgConfig::trainkit_utf8proc)
else()
  find_path(trainkit_utf8proc_include utf8proc.h)
  find_library(trainkit_utf8proc_library NAMES utf8proc)
  if(trainkit_utf8proc_include AND trainkit_utf8proc_library)
    add_library(trainkit_utf8proc_imported UNKNOWN IMPORTED)
    set_target_properties(trainkit_utf8proc_imported PROPERTIES
      IMPORTED_LOCATION "${trainkit_utf8proc_library}"
      INTERFACE_INCLUDE_DIRECTORIES "${trainkit_utf8proc_include}")
    set(trainkit_utf8proc_target trainkit_utf8proc_imported)
  endif()
endif()

if(trainkit_utf8proc_target)
  add_library(trainkit_tokenizer INTERFACE)
  add_library(trainkit::tokenizer ALIAS trainkit_tokenizer)
  set_target_properties(trainkit_tokenizer PROPERTIES EXPORT_NAME tokenizer)
  target_link_libraries(trainkit_tokenizer INTERFACE trainkit ${trainkit_utf8proc_target})
  message(STATUS "trainkit tokenizer: utf8proc found")
else()
  message(STATUS "trainkit tokenizer: utf8proc not found (apt install libutf8proc-dev); "
                 "tokenizer targets skipped")
endif()

# cmake/trainkit-find-utf8proc.cmake — defines the imported target trainkit::utf8proc when utf8proc
# is found. Used twice: by tokenizer.cmake when trainkit is built (or add_subdirectory'd), and by
# the installed trainkit-config.cmake, so the exported trainkit::tokenizer links the same name in
# both places. utf8proc ships a pkg-config file but no CMake package (Debian: libutf8proc-dev), so
# pkg-config comes first and find_path/find_library second. The target is GLOBAL because a parent
# project that add_subdirectory's trainkit links trainkit::tokenizer from its own directories.
if(NOT TARGET trainkit::utf8proc)
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(trainkit_utf8proc QUIET IMPORTED_TARGET GLOBAL libutf8proc)
  endif()
  if(TARGET PkgConfig::trainkit_utf8proc)
    add_library(trainkit::utf8proc INTERFACE IMPORTED GLOBAL)
    set_property(TARGET trainkit::utf8proc PROPERTY
                 INTERFACE_LINK_LIBRARIES PkgConfig::trainkit_utf8proc)
  else()
    find_path(trainkit_utf8proc_include utf8proc.h)
    find_library(trainkit_utf8proc_library NAMES utf8proc)
    if(trainkit_utf8proc_include AND trainkit_utf8proc_library)
      add_library(trainkit::utf8proc UNKNOWN IMPORTED GLOBAL)
      set_target_properties(trainkit::utf8proc PROPERTIES
        IMPORTED_LOCATION "${trainkit_utf8proc_library}"
        INTERFACE_INCLUDE_DIRECTORIES "${trainkit_utf8proc_include}")
    endif()
  endif()
endif()

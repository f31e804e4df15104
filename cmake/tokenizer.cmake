# cmake/tokenizer.cmake — the trainkit::tokenizer target: trainkit plus utf8proc.
#
# The GPT-2 tokenizer takes its Unicode letter/number/space classes from utf8proc (Debian:
# libutf8proc-dev), found by trainkit-find-utf8proc.cmake. Without utf8proc the rest of trainkit
# still builds; only targets that link trainkit::tokenizer (tokenizer tests, prepare) are skipped.
# The target is installed in its own export set, which the package config loads when it finds
# utf8proc on the consumer's machine (find_package(trainkit COMPONENTS tokenizer) requires it).
include(${CMAKE_CURRENT_LIST_DIR}/trainkit-find-utf8proc.cmake)

if(TARGET trainkit::utf8proc)
  add_library(trainkit_tokenizer INTERFACE)
  add_library(trainkit::tokenizer ALIAS trainkit_tokenizer)
  set_target_properties(trainkit_tokenizer PROPERTIES EXPORT_NAME tokenizer)
  target_link_libraries(trainkit_tokenizer INTERFACE trainkit trainkit::utf8proc)
  install(TARGETS trainkit_tokenizer EXPORT trainkit-tokenizer-targets)
  install(EXPORT trainkit-tokenizer-targets NAMESPACE trainkit::
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/trainkit)
  message(STATUS "trainkit tokenizer: utf8proc found")
else()
  message(STATUS "trainkit tokenizer: utf8proc not found (apt install libutf8proc-dev); "
                 "tokenizer targets skipped")
endif()

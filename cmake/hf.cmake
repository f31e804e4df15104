# cmake/hf.cmake — the trainkit::hf target: trainkit plus nlohmann_json.
#
# Hugging Face interchange (include/trainkit/io/safetensors_*.hpp, model/gpt2/hf.hpp) parses and
# writes JSON headers and config files with nlohmann_json (Debian: nlohmann-json3-dev), which
# trainkit::trainkit now requires too (the checkpoint manifest reader), so the component is always
# built; it stays a component of its own so find_package(trainkit COMPONENTS hf) keeps working.
# Installed in its own export set, loaded by the package config when nlohmann_json is found.
find_package(nlohmann_json 3 QUIET)
if(nlohmann_json_FOUND)
  add_library(trainkit_hf INTERFACE)
  add_library(trainkit::hf ALIAS trainkit_hf)
  set_target_properties(trainkit_hf PROPERTIES EXPORT_NAME hf)
  target_link_libraries(trainkit_hf INTERFACE trainkit nlohmann_json::nlohmann_json)
  install(TARGETS trainkit_hf EXPORT trainkit-hf-targets)
  install(EXPORT trainkit-hf-targets NAMESPACE trainkit::
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/trainkit)
  message(STATUS "trainkit hf: nlohmann_json ${nlohmann_json_VERSION} found")
else()
  message(STATUS "trainkit hf: nlohmann_json not found (apt install nlohmann-json3-dev); "
                 "Hugging Face targets skipped")
endif()

# cmake/mpi.cmake — the trainkit::mpi target: trainkit plus MPI (C++ compile, C bindings).
#
# Data-parallel training on the CPU (include/trainkit/reduce/mpi_*.hpp) reduces gradients with
# MPI non-blocking collectives (Debian: libopenmpi-dev openmpi-bin). It is a component of its own
# so trainkit::trainkit keeps needing only Eigen and Boost; without MPI, or with TRAINKIT_MPI=OFF
# (the sanitizer presets: Open MPI's own allocations read as leaks), only targets linking
# trainkit::mpi are skipped. Installed in its own export set, loaded by the package config when MPI
# is found (find_package(trainkit COMPONENTS mpi) requires it).
find_package(MPI COMPONENTS CXX QUIET)
option(TRAINKIT_MPI "Build the MPI gradient reducer and its tests (needs MPI)" ${MPI_CXX_FOUND})
if(TRAINKIT_MPI AND NOT MPI_CXX_FOUND)
  message(FATAL_ERROR "TRAINKIT_MPI=ON but no MPI was found (apt install libopenmpi-dev openmpi-bin)")
endif()
if(TRAINKIT_MPI)
  add_library(trainkit_mpi INTERFACE)
  add_library(trainkit::mpi ALIAS trainkit_mpi)
  set_target_properties(trainkit_mpi PROPERTIES EXPORT_NAME mpi)
  target_link_libraries(trainkit_mpi INTERFACE trainkit MPI::MPI_CXX)
  install(TARGETS trainkit_mpi EXPORT trainkit-mpi-targets)
  install(EXPORT trainkit-mpi-targets NAMESPACE trainkit::
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/trainkit)
  message(STATUS "trainkit mpi: MPI ${MPI_CXX_VERSION} found (${MPIEXEC_EXECUTABLE})")
elseif(MPI_CXX_FOUND)
  message(STATUS "trainkit mpi: TRAINKIT_MPI=OFF; MPI reducer targets skipped")
else()
  message(STATUS "trainkit mpi: MPI not found (apt install libopenmpi-dev openmpi-bin); "
                 "MPI reducer targets skipped")
endif()

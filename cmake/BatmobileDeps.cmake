# Dependency lookup shared by the top-level project and the LAMMPS hook.
#
# Kokkos: normally an installed Kokkos 4.5 (find_package; scripts/build_kokkos_host.sh on the CPU machines).
# With -DBATMOBILE_KOKKOS_SOURCE=<patched Kokkos tree> it is built in-tree instead (the CUDA builds: one Kokkos
# configuration, compiled with the project's own flags, and nothing to install on the GPU machine).
# GoogleTest: installed (libgtest-dev), else built from -DBATMOBILE_GTEST_SOURCE (Debian's /usr/src/googletest,
# carried to the GPU machine, where nothing can be installed).

# Python used by tests (needs numpy; torch for reference generation). /usr/bin/python3 on Debian; the GPU
# machine's system python has no numpy, so scripts/gpu_check.sh passes the machine's python3.
set(BATMOBILE_PYTHON /usr/bin/python3 CACHE FILEPATH "Python (numpy, torch) for tests and fixtures")

# A KokkosConfig.cmake that imports nothing, so that subprojects calling find_package(Kokkos) accept the
# in-tree Kokkos (targets kokkos / Kokkos::kokkos already defined).
function(batmobile_kokkos_config_shim)
  set(shim "${CMAKE_BINARY_DIR}/kokkos-config-shim")
  file(WRITE "${shim}/KokkosConfig.cmake"
    "# Kokkos is built in this CMake project (target Kokkos::kokkos); nothing to import.\nset(Kokkos_FOUND TRUE)\n")
  file(WRITE "${shim}/KokkosConfigVersion.cmake"
    "set(PACKAGE_VERSION 4.5.1)\nif(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)\n"
    "  set(PACKAGE_VERSION_COMPATIBLE FALSE)\nelse()\n  set(PACKAGE_VERSION_COMPATIBLE TRUE)\nendif()\n")
  set(Kokkos_DIR "${shim}" CACHE PATH "in-tree Kokkos (config shim)" FORCE)
endfunction()

# The target that src/kernels and src/model link for Kokkos (the LAMMPS hook sets another one for a KOKKOS LAMMPS).
set(BATMOBILE_KOKKOS_TARGET Kokkos::kokkos CACHE INTERNAL "")

macro(batmobile_find_kokkos)
  set(BATMOBILE_KOKKOS_SOURCE "" CACHE PATH "Build Kokkos from this source tree instead of find_package")
  if(BATMOBILE_KOKKOS_SOURCE)
    add_subdirectory("${BATMOBILE_KOKKOS_SOURCE}" kokkos)
    batmobile_kokkos_config_shim()
  else()
    find_package(Kokkos 4.5 REQUIRED CONFIG)
  endif()
endmacro()

macro(batmobile_find_gtest)
  set(BATMOBILE_GTEST_SOURCE "" CACHE PATH "GoogleTest source tree used when no GoogleTest is installed")
  find_package(GTest QUIET)
  if(NOT GTest_FOUND)
    if(NOT BATMOBILE_GTEST_SOURCE)
      message(FATAL_ERROR "GoogleTest not found: install libgtest-dev or pass -DBATMOBILE_GTEST_SOURCE=<googletest tree>")
    endif()
    set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
    set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)
    add_subdirectory("${BATMOBILE_GTEST_SOURCE}" googletest EXCLUDE_FROM_ALL)
    # Builds >= 1.11 define GTest::gtest{,_main}; keep the names find_package(GTest) gives.
    foreach(lib gtest gtest_main)
      if(NOT TARGET GTest::${lib})
        add_library(GTest::${lib} ALIAS ${lib})
      endif()
    endforeach()
    if(NOT TARGET GTest::GTest)
      add_library(GTest::GTest ALIAS gtest)
      add_library(GTest::Main ALIAS gtest_main)
    endif()
  endif()
endmacro()

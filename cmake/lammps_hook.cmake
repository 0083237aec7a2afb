# Compiles the Batmobile LAMMPS styles into the `lammps` target of a LAMMPS CMake build and builds the
# same styles as a plugin module (`plugin load batmobileplugin.so`). Include after LAMMPS's cmake/ has
# been added (add_subdirectory), so that its targets (lammps, lmp, kokkos) and its style-header helper
# functions (RegisterStyles, AddStyleHeader, GenerateStyleHeaders from StyleHeaderUtils.cmake) exist.
#
# Every *.cpp / *.h in STYLE_DIR is used; *_kokkos.* only when PKG_KOKKOS is on. Headers that declare a
# style (PairStyle(...) under #ifdef PAIR_CLASS, likewise FIX/COMPUTE/COMMAND) are added to LAMMPS's style
# lists, and the style_*.h headers are regenerated, so LAMMPS's factories know our styles.
# src/model (a library, target batmobile_model) and src/kernels (header-only) are added when present.

set(_BATMOBILE_HOOK_DIR "${CMAKE_CURRENT_LIST_DIR}")

# Lists the style macros "<Kind>Style(name,Class)" of one header as "Kind|name|Class" entries.
function(_batmobile_styles_of_header header out_var)
  file(STRINGS "${header}" lines REGEX "^[ \t]*(Pair|Fix|Compute|Command)Style[ \t]*\\(")
  set(result)
  foreach(line IN LISTS lines)
    if(line MATCHES "^[ \t]*(Pair|Fix|Compute|Command)Style[ \t]*\\([ \t]*([^, \t]+)[ \t]*,[ \t]*(.+)\\)[ \t]*;?")
      string(STRIP "${CMAKE_MATCH_3}" cls)
      list(APPEND result "${CMAKE_MATCH_1}|${CMAKE_MATCH_2}|${cls}")
    endif()
  endforeach()
  set(${out_var} "${result}" PARENT_SCOPE)
endfunction()

# Writes the plugin entry point that registers every pair/fix/compute style found in the headers.
function(_batmobile_write_plugin_source out_file)
  set(includes "")
  set(creators "")
  set(registrations "")
  set(n 0)
  foreach(header IN LISTS ARGN)
    _batmobile_styles_of_header("${header}" styles)
    if(NOT styles)
      continue()
    endif()
    get_filename_component(hname "${header}" NAME)
    string(APPEND includes "#include \"${hname}\"\n")
    foreach(entry IN LISTS styles)
      string(REPLACE "|" ";" parts "${entry}")
      list(GET parts 0 kind)
      list(GET parts 1 name)
      list(GET parts 2 cls)
      if(kind STREQUAL "Pair")
        string(APPEND creators "static Pair *batmobile_creator_${n}(LAMMPS *lmp) { return new ${cls}(lmp); }\n")
        set(style "pair")
        set(field "v1")
        set(ftype "lammpsplugin_factory1")
      elseif(kind STREQUAL "Fix" OR kind STREQUAL "Compute")
        string(TOLOWER "${kind}" style)
        string(APPEND creators "static ${kind} *batmobile_creator_${n}(LAMMPS *lmp, int argc, char **argv) { return new ${cls}(lmp, argc, argv); }\n")
        set(field "v2")
        set(ftype "lammpsplugin_factory2")
      else()
        continue()  # commands are not loaded from this plugin
      endif()
      string(APPEND registrations
        "  plugin.style = \"${style}\";\n  plugin.name = \"${name}\";\n"
        "  plugin.creator.${field} = (${ftype} *) &batmobile_creator_${n};\n  (*register_plugin)(&plugin, lmp);\n")
      math(EXPR n "${n} + 1")
    endforeach()
  endforeach()
  configure_file("${_BATMOBILE_HOOK_DIR}/batmobile_plugin.cpp.in" "${out_file}" @ONLY)
endfunction()

function(batmobile_hook_into_lammps)
  cmake_parse_arguments(ARG "" "LAMMPS_TREE;STYLE_DIR" "" ${ARGN})
  set(lammps_src "${ARG_LAMMPS_TREE}/src")
  get_target_property(lammps_bin lammps BINARY_DIR)
  set(style_headers_dir "${lammps_bin}/styles")
  get_filename_component(batmobile_src "${_BATMOBILE_HOOK_DIR}/../src" ABSOLUTE)

  # Lets src/model call find_package(Kokkos) although Kokkos is built inside this project.
  include("${_BATMOBILE_HOOK_DIR}/BatmobileDeps.cmake")
  if(TARGET kokkos)
    batmobile_kokkos_config_shim()
  endif()
  if(EXISTS "${batmobile_src}/kernels/CMakeLists.txt")
    add_subdirectory("${batmobile_src}/kernels" batmobile_kernels)
  endif()
  if(EXISTS "${batmobile_src}/model/CMakeLists.txt")
    # Static (PIC) so that it is linked into liblammps and the plugin: a private *shared* dependency of
    # liblammps would have to be in LAMMPS's install(EXPORT LAMMPS_Targets) set.
    set(BUILD_SHARED_LIBS OFF)
    set(CMAKE_POSITION_INDEPENDENT_CODE ON)
    add_subdirectory("${batmobile_src}/model" batmobile_model)
    unset(BUILD_SHARED_LIBS)   # back to LAMMPS's cache value (the plugin below depends on it)
  endif()

  file(GLOB sources CONFIGURE_DEPENDS "${ARG_STYLE_DIR}/*.cpp")
  file(GLOB headers CONFIGURE_DEPENDS "${ARG_STYLE_DIR}/*.h")
  if(NOT PKG_KOKKOS)
    list(FILTER sources EXCLUDE REGEX "_kokkos\\.cpp$")
    list(FILTER headers EXCLUDE REGEX "_kokkos\\.h$")
  endif()
  if(NOT sources)
    message(FATAL_ERROR "no LAMMPS style sources in ${ARG_STYLE_DIR}")
  endif()

  # Register our style headers with LAMMPS and regenerate its style_*.h (written only when changed).
  set(style_headers)
  foreach(header IN LISTS headers)
    file(STRINGS "${header}" kinds REGEX "^#ifdef (PAIR|FIX|COMPUTE|COMMAND)_CLASS")
    foreach(k IN LISTS kinds)
      string(REGEX REPLACE "^#ifdef ([A-Z]+)_CLASS.*" "\\1" kind "${k}")
      AddStyleHeader("${header}" ${kind})
      list(APPEND style_headers "${header}")
    endforeach()
  endforeach()
  list(REMOVE_DUPLICATES style_headers)
  GenerateStyleHeaders("${style_headers_dir}")
  message(STATUS "Batmobile: compiled into LAMMPS: ${sources}")
  message(STATUS "Batmobile: style headers: ${style_headers}")

  target_sources(lammps PRIVATE ${sources})
  # LAMMPS pins its own sources to C++11 (KOKKOS raises that to 14); ours need C++17 (if constexpr, fold
  # expressions, inline variables), which GCC accepted in C++14 mode with warnings only. GCC and Clang take the
  # last -std flag. Not yet for the CUDA build (nvcc_wrapper would also take the last one, with a warning per
  # file, but that build could not be re-run when this was written; it compiles our sources as C++14 + warnings).
  if(NOT CMAKE_CXX_COMPILER MATCHES "nvcc_wrapper")
    set_source_files_properties(${sources} TARGET_DIRECTORY lammps PROPERTIES COMPILE_OPTIONS "-std=c++17")
  endif()
  target_include_directories(lammps PRIVATE "${ARG_STYLE_DIR}" "${batmobile_src}")
  set(extra_libs)
  foreach(t batmobile_model batmobile_kernels)
    if(TARGET ${t})
      list(APPEND extra_libs ${t})
    endif()
  endforeach()
  target_link_libraries(lammps PRIVATE ${extra_libs})

  # The same styles as a plugin; needs a shared liblammps with PKG_PLUGIN (LMP_PLUGIN) to be loadable.
  if(PKG_PLUGIN AND BUILD_SHARED_LIBS)
    set(plugin_src "${CMAKE_BINARY_DIR}/batmobile_plugin.cpp")
    _batmobile_write_plugin_source("${plugin_src}" ${style_headers})
    add_library(batmobileplugin MODULE "${plugin_src}" ${sources})
    set_target_properties(batmobileplugin PROPERTIES PREFIX "" OUTPUT_NAME batmobileplugin
      LIBRARY_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}")
    target_include_directories(batmobileplugin PRIVATE "${ARG_STYLE_DIR}" "${batmobile_src}" "${lammps_src}")
    if(PKG_KOKKOS)
      target_include_directories(batmobileplugin PRIVATE "${lammps_src}/KOKKOS")
      target_link_libraries(batmobileplugin PRIVATE kokkos)
    endif()
    # lammps brings LAMMPS's public defines (integer sizes, LMP_KOKKOS) and MPI. -Bsymbolic binds the
    # plugin's own copies of our classes, so a plugin loaded into an lmp that has them built in runs its own.
    target_link_libraries(batmobileplugin PRIVATE lammps ${extra_libs})
    target_link_options(batmobileplugin PRIVATE "-Wl,-Bsymbolic")
  else()
    message(STATUS "Batmobile: plugin not built (needs -DPKG_PLUGIN=ON -DBUILD_SHARED_LIBS=ON)")
  endif()
endfunction()

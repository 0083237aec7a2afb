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

# The LAMMPS version of a tree as YYYYMMDD (what lammps_version() reports), from LAMMPS_VERSION in src/version.h.
function(_batmobile_lammps_version lammps_src out_var)
  file(STRINGS "${lammps_src}/version.h" line REGEX "define LAMMPS_VERSION ")
  if(NOT line MATCHES "\"([0-9]+) ([A-Z][a-z][a-z]) ([0-9][0-9][0-9][0-9])\"")
    message(FATAL_ERROR "no LAMMPS_VERSION in ${lammps_src}/version.h")
  endif()
  set(day ${CMAKE_MATCH_1})
  set(year ${CMAKE_MATCH_3})
  list(FIND _BATMOBILE_MONTHS "${CMAKE_MATCH_2}" month)
  math(EXPR number "${year} * 10000 + (${month} + 1) * 100 + ${day}")
  set(${out_var} ${number} PARENT_SCOPE)
endfunction()
set(_BATMOBILE_MONTHS Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec)

# Adds our style sources to liblammps and regenerates LAMMPS's style_*.h (written only when changed).
function(_batmobile_compile_into_lammps sources style_dir style_headers_dir lammps_version extra_libs)
  GenerateStyleHeaders("${style_headers_dir}")
  message(STATUS "Batmobile: compiled into LAMMPS: ${sources}")
  # liblammps keeps the symbols of our static libraries (and, without KOKKOS, of the model's own Kokkos) to itself,
  # so that a plugin linked against it carries its own copy of them and also loads into a stock LAMMPS. With KOKKOS,
  # LAMMPS's Kokkos stays exported: the plugin runs on it.
  if(PKG_KOKKOS)
    target_link_options(lammps PRIVATE "-Wl,--exclude-libs,libbatmobile_lammps_styles.a:libbatmobile_model.a")
  else()
    target_link_options(lammps PRIVATE "-Wl,--exclude-libs,ALL")
  endif()
  _batmobile_library_into_lammps("${sources}" "${style_dir}" ${lammps_version} "${extra_libs}")
endfunction()

# The compile lines of LAMMPS's own sources stay those of a stock build (so ccache shares their objects with the
# --plugin-only build). Our sources are a static library with LAMMPS's flags plus their own
# (Kokkos, model), whose private dependencies reach liblammps's link line only; of LAMMPS's sources only the two
# that include style_pair.h see our include directories.
function(_batmobile_library_into_lammps sources style_dir lammps_version extra_libs)
  get_filename_component(batmobile_src "${_BATMOBILE_HOOK_DIR}/../src" ABSOLUTE)
  add_library(batmobile_lammps_styles STATIC ${sources})
  set_target_properties(batmobile_lammps_styles PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_include_directories(batmobile_lammps_styles PRIVATE "${style_dir}" "${batmobile_src}"
                             "$<TARGET_PROPERTY:lammps,INCLUDE_DIRECTORIES>")
  target_compile_definitions(batmobile_lammps_styles PRIVATE BATMOBILE_LAMMPS_VERSION=${lammps_version}
                             "$<TARGET_PROPERTY:lammps,COMPILE_DEFINITIONS>")
  target_link_libraries(batmobile_lammps_styles PRIVATE ${extra_libs})
  if(PKG_KOKKOS)
    # LAMMPS's Kokkos archives once more after the model's on liblammps's link line (as files: CMake would drop a
    # second mention of the targets), so that they also supply the Kokkos functions that only our code calls (the
    # model links Kokkos's flags and headers alone: _batmobile_lammps_kokkos_usage)
    target_link_libraries(batmobile_lammps_styles PRIVATE "$<TARGET_FILE:kokkoscontainers>" "$<TARGET_FILE:kokkoscore>")
  endif()
  if(TARGET MPI::MPI_CXX)
    target_link_libraries(batmobile_lammps_styles PRIVATE MPI::MPI_CXX)
  endif()
  target_link_libraries(lammps PRIVATE batmobile_lammps_styles)
  get_target_property(lammps_sources lammps SOURCES)
  list(FILTER lammps_sources INCLUDE REGEX "/(force|lammps)\\.cpp$")
  set_source_files_properties(${lammps_sources} TARGET_DIRECTORY lammps PROPERTIES
                              INCLUDE_DIRECTORIES "${style_dir};${batmobile_src}")
endfunction()

# BATMOBILE_KOKKOS_TARGET for a LAMMPS with KOKKOS: the compile flags and headers of LAMMPS's in-tree Kokkos without
# its static archives. The model and the plugin then call the Kokkos in liblammps, the one that LAMMPS initialises
# with `-k on`: with a copy of their own linked in, a plugin would run on a second, uninitialised Kokkos runtime.
function(_batmobile_lammps_kokkos_usage)
  add_library(batmobile_lammps_kokkos INTERFACE)
  foreach(lib kokkoscore kokkoscontainers kokkosalgorithms kokkossimd)
    if(TARGET ${lib})
      foreach(prop INCLUDE_DIRECTORIES COMPILE_DEFINITIONS COMPILE_OPTIONS COMPILE_FEATURES LINK_OPTIONS)
        set_property(TARGET batmobile_lammps_kokkos APPEND PROPERTY INTERFACE_${prop}
                     "$<TARGET_PROPERTY:${lib},INTERFACE_${prop}>")
      endforeach()
    endif()
  endforeach()
  set(BATMOBILE_KOKKOS_TARGET batmobile_lammps_kokkos CACHE INTERNAL "")
endfunction()

function(batmobile_hook_into_lammps)
  cmake_parse_arguments(ARG "" "LAMMPS_TREE;STYLE_DIR;BUILTIN" "" ${ARGN})
  if(NOT DEFINED ARG_BUILTIN)
    set(ARG_BUILTIN ON)
  endif()
  set(lammps_src "${ARG_LAMMPS_TREE}/src")
  get_target_property(lammps_bin lammps BINARY_DIR)
  set(style_headers_dir "${lammps_bin}/styles")
  get_filename_component(batmobile_src "${_BATMOBILE_HOOK_DIR}/../src" ABSOLUTE)

  # LAMMPS with KOKKOS: the model runs on LAMMPS's Kokkos (the shim lets src/model call find_package(Kokkos)
  # although Kokkos is built inside this project). Without KOKKOS: an installed host Kokkos (Kokkos_ROOT), or one
  # built here from BATMOBILE_KOKKOS_SOURCE (a CUDA Kokkos).
  include("${_BATMOBILE_HOOK_DIR}/BatmobileDeps.cmake")
  if(PKG_KOKKOS)
    batmobile_kokkos_config_shim()
    _batmobile_lammps_kokkos_usage()
  else()
    batmobile_find_kokkos()
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
  # lammps_compat.h selects the API of this LAMMPS version; the plugin checks it against the LAMMPS it is loaded into
  _batmobile_lammps_version("${lammps_src}" lammps_version)
  message(STATUS "Batmobile: LAMMPS version ${lammps_version}")

  set(style_headers)
  foreach(header IN LISTS headers)
    file(STRINGS "${header}" kinds REGEX "^#ifdef (PAIR|FIX|COMPUTE|COMMAND)_CLASS")
    foreach(k IN LISTS kinds)
      string(REGEX REPLACE "^#ifdef ([A-Z]+)_CLASS.*" "\\1" kind "${k}")
      if(ARG_BUILTIN)
        AddStyleHeader("${header}" ${kind})
      endif()
      list(APPEND style_headers "${header}")
    endforeach()
  endforeach()
  list(REMOVE_DUPLICATES style_headers)
  set(extra_libs)
  foreach(t batmobile_model batmobile_kernels)
    if(TARGET ${t})
      list(APPEND extra_libs ${t})
    endif()
  endforeach()
  message(STATUS "Batmobile: style headers: ${style_headers}")
  if(ARG_BUILTIN)
    _batmobile_compile_into_lammps("${sources}" "${ARG_STYLE_DIR}" "${style_headers_dir}" ${lammps_version}
                                   "${extra_libs}")
  else()
    message(STATUS "Batmobile: styles not compiled into LAMMPS (plugin only)")
  endif()


  # The same styles as a plugin; needs a shared liblammps with PKG_PLUGIN (LMP_PLUGIN) to be loadable.
  # batmobileplugin.so (what `plugin load` opens) checks the LAMMPS version, then opens batmobile_styles.so.
  if(PKG_PLUGIN AND BUILD_SHARED_LIBS)
    set(plugin_src "${CMAKE_BINARY_DIR}/batmobile_plugin.cpp")
    _batmobile_write_plugin_source("${plugin_src}" ${style_headers})
    add_library(batmobile_styles MODULE "${plugin_src}" ${sources})
    add_library(batmobileplugin MODULE "${batmobile_src}/plugin/plugin_loader.cpp")
    foreach(t batmobile_styles batmobileplugin)
      set_target_properties(${t} PROPERTIES PREFIX "" LIBRARY_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}")
      target_include_directories(${t} PRIVATE "${lammps_src}")
      target_compile_definitions(${t} PRIVATE BATMOBILE_LAMMPS_VERSION=${lammps_version})
    endforeach()
    target_link_libraries(batmobileplugin PRIVATE ${CMAKE_DL_LIBS})
    add_dependencies(batmobileplugin batmobile_styles)
    target_include_directories(batmobile_styles PRIVATE "${ARG_STYLE_DIR}" "${batmobile_src}")
    if(PKG_KOKKOS)
      target_include_directories(batmobile_styles PRIVATE "${lammps_src}/KOKKOS")
    endif()
    # lammps brings LAMMPS's public defines (integer sizes, LMP_KOKKOS) and MPI. The plugin holds its own copy
    # of the model (and, without KOKKOS, of Kokkos), as liblammps does not export those (--exclude-libs above);
    # -Bsymbolic binds that copy, so a plugin loaded into an lmp that has the styles built in runs its own.
    target_link_libraries(batmobile_styles PRIVATE ${extra_libs} lammps)
    if(PKG_KOKKOS)
      # With KOKKOS the plugin runs on LAMMPS's Kokkos (_batmobile_lammps_kokkos_usage): liblammps comes first on the
      # link line, so the Kokkos archives after it add only the functions LAMMPS itself does not use, and no
      # -Bsymbolic, so that every Kokkos symbol that liblammps exports (its runtime state among them) is the one
      # in liblammps.
      target_link_libraries(batmobile_styles PRIVATE kokkos)
    else()
      target_link_options(batmobile_styles PRIVATE "-Wl,-Bsymbolic")
    endif()
  else()
    message(STATUS "Batmobile: plugin not built (needs -DPKG_PLUGIN=ON -DBUILD_SHARED_LIBS=ON)")
  endif()
endfunction()

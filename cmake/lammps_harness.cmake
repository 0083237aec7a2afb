# LAMMPS's own force-style test program (unittest/force-styles/test_pair_style of the LAMMPS tree), built against
# the liblammps of this build, with Debian's GoogleTest/GoogleMock and libyaml instead of the copies LAMMPS's
# ENABLE_TESTING downloads. Only test_pair_style: the YAML files of pair_style batmobile are written by
# tests/lammps/harness/make_harness_yaml.py and run through CTest (tests/lammps/harness).
function(batmobile_force_style_harness lammps_tree)
  set(dir "${lammps_tree}/unittest/force-styles")
  if(NOT EXISTS "${dir}/test_pair_style.cpp")
    message(FATAL_ERROR "no unittest/force-styles in ${lammps_tree}")
  endif()
  # Optional: a machine without GoogleTest, GoogleMock or libyaml (the GPU machine) builds LAMMPS without it.
  find_package(GTest QUIET)
  find_path(BATMOBILE_YAML_INCLUDE yaml.h)
  find_library(BATMOBILE_YAML_LIBRARY yaml)
  if(NOT TARGET GTest::gmock OR NOT BATMOBILE_YAML_INCLUDE OR NOT BATMOBILE_YAML_LIBRARY)
    message(STATUS "Batmobile: LAMMPS's test_pair_style not built (needs GoogleTest, GoogleMock and libyaml; Debian: "
                   "libgtest-dev libgmock-dev libyaml-dev)")
    return()
  endif()
  add_library(batmobile_style_tests STATIC "${dir}/yaml_writer.cpp" "${dir}/error_stats.cpp"
              "${dir}/test_config_reader.cpp" "${dir}/test_main.cpp")
  # the folder of LAMMPS's own test inputs; ours are passed with -d
  target_compile_definitions(batmobile_style_tests PRIVATE TEST_INPUT_FOLDER=${dir}/tests)
  target_include_directories(batmobile_style_tests PUBLIC "${dir}" "${lammps_tree}/src" "${BATMOBILE_YAML_INCLUDE}")
  target_link_libraries(batmobile_style_tests PUBLIC GTest::gmock GTest::gtest "${BATMOBILE_YAML_LIBRARY}" lammps)
  add_executable(test_pair_style "${dir}/test_pair_style.cpp")
  target_link_libraries(test_pair_style PRIVATE batmobile_style_tests)
  set_target_properties(test_pair_style PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}")
endfunction()

# Re-runs python/tools/gen_cg.py into a temporary folder and fails if the header differs from the checked-in one
# (same text, coefficients equal to 1e-13: see compare_cg_header.py).
file(REMOVE_RECURSE ${TMP})
execute_process(COMMAND ${PY} ${SRC}/python/tools/gen_cg.py --check --out-dir ${TMP} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gen_cg.py failed (${rc})")
endif()
execute_process(COMMAND ${PY} ${SRC}/tests/kernels/compare_cg_header.py ${TMP}/cg_tables.hpp
                        ${SRC}/src/kernels/generated/cg_tables.hpp RESULT_VARIABLE diff)
if(NOT diff EQUAL 0)
  message(FATAL_ERROR "src/kernels/generated/cg_tables.hpp differs from gen_cg.py output")
endif()

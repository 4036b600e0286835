# cmake -P script: runs COMMAND ('|'-separated) with PAGEDATTN_MAX_ISA=scalar and requires the
# exit code ctest reports as "skipped" (77) and a message saying why.
string(REPLACE "|" ";" command "${COMMAND}")
set(ENV{PAGEDATTN_MAX_ISA} scalar)
execute_process(COMMAND ${command} RESULT_VARIABLE result OUTPUT_VARIABLE output)
if(NOT result EQUAL 77 OR NOT output MATCHES "skipped: .*PAGEDATTN_MAX_ISA")
  message(FATAL_ERROR "expected exit code 77 and a skip message, got ${result}: ${output}")
endif()

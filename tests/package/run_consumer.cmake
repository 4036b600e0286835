# Configures, builds and runs the consumer project in a fresh build directory (cmake -P script).
# Inputs: MODE (subdirectory|package), CONSUMER_SOURCE, CONSUMER_BUILD, GENERATOR, CXX_COMPILER,
# and PAGEDATTN_SOURCE (subdirectory) or PAGEDATTN_PREFIX (package).
file(REMOVE_RECURSE "${CONSUMER_BUILD}")
set(configure_args -S "${CONSUMER_SOURCE}" -B "${CONSUMER_BUILD}" -G "${GENERATOR}"
                   -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_BUILD_TYPE=Release
                   -DCONSUMER_MODE=${MODE})
if(MODE STREQUAL "subdirectory")
  list(APPEND configure_args -DPAGEDATTN_SOURCE=${PAGEDATTN_SOURCE})
else()
  list(APPEND configure_args -DCMAKE_PREFIX_PATH=${PAGEDATTN_PREFIX})
endif()
foreach(step configure build run)
  if(step STREQUAL "configure")
    set(command ${CMAKE_COMMAND} ${configure_args})
  elseif(step STREQUAL "build")
    set(command ${CMAKE_COMMAND} --build "${CONSUMER_BUILD}")
  else()
    set(command "${CONSUMER_BUILD}/pagedattn_consumer")
  endif()
  execute_process(COMMAND ${command} RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "consumer ${step} failed (${result}) in mode ${MODE}")
  endif()
endforeach()

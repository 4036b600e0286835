# pagedattn_add_isa_parts(<target> <source> <define> [ISAS isa...]): for code that calls the
# ISA-specific headers directly (tests, benchmarks; not installed). Builds <source> once per ISA
# (default: every ISA the compiler supports, amx_emulated included where avx2 is; others
# listed are left out) as an object library with
# that ISA's flags and <define>=<isa>, links each into <target>, and defines <define>_<ISA>=1 on
# <target> for each ISA built.
include_guard(GLOBAL)
include("${CMAKE_CURRENT_LIST_DIR}/pagedattnDispatch.cmake")

function(pagedattn_add_isa_parts target source define)
  cmake_parse_arguments(PARSE_ARGV 3 arg "" "" "ISAS")
  pagedattn_supported_isas(supported)
  if("avx2" IN_LIST supported)
    list(APPEND supported amx_emulated)  # the AMX kernels on the tile emulation
  endif()
  if(arg_ISAS)
    set(isas ${arg_ISAS})
  else()
    set(isas ${supported})
  endif()
  foreach(isa IN LISTS isas)
    if(NOT isa IN_LIST supported)
      continue()
    endif()
    pagedattn_isa_flags(${isa} flags)
    add_library(${target}_${isa} OBJECT ${source})
    target_compile_definitions(${target}_${isa} PRIVATE ${define}=${isa})
    target_compile_options(${target}_${isa} PRIVATE ${flags})
    target_link_libraries(${target}_${isa} PRIVATE pagedattn::pagedattn pagedattn_project_warnings)
    target_link_libraries(${target} PRIVATE ${target}_${isa})
    string(TOUPPER ${isa} upper)
    target_compile_definitions(${target} PRIVATE ${define}_${upper}=1)
  endforeach()
endfunction()

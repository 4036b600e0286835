# cmake -P script: fails when two runtime-dispatch objects (compiled with different ISA flags)
# define the same symbol, because the linker would then keep one copy for every ISA and could run
# AVX-512 code on an AVX2 CPU. Inputs: NM (the nm tool), OBJECTS ('|'-separated object files
# named dispatch_<isa>.cpp.o). Allowed: sharing among the avx512, avx512bf16 and amx objects only
# (their flags add nothing but bf16 dot products and AMX tile instructions, which compilers never
# emit on their own for pagedattn's code, which has no __bf16 arithmetic; xsimd's avx512bw helpers
# are instantiated by all three), and compiler helpers with no ISA-specific code.
string(REPLACE "|" ";" objects "${OBJECTS}")
set(all_symbols "")
foreach(object IN LISTS objects)
  execute_process(COMMAND "${NM}" --defined-only "${object}" OUTPUT_VARIABLE listing
                  RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "nm failed on ${object}")
  endif()
  string(REGEX MATCHALL "[0-9a-f]* [WwVvuTtDdBbRr] [^\n]+" lines "${listing}")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^[0-9a-f]* [A-Za-z] " "" symbol "${line}")
    # Local symbols (lower-case types except weak ones) cannot collide; the personality reference
    # is the same in every object by design.
    if(line MATCHES " [tdbr] " OR symbol MATCHES "^DW\\.ref\\.__gxx_personality_v0$"
       OR symbol STREQUAL "__clang_call_terminate" OR symbol MATCHES "^\\.")
      continue()
    endif()
    list(APPEND all_symbols "${symbol}")
    string(REGEX MATCH "dispatch_([a-z0-9]+)\\.cpp" isa_match "${object}")
    list(APPEND owners_${symbol} "${CMAKE_MATCH_1}")
  endforeach()
endforeach()
list(REMOVE_DUPLICATES all_symbols)
set(shared "")
foreach(symbol IN LISTS all_symbols)
  set(owners ${owners_${symbol}})
  list(REMOVE_ITEM owners avx512 avx512bf16 amx)
  list(LENGTH owners_${symbol} count)
  list(LENGTH owners others)
  if(count GREATER 1 AND others GREATER 0)
    string(APPEND shared "  ${symbol} (${owners_${symbol}})\n")
  endif()
endforeach()
list(LENGTH objects object_count)
list(LENGTH all_symbols symbol_count)
if(object_count LESS 2 OR symbol_count EQUAL 0)
  message(FATAL_ERROR "expected several dispatch objects with symbols, got ${object_count} objects")
endif()
if(shared)
  message(FATAL_ERROR "symbols defined in more than one ISA's translation unit:\n${shared}")
endif()
message(STATUS "${object_count} ISA objects, ${symbol_count} symbols, none shared")

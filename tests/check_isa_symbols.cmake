# cmake -P script: fails when two runtime-dispatch objects (compiled with different ISA flags)
# define the same symbol, because the linker would then keep one copy for every ISA and could run
# AVX-512 code on an AVX2 CPU. Inputs: NM (the nm tool), OBJECTS ('|'-separated object files
# named dispatch_<isa>.cpp.o). Allowed: sharing between the avx2 and amx_emulated objects (the same
# flags: the emulation's vector code is the avx2 back-end's), among the avx512, avx512bf16 and amx
# objects (their flags add nothing but bf16 dot products and AMX tile instructions, which compilers
# never emit on their own for pagedattn's code, which has no __bf16 arithmetic; xsimd's avx512bw
# helpers are instantiated by all three), and compiler helpers with no ISA-specific code.
string(REPLACE "|" ";" objects "${OBJECTS}")
set(all_symbols "")
foreach(object IN LISTS objects)
  execute_process(COMMAND "${NM}" --defined-only "${object}" OUTPUT_VARIABLE listing
                  RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "nm failed on ${object}")
  endif()
  # Code only (T, W): data symbols (V, u, D, B, R: constants, inline variables, guards) hold no
  # instructions, so one copy serves every ISA (AddressSanitizer builds emit constexpr constants).
  string(REGEX MATCHALL "[0-9a-f]* [WwTt] [^\n]+" lines "${listing}")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^[0-9a-f]* [A-Za-z] " "" symbol "${line}")
    # Local symbols (t) cannot collide; clang's terminate helper has no ISA-specific code.
    if(line MATCHES " t " OR symbol STREQUAL "__clang_call_terminate" OR symbol MATCHES "^\\.")
      continue()
    endif()
    list(APPEND all_symbols "${symbol}")
    string(REGEX MATCH "dispatch_([a-z0-9_]+)\\.cpp" isa_match "${object}")
    if(NOT isa_match)
      message(FATAL_ERROR "not a dispatch_<isa>.cpp object: ${object}")
    endif()
    list(APPEND owners_${symbol} "${CMAKE_MATCH_1}")
  endforeach()
endforeach()
list(REMOVE_DUPLICATES all_symbols)
set(shared "")
foreach(symbol IN LISTS all_symbols)
  # Each owner's group of objects that may share: amx_emulated with avx2, the AVX-512 tiers.
  set(groups ${owners_${symbol}})
  list(TRANSFORM groups REPLACE "^amx_emulated$" "avx2")
  list(TRANSFORM groups REPLACE "^(avx512bf16|amx)$" "avx512")
  list(REMOVE_DUPLICATES groups)
  list(LENGTH groups group_count)
  if(group_count GREATER 1)
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

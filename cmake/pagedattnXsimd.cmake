# Finds xsimd for pagedattn (used by the project and by the installed package config).
# Debian 12's libxsimd-dev 8.1 exports a target whose link interface names `xtl`, which Debian does
# not ship with it: when no xtl target exists, an empty global one stands in so linking works.
# Any xsimd version is accepted.
if(NOT TARGET xsimd)
  find_package(xsimd REQUIRED)
endif()
get_target_property(_pagedattn_xsimd_links xsimd INTERFACE_LINK_LIBRARIES)
if(_pagedattn_xsimd_links AND "xtl" IN_LIST _pagedattn_xsimd_links AND NOT TARGET xtl)
  find_package(xtl QUIET)
  if(NOT TARGET xtl)
    add_library(xtl INTERFACE IMPORTED GLOBAL)
  endif()
endif()
unset(_pagedattn_xsimd_links)

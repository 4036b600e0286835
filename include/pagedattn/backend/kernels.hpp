// Includes the back-ends the current translation unit's compiler flags allow (scalar always).
#pragma once

#include "pagedattn/backend/scalar/cache_writer.hpp"
#include "pagedattn/backend/scalar/fp8_converter.hpp"
#include "pagedattn/backend/scalar/row_softmax.hpp"
#include "pagedattn/backend/scalar/tile_gemm.hpp"
#include "pagedattn/isa/dispatch.hpp"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include "pagedattn/backend/avx2/cache_writer.hpp"
#include "pagedattn/backend/avx2/fp8_converter.hpp"
#include "pagedattn/backend/avx2/vector_kit.hpp"
#include "pagedattn/backend/vector/row_softmax.hpp"
#include "pagedattn/backend/vector/tile_gemm.hpp"
// The AMX products: amx_emulated needs only the avx2 set, amx adds its kit and tiles below.
#include "pagedattn/backend/amx/tile_gemm.hpp"
#endif
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
#include "pagedattn/backend/avx512/cache_writer.hpp"
#include "pagedattn/backend/avx512/fp8_converter.hpp"
#include "pagedattn/backend/avx512/vector_kit.hpp"
#endif

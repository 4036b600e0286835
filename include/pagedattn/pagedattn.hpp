// Umbrella header: the whole public API of pagedattn.
#pragma once

#include "pagedattn/config.hpp"
#include "pagedattn/core/dtype.hpp"
#include "pagedattn/core/error.hpp"
#include "pagedattn/core/minifloat.hpp"
#include "pagedattn/exec/executors.hpp"
#include "pagedattn/fp8/scaled_convert.hpp"
#include "pagedattn/isa/cpu_features.hpp"
#include "pagedattn/isa/dispatch.hpp"
#include "pagedattn/isa/tags.hpp"
#include "pagedattn/version.hpp"

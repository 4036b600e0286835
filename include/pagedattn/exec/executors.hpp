// Umbrella header for the executors: the Executor concept, SerialExecutor, ThreadPool and (when
// compiled with OpenMP) OpenMpExecutor.
#pragma once

#include "pagedattn/exec/executor.hpp"
#include "pagedattn/exec/openmp_executor.hpp"
#include "pagedattn/exec/serial_executor.hpp"
#include "pagedattn/exec/thread_pool.hpp"

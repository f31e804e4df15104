// trainkit/trainkit.hpp — the umbrella header: everything a CPU trainer needs.
//
//   #include <trainkit/trainkit.hpp>
//   using cpu_trainer = trainkit::trainer<trainkit::data::mmap_token_source,
//                                         trainkit::prefetch::threaded<4>,
//                                         trainkit::model::gpt2_cpu,
//                                         trainkit::optim::adamw_cpu,
//                                         trainkit::checkpoint::sync_checkpointer>;
//
// Depends only on the standard library, Eigen and Boost. The tokenizer (trainkit/tokenizer/,
// which needs utf8proc), the report tool's metrics reader and SVG chart (trainkit/report/; the
// reader needs nlohmann_json) and the CUDA policies are included separately.
#pragma once

#include "trainkit/version.hpp"

#include "trainkit/core/batch.hpp"
#include "trainkit/core/bf16.hpp"
#include "trainkit/core/calibrate_cpu.hpp"
#include "trainkit/core/crc32c.hpp"
#include "trainkit/core/device_info.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/execution_context.hpp"
#include "trainkit/core/gemm_calibration.hpp"
#include "trainkit/core/memory_space.hpp"
#include "trainkit/core/step_protocol.hpp"
#include "trainkit/core/tensor.hpp"
#include "trainkit/core/timing.hpp"

#include "trainkit/data/concepts.hpp"
#include "trainkit/data/mmap_token_source.hpp"
#include "trainkit/data/shard_format.hpp"
#include "trainkit/data/synthetic_source.hpp"

#include "trainkit/prefetch/concepts.hpp"
#include "trainkit/prefetch/inline_prefetcher.hpp"
#include "trainkit/prefetch/threaded_prefetcher.hpp"

#include "trainkit/model/concepts.hpp"
#include "trainkit/model/gpt2/config.hpp"
#include "trainkit/model/gpt2/cpu.hpp"
#include "trainkit/model/gpt2/llmc_file.hpp"

#include "trainkit/optim/adamw_cpu.hpp"
#include "trainkit/optim/clip_scale.hpp"
#include "trainkit/optim/concepts.hpp"
#include "trainkit/optim/grad_clip.hpp"
#include "trainkit/optim/schedule.hpp"

#include "trainkit/reduce/concepts.hpp"
#include "trainkit/reduce/single.hpp"

#include "trainkit/checkpoint/asio_checkpointer.hpp"
#include "trainkit/checkpoint/concepts.hpp"
#include "trainkit/checkpoint/no_checkpoint.hpp"
#include "trainkit/checkpoint/sync_checkpointer.hpp"

#include "trainkit/trainer/calibrate.hpp"
#include "trainkit/trainer/metrics.hpp"
#include "trainkit/trainer/nvtx.hpp"
#include "trainkit/trainer/phase_clock.hpp"
#include "trainkit/trainer/report.hpp"
#include "trainkit/trainer/run_output.hpp"
#include "trainkit/trainer/sinks/concepts.hpp"
#include "trainkit/trainer/sinks/console.hpp"
#include "trainkit/trainer/sinks/deferred.hpp"
#include "trainkit/trainer/sinks/jsonl.hpp"
#include "trainkit/trainer/sinks/tensorboard.hpp"
#include "trainkit/trainer/stop_flag.hpp"
#include "trainkit/trainer/tensorboard.hpp"
#include "trainkit/trainer/trainer.hpp"

// tests/cuda/link/link_unit.hpp — what each CUDA translation unit of test_cuda_link exports: one
// function per unit that instantiates the whole CUDA GPT-2 and AdamW (every kernel and launcher),
// so that both units define the same kernels and the link proves the headers can be included from
// more than one .cu file.
#pragma once

namespace link_test {

/// One d2 training step with gpt2_cuda + adamw_cuda on device 0 when a device is present;
/// returns the loss, or -1 without a device. Defined in unit_a.cu.
float train_step_a();
/// The same step through the other unit's copy of the headers. Defined in unit_b.cu.
float train_step_b();
/// The launchers of the Llama kernels (llama/cuda_kernels.cuh) instantiated in each unit; the link
/// is the test. Defined in unit_a.cu and unit_b.cu.
const void* llama_kernels_a();
const void* llama_kernels_b();
/// One forward_backward of a Llama d2 (llama_cuda, flash attention with GQA) on device 0; the
/// loss, or -1 without a device. Defined in unit_a.cu and unit_b.cu.
float llama_step_a();
float llama_step_b();

}  // namespace link_test

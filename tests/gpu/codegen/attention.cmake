# GPU test of the flash-attention kernels (octet-attention-to-gpu) against
# the interpreter's attention, and the attention bench (bench/attention_bench.*).
# Kernels are generated here at build time; the test binary links the
# interpreter's MLIR-free kernels and the CUDA driver only, statically
# otherwise, so a build folder can be carried to a GPU host.
# Extra arguments go to octet-opt before the codegen pipeline (an earlier
# octet-attention-to-gpu run with other options: the pipeline's own run
# leaves the ops it lowered alone).
function(octet_attention_kernels name source)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/${name})
  add_custom_command(OUTPUT ${dir}/kernels.json
    COMMAND $<TARGET_FILE:octet-opt> ${source} ${ARGN}
            --octet-codegen -o ${CMAKE_CURRENT_BINARY_DIR}/${name}.ptx.mlir
    COMMAND $<TARGET_FILE:octet-opt> ${CMAKE_CURRENT_BINARY_DIR}/${name}.ptx.mlir
            --octet-emit-ptx=dir=${dir} -o /dev/null
    DEPENDS octet-opt ${source}
    COMMENT "octet-codegen ${source}")
  add_custom_target(octet-${name} DEPENDS ${dir}/kernels.json)
endfunction()

# The mma.sync kernels: the codegen pipeline's default is the Hopper
# forward and backward wherever they apply (an earlier run of the pass with
# both off keeps them out).
octet_attention_kernels(attention-kernels
  ${CMAKE_CURRENT_SOURCE_DIR}/attention-small.mlir
  --octet-attention-to-gpu=hopper-forward=0)
octet_attention_kernels(attention-bench-kernels
  ${PROJECT_SOURCE_DIR}/bench/attention_bench.mlir
  --octet-attention-to-gpu=hopper-forward=0)
# The same ops with the Hopper forward (wgmma, TMA, warp specialisation)
# and the mma.sync backward.
octet_attention_kernels(attention-hopper-kernels
  ${CMAKE_CURRENT_SOURCE_DIR}/attention-small.mlir
  --octet-attention-to-gpu=hopper-forward=1)
octet_attention_kernels(attention-bench-hopper-kernels
  ${PROJECT_SOURCE_DIR}/bench/attention_bench.mlir
  --octet-attention-to-gpu=hopper-forward=1)
# Both Hopper kernels, the codegen pipeline's default: the backward's main
# kernel too (hopper-backward).
octet_attention_kernels(attention-hopper-bwd-kernels
  ${CMAKE_CURRENT_SOURCE_DIR}/attention-small.mlir
  "--octet-attention-to-gpu=hopper-forward=1 hopper-backward=1")
octet_attention_kernels(attention-bench-hopper-bwd-kernels
  ${PROJECT_SOURCE_DIR}/bench/attention_bench.mlir
  "--octet-attention-to-gpu=hopper-forward=1 hopper-backward=1")

# The interpreter's answers for one case (causal, GQA 4:1, documents, head
# dim 64), computed here: the GPU host has no MLIR.
add_executable(octet-attention-golden AttentionGolden.cpp)
target_link_libraries(octet-attention-golden PRIVATE OctetInterpreter)
mlir_target_link_libraries(octet-attention-golden PRIVATE MLIRParser
  MLIRFuncDialect)
set(attention_golden ${CMAKE_CURRENT_BINARY_DIR}/attention-golden)
add_custom_command(OUTPUT ${attention_golden}/golden.json
  COMMAND $<TARGET_FILE:octet-attention-golden>
          ${CMAKE_CURRENT_SOURCE_DIR}/attention-small.mlir case2
          --out ${attention_golden} --seed 2024
  DEPENDS octet-attention-golden ${CMAKE_CURRENT_SOURCE_DIR}/attention-small.mlir
  COMMENT "octet-attention-golden attention-small.mlir case2")
add_custom_target(octet-attention-golden-data
  DEPENDS ${attention_golden}/golden.json)

add_executable(octet-gpu-attention-tests AttentionKernelTest.cpp)
add_dependencies(octet-gpu-attention-tests octet-attention-kernels
  octet-attention-bench-kernels octet-attention-hopper-kernels
  octet-attention-bench-hopper-kernels octet-attention-hopper-bwd-kernels
  octet-attention-bench-hopper-bwd-kernels octet-attention-golden-data)
target_link_libraries(octet-gpu-attention-tests PRIVATE OctetInterpreterKernels
  CUDA::cuda_driver nlohmann_json::nlohmann_json -static-libstdc++
  -static-libgcc)
add_test(NAME gpu.attention COMMAND sh -c
  "if nvidia-smi -L >/dev/null 2>&1; then exec \"$0\" \"$1\" --golden \"$2\"; else echo 'SKIPPED: no NVIDIA GPU (nvidia-smi lists none)'; fi"
  $<TARGET_FILE:octet-gpu-attention-tests>
  ${CMAKE_CURRENT_BINARY_DIR}/attention-kernels ${attention_golden})
set_tests_properties(gpu.attention PROPERTIES LABELS gpu)
add_test(NAME gpu.attention-hopper COMMAND sh -c
  "if nvidia-smi -L >/dev/null 2>&1; then exec \"$0\" \"$1\" --golden \"$2\"; else echo 'SKIPPED: no NVIDIA GPU (nvidia-smi lists none)'; fi"
  $<TARGET_FILE:octet-gpu-attention-tests>
  ${CMAKE_CURRENT_BINARY_DIR}/attention-hopper-kernels ${attention_golden})
set_tests_properties(gpu.attention-hopper PROPERTIES LABELS gpu)
add_test(NAME gpu.attention-hopper-backward COMMAND sh -c
  "if nvidia-smi -L >/dev/null 2>&1; then exec \"$0\" \"$1\" --golden \"$2\"; else echo 'SKIPPED: no NVIDIA GPU (nvidia-smi lists none)'; fi"
  $<TARGET_FILE:octet-gpu-attention-tests>
  ${CMAKE_CURRENT_BINARY_DIR}/attention-hopper-bwd-kernels ${attention_golden})
set_tests_properties(gpu.attention-hopper-backward PROPERTIES LABELS gpu)

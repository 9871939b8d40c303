# The training benchmark's cases, one "MODEL SEQ MICRO_BATCH" each, shared by
# bench/run_bench.sh and bench/data_parallel_peer.sh: llama3.2-1b at sequence
# 4096 (micro-batch 2) and an 8-layer llama3-8b-shaped model with its full
# 128256 vocabulary at sequence 8192 (micro-batch 1).
bench_cases=(
  "llama3.2-1b 4096 2"
  "llama3-8b-8l 8192 1"
)

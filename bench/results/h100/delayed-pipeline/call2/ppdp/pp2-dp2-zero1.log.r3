device 3 (NVIDIA H100 80GB HBM3, sm_90): plan arenas 68.0 MiB, runtime fixed costs 532.9 MiB (CUDA context, cuBLASLt handle and workspace, modules)

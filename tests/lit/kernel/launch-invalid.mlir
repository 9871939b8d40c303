// RUN: %octet-opt %s -split-input-file -verify-diagnostics

// #kernel.launch and the launch contract of kernel.fused (the same on the
// attention ops): each field in range, kernels that match the launches, a
// workspace of whole floats, zeroed results that exist.

func.func @grid_zero(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %y = kernel.fused "k" kind("row") ins(%x : tensor<4x64xf32>) {
  ^bb0(%a: tensor<4x64xf32>):
    %s = graph.silu %a : tensor<4x64xf32>
    kernel.yield %s : tensor<4x64xf32>
  // expected-error @+1 {{launch grid must be 1 to 2147483647 blocks, got 0}}
  } {launch = [#kernel.launch<@k::@k, grid = 0, block = 32>]} : tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

func.func @block_too_large(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %y = kernel.fused "k" kind("row") ins(%x : tensor<4x64xf32>) {
  ^bb0(%a: tensor<4x64xf32>):
    %s = graph.silu %a : tensor<4x64xf32>
    kernel.yield %s : tensor<4x64xf32>
  // expected-error @+1 {{launch block must be 1 to 1024 threads, got 2048}}
  } {launch = [#kernel.launch<@k::@k, grid = 4, block = 2048>]} : tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

func.func @shared_too_large(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %y = kernel.fused "k" kind("row") ins(%x : tensor<4x64xf32>) {
  ^bb0(%a: tensor<4x64xf32>):
    %s = graph.silu %a : tensor<4x64xf32>
    kernel.yield %s : tensor<4x64xf32>
  // expected-error @+1 {{launch shared_bytes must be 0 to 232448 (227 KiB, sm_90), got 300000}}
  } {launch = [#kernel.launch<@k::@k, grid = 4, block = 32, shared_bytes = 300000>]} : tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

func.func @cluster_not_dividing(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %y = kernel.fused "k" kind("row") ins(%x : tensor<4x64xf32>) {
  ^bb0(%a: tensor<4x64xf32>):
    %s = graph.silu %a : tensor<4x64xf32>
    kernel.yield %s : tensor<4x64xf32>
  // expected-error @+1 {{launch cluster of 3 blocks does not divide the grid of 4}}
  } {launch = [#kernel.launch<@k::@k, grid = 4, block = 32, cluster = 3>]} : tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

func.func @cluster_too_large(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %y = kernel.fused "k" kind("row") ins(%x : tensor<4x64xf32>) {
  ^bb0(%a: tensor<4x64xf32>):
    %s = graph.silu %a : tensor<4x64xf32>
    kernel.yield %s : tensor<4x64xf32>
  // expected-error @+1 {{launch cluster must be 1 to 8 blocks, got 16}}
  } {launch = [#kernel.launch<@k::@k, grid = 32, block = 32, cluster = 16>]} : tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

func.func @unknown_field(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %y = kernel.fused "k" kind("row") ins(%x : tensor<4x64xf32>) {
  ^bb0(%a: tensor<4x64xf32>):
    %s = graph.silu %a : tensor<4x64xf32>
    kernel.yield %s : tensor<4x64xf32>
  // expected-error @+1 {{unknown launch field 'stream' (shared_bytes, cluster or programmatic)}}
  } {launch = [#kernel.launch<@k::@k, grid = 4, block = 32, stream = 2>]} : tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

func.func @flat_kernel(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %y = kernel.fused "k" kind("row") ins(%x : tensor<4x64xf32>) {
  ^bb0(%a: tensor<4x64xf32>):
    %s = graph.silu %a : tensor<4x64xf32>
    kernel.yield %s : tensor<4x64xf32>
  // expected-error @+1 {{launch kernel must be @module::@function, got @k}}
  } {launch = [#kernel.launch<@k, grid = 4, block = 32>]} : tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

func.func @kernels_differ(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  // expected-error @+1 {{'kernel.fused' op kernels [@k::@other] must be the launches' kernels in launch order}}
  %y = kernel.fused "k" kind("row") ins(%x : tensor<4x64xf32>) {
  ^bb0(%a: tensor<4x64xf32>):
    %s = graph.silu %a : tensor<4x64xf32>
    kernel.yield %s : tensor<4x64xf32>
  } {kernels = [@k::@other], launch = [#kernel.launch<@k::@k, grid = 4, block = 32>]} : tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

func.func @workspace_bytes(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  // expected-error @+1 {{'kernel.fused' op workspace_bytes 6 is not a whole number of f32}}
  %y = kernel.fused "k" kind("row") ins(%x : tensor<4x64xf32>) {
  ^bb0(%a: tensor<4x64xf32>):
    %s = graph.silu %a : tensor<4x64xf32>
    kernel.yield %s : tensor<4x64xf32>
  } {launch = [#kernel.launch<@k::@k, grid = 4, block = 32>], workspace_bytes = 6 : i64} : tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

func.func @zero_results(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  // expected-error @+1 {{'kernel.fused' op zero_results names result #1 of 1}}
  %y = kernel.fused "k" kind("row") ins(%x : tensor<4x64xf32>) {
  ^bb0(%a: tensor<4x64xf32>):
    %s = graph.silu %a : tensor<4x64xf32>
    kernel.yield %s : tensor<4x64xf32>
  } {launch = [#kernel.launch<@k::@k, grid = 4, block = 32>], zero_results = array<i64: 1>} : tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

func.func @empty(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  // expected-error @+1 {{'kernel.fused' op has an empty launch list}}
  %y = kernel.fused "k" kind("row") ins(%x : tensor<4x64xf32>) {
  ^bb0(%a: tensor<4x64xf32>):
    %s = graph.silu %a : tensor<4x64xf32>
    kernel.yield %s : tensor<4x64xf32>
  } {launch = [], workspace_bytes = 0 : i64} : tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

func.func @no_launch(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  // expected-error @+1 {{'kernel.fused' op has kernels, workspace_bytes, zero_results or arg_table but no launch}}
  %y = kernel.fused "k" kind("row") ins(%x : tensor<4x64xf32>) {
  ^bb0(%a: tensor<4x64xf32>):
    %s = graph.silu %a : tensor<4x64xf32>
    kernel.yield %s : tensor<4x64xf32>
  } {workspace_bytes = 0 : i64} : tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

func.func @table_no_launch(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  // expected-error @+1 {{'kernel.fused' op has kernels, workspace_bytes, zero_results or arg_table but no launch}}
  %y = kernel.fused "k" kind("multi_tensor") ins(%x : tensor<4x64xf32>) {
  ^bb0(%a: tensor<4x64xf32>):
    %s = graph.silu %a : tensor<4x64xf32>
    kernel.yield %s : tensor<4x64xf32>
  } {arg_table} : tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

func.func @dictionary(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %y = kernel.fused "k" kind("row") ins(%x : tensor<4x64xf32>) {
  ^bb0(%a: tensor<4x64xf32>):
    %s = graph.silu %a : tensor<4x64xf32>
    kernel.yield %s : tensor<4x64xf32>
  // A launch is a #kernel.launch, not a dictionary.
  // expected-error @+1 {{'kernel.fused' op attribute 'launch' failed to satisfy constraint: kernel launches, in order}}
  } {launch = [{grid = 4 : i64, block = 32 : i64}]} : tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

func.func @zero_results_order(%x: tensor<4x64xf32>) -> (tensor<4x64xf32>, tensor<f32>) {
  // expected-error @+1 {{'kernel.fused' op zero_results must be ascending and distinct}}
  %y, %m = kernel.fused "k" kind("row") ins(%x : tensor<4x64xf32>) {
  ^bb0(%a: tensor<4x64xf32>):
    %s = graph.silu %a : tensor<4x64xf32>
    %amax = fp8.amax %s : (tensor<4x64xf32>) -> tensor<f32>
    kernel.yield %s, %amax : tensor<4x64xf32>, tensor<f32>
  } {launch = [#kernel.launch<@k::@k, grid = 4, block = 32>], zero_results = array<i64: 1, 1>} : tensor<4x64xf32>, tensor<f32>
  return %y, %m : tensor<4x64xf32>, tensor<f32>
}

// RUN: %octet-opt %s --split-input-file --verify-diagnostics --octet-split-stages="layer-split=1,1,1"

// A chunk receives only the previous chunk's values: the third layer reads
// the first's output, two chunks back.
module {
  func.func @train_microbatch(%x: tensor<4xf32>) -> tensor<4xf32> {
    %a = graph.add %x, %x {layer = 0 : i64, section = "forward"} : tensor<4xf32>
    %b = graph.add %a, %a {layer = 1 : i64, section = "forward"} : tensor<4xf32>
    // expected-error @+1 {{octet-split-stages: 'graph.add' of chunk 2 forward reads a value of 'graph.add' from chunk 0 forward; a chunk receives only the previous chunk's forward values and the next chunk's gradients}}
    %c = graph.add %b, %a {layer = 2 : i64, section = "forward"} : tensor<4xf32>
    return %c : tensor<4xf32>
  }
}

// -----

// The split must cover every layer the step has.
module {
  func.func @train_microbatch(%x: tensor<4xf32>) -> tensor<4xf32> {
    %a = graph.add %x, %x {layer = 0 : i64, section = "forward"} : tensor<4xf32>
    // expected-error @+1 {{octet-split-stages: 'graph.add' is of layer 3, but layer-split holds 3 layers; make it sum to the model's layers}}
    %b = graph.add %a, %a {layer = 3 : i64, section = "forward"} : tensor<4xf32>
    return %b : tensor<4xf32>
  }
}

// -----

// One variable written by two chunks (tied weights) would be written on two
// ranks.
module {
  graph.variable @grad.e : tensor<4xf32> {init = "zeros", kind = "state"}
  func.func @train_microbatch(%x: tensor<4xf32>) -> tensor<4xf32> {
    %a = graph.add %x, %x {layer = 0 : i64, section = "forward"} : tensor<4xf32>
    %b = graph.add %a, %a {layer = 1 : i64, section = "forward"} : tensor<4xf32>
    %c = graph.add %b, %b {layer = 2 : i64, section = "forward"} : tensor<4xf32>
    %gc = graph.add %c, %c {layer = 2 : i64, section = "backward"} : tensor<4xf32>
    graph.store %gc, @grad.e : tensor<4xf32>
    %gb = graph.add %gc, %b {layer = 1 : i64, section = "backward"} : tensor<4xf32>
    %ga = graph.add %gb, %a {layer = 0 : i64, section = "backward"} : tensor<4xf32>
    // expected-error @+1 {{octet-split-stages: @grad.e is written by chunk 2 backward and by chunk 0 backward, which run on different pipeline ranks}}
    graph.store %ga, @grad.e : tensor<4xf32>
    return %c : tensor<4xf32>
  }
}

// -----

// Ops of another section than forward and backward are not cut.
module {
  func.func @train_microbatch(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{octet-split-stages: 'graph.add' of section "optimizer" is neither forward nor backward}}
    %a = graph.add %x, %x {layer = 0 : i64, section = "optimizer"} : tensor<4xf32>
    return %a : tensor<4xf32>
  }
}

// -----

// A collective runs where its operands are made: one over loaded values
// alone has no chunk function to go to.
module {
  graph.variable @grad.e : tensor<4xf32> {init = "zeros", kind = "state"}
  func.func @train_microbatch(%x: tensor<4xf32>) -> tensor<4xf32> {
    %a = graph.add %x, %x {layer = 0 : i64, section = "forward"} : tensor<4xf32>
    %b = graph.add %a, %a {layer = 1 : i64, section = "forward"} : tensor<4xf32>
    %c = graph.add %b, %b {layer = 2 : i64, section = "forward"} : tensor<4xf32>
    %e = graph.load @grad.e : tensor<4xf32>
    // expected-error @+1 {{octet-split-stages: 'kernel.collective' reads operand 0, which no forward or backward op makes; a collective runs in the chunk function that makes its operands}}
    %r = kernel.collective %e {group = "data", group_size = 2 : i64, kind = "all_reduce", reduction = "sum"} : (tensor<4xf32>) -> tensor<4xf32>
    graph.store %r, @grad.e : tensor<4xf32>
    return %c : tensor<4xf32>
  }
}

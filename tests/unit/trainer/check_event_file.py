"""Reads the event file WriteEvents.cpp wrote with TensorBoard's
event_accumulator and checks every scalar. Exits 77 (ctest's skip code),
saying why, where TensorBoard is not installed."""
import sys

try:
    from tensorboard.backend.event_processing import event_accumulator
except ImportError as e:
    print(f"skipped: TensorBoard is not installed here ({e}); "
          "pip install tensorboard to run this check")
    sys.exit(77)

acc = event_accumulator.EventAccumulator(sys.argv[1])
acc.Reload()
tags = set(acc.Tags()["scalars"])
want = {"loss", "grad_norm", "lr", "tokens_per_s", "mfu"}
assert tags == want, f"scalar tags {sorted(tags)}, expected {sorted(want)}"
loss = acc.Scalars("loss")
assert [e.step for e in loss] == [1, 2, 3, 4, 5], loss
for e in loss:
    assert abs(e.value - 4.0 / e.step) < 1e-6, e
for e in acc.Scalars("grad_norm"):
    assert abs(e.value - 0.5 * e.step) < 1e-6, e
print(f"TensorBoard read {sum(len(acc.Scalars(t)) for t in tags)} scalars "
      f"of {len(tags)} tags")

"""Reads an optimizer step's IR (octet compile --dump-ir=parallelize) on
stdin and prints whether its weight casts come in the order of the
all-gathers whose results they read."""
import re
import sys

text = sys.stdin.read()
step = text[text.index("func.func @optimizer_step"):]
step = step[:step.find("func.func", 1)] if "func.func" in step[1:] else step
gathers = re.findall(r"%(\d+)(?::\d+)? = kernel\.collective [^\n]*comm_stream[^\n]*all_gather", step)
casts = re.findall(r'kernel\.fused "optimizer\.fp8_weights"[^\n]*? ins\(%(\d+)', step)
order = [gathers.index(c) for c in casts]
print(f"{len(casts)} casts of {len(set(casts))} gathers,",
      "in gather order" if order == sorted(order) else f"out of order {order}")

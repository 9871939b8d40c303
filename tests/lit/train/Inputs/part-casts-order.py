"""Reads an optimizer step's IR (octet compile --dump-ir=parallelize) on
stdin and prints whether each weight cast of a sharded f32 master follows
the AdamW kernel that updates its part, whether its FP8 part's all-gather
comes right after it, and whether the K-major transposes read those
gathers in the same order, after every AdamW kernel."""
import re
import sys

text = sys.stdin.read()
step = text[text.index("func.func @optimizer_step"):]
step = step[:step.find("func.func", 1)] if "func.func" in step[1:] else step
ops = re.findall(r"^\s*%(\d+)(?::\d+)? = (kernel\.\w+) ([^\n]*)$", step, re.M)
position = {name: i for i, (name, _, _) in enumerate(ops)}
adams = [i for i, (_, op, rest) in enumerate(ops) if '"optimizer.adamw"' in rest]
casts, gathers, transposes = [], [], []
problems = []
for i, (name, op, rest) in enumerate(ops):
    if '"optimizer.fp8_weights"' in rest:
        source = re.search(r"ins\(%(\d+)", rest).group(1)
        if source not in position or position[source] not in adams:
            problems.append(f"cast %{name} reads no AdamW result")
        nxt = ops[i + 1] if i + 1 < len(ops) else None
        # (delayed scaling's cast also yields its part's amax: #0 is the
        # FP8 part; current scaling's yields the FP8 part alone)
        if not nxt or "all_gather" not in nxt[2] or not (
                f"%{name}#0 " in nxt[2] or nxt[2].startswith(f"%{name} ")):
            problems.append(f"cast %{name} is not followed by its gather")
        else:
            gathers.append(nxt[0])
        casts.append(name)
    if '"optimizer.fp8_weight_kmajor"' in rest:
        transposes.append((i, re.search(r"ins\(%(\d+)", rest).group(1)))
if [g for _, g in transposes] != gathers:
    problems.append("the transposes do not read the gathers in order")
if transposes and adams and transposes[0][0] < adams[-1]:
    problems.append("a transpose comes before the last AdamW kernel")
print(f"{len(casts)} casts, {len(gathers)} gathers, {len(transposes)} "
      "transposes:", "; ".join(problems) if problems else "in order")

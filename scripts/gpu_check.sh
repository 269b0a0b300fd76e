#!/usr/bin/env bash
# The checks that need a machine with a CUDA GPU, in one command (docs/benchmarks.md, "On a GPU machine").
#
#   OUT=/tmp/gpu_check SEEDS="3 4 5" bash scripts/gpu_check.sh
#
# Sections, each under its own time limit so that one hang cannot eat the others' time:
#   1. versions and the GPU;
#   2. `pytest -m cuda` (tests/test_cuda.py, without the default options, which need pytest-xdist);
#      the rest is skipped when it fails;
#   3. `scripts/benchmark.py profile`: one iteration of the default job split by part, unsplit
#      ("before") against split ("after", each part a rollout of its own on a thread of its own),
#      with the physical limit replayed after each iteration; then the split's parts sampled by
#      one thread and taking turns on one physics pool (`rollout.parallel_parts=false`, "before")
#      against the default ("after"); then the parts trading the GIL (`rollout.take_turns=false`)
#      against taking turns at Python (the default);
#      3d: the policy and its update on the CPU (`device=cpu`, "before") against CUDA (the default);
#   4. the default job from scratch on each seed of SEEDS to 90% on the 200 held-out seeds
#      (`target_success=0.9 eval_every=10`), at most TRAIN_MIN minutes of training each;
#   5. the same with `device=cpu` on each seed of CPU_SEEDS (default: 3; empty: none);
# SECTIONS picks which of 2, 3, 3b, 3c, 3d, 4 and 5 run (default: all; section 1 always runs), so
# that a short device lease can spend its minutes where they are needed, e.g.
#   SECTIONS="2 3d 5" CPU_SEEDS="3 4 5" bash scripts/gpu_check.sh
# TRAIN_ARGS adds Hydra overrides to every run of sections 4 and 5.
# Logs and each run's summary.json land in $OUT; the last lines printed are the table of section 4.
# Where the machine lacks the project's dependencies, put their wheels (and the project's own
# wheel) in .whl/: they are installed into /tmp/site first.
set -u
OUT=${OUT:-/tmp/gpu_check}
SEEDS=${SEEDS:-3 4 5}
TRAIN_MIN=${TRAIN_MIN:-1.5}
CPU_SEEDS=${CPU_SEEDS-3}
SECTIONS=" ${SECTIONS:-2 3 3b 3c 3d 4 5} "
TRAIN_ARGS=${TRAIN_ARGS:-}
for s in $SECTIONS; do
    case $s in 2 | 3 | 3b | 3c | 3d | 4 | 5) ;; *) echo "SECTIONS: unknown section '$s' (allowed: 2 3 3b 3c 3d 4 5)" >&2; exit 2 ;; esac
done
on() { [[ $SECTIONS == *" $1 "* ]]; }  # on <section>: whether SECTIONS names it
PY=${PY:-python3}
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"

if compgen -G ".whl/*.whl" >/dev/null; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
    export PYTHONSAFEPATH=1  # the installed package, not ./grpo_robot (whose envs/ and conf/ live elsewhere)
fi

echo "== 1. machine"
nvidia-smi -L
nproc
$PY -c "import grpo_robot.machine as m, torch; print(m.one_line()); print('cuda:', torch.cuda.is_available())" \
    || exit 1

if on 2; then
    echo "== 2. pytest -m cuda (the rest is skipped when it fails)"
    set -o pipefail
    timeout 150 $PY -m pytest -q -o addopts="" -m cuda tests/test_cuda.py -p no:cacheprovider 2>&1 | tee "$OUT/pytest_cuda.log" | tail -n 15 \
        || exit 1
    set +o pipefail
fi

profile() {  # profile <section> <title> <log> [--before OVERRIDE...]
    local section=$1 title=$2 log=$3
    shift 3
    on "$section" || return 0
    echo "== $section. profile$title"
    timeout 150 $PY scripts/benchmark.py profile --iterations 3 "$@" 2>&1 | tee "$OUT/$log"
}
profile 3 "" profile.log
profile 3b ": the split's parts on threads of their own against taking turns on one pool" profile_parts.log \
    --before rollout.parallel_parts=false
profile 3c ": the parts' turns at Python (held across the policy's host-device round trip on a GPU)" profile_turns.log \
    --before rollout.take_turns=false
profile 3d ": the policy on the CPU against CUDA (a 128x128 MLP: launch-bound on a GPU)" profile_cpu.log \
    --before device=cpu

train() {  # train <seed> <name> [overrides...]: the default job to 90%, its summary as summary_<name>.json
    local s=$1 name=$2
    shift 2
    timeout $(awk "BEGIN{print int($TRAIN_MIN*60+40)}") $PY scripts/train.py seed="$s" progress=false \
        target_success=0.9 eval_every=10 time_limit_min="$TRAIN_MIN" hydra.run.dir="/tmp/gpu_runs/$name" $TRAIN_ARGS "$@" \
        >"$OUT/train_$name.log" 2>&1
    cp "/tmp/gpu_runs/$name/summary.json" "$OUT/summary_$name.json" 2>/dev/null
    tail -n 4 "$OUT/train_$name.log"
}

on 4 || SEEDS=""
on 5 || CPU_SEEDS=""
[[ -n $SEEDS ]] && echo "== 4. default job from scratch to 90%${TRAIN_ARGS:+ ($TRAIN_ARGS)}"
for s in $SEEDS; do
    train "$s" "seed$s"
done
[[ -n $CPU_SEEDS ]] && echo "== 5. default job from scratch to 90%, device=cpu${TRAIN_ARGS:+ ($TRAIN_ARGS)}"
for s in $CPU_SEEDS; do
    train "$s" "cpu_seed$s" device=cpu
done
[[ -n $SEEDS$CPU_SEEDS ]] || exit 0


echo "== table: default job from scratch, time to 90% (200 held-out seeds, evaluated every 10 iterations)"
$PY - "$OUT" $SEEDS ${CPU_SEEDS:+cpu $CPU_SEEDS} <<'EOF'
import json, pathlib, statistics, sys
out, args = pathlib.Path(sys.argv[1]), sys.argv[2:]
cut = args.index("cpu") if "cpu" in args else len(args)
runs = [(s, f"seed{s}") for s in args[:cut]] + [(f"{s}, device=cpu", f"cpu_seed{s}") for s in args[cut + 1:]]
times = {"device=auto": [], "device=cpu": []}
print("| seed | reached | env steps | s (all) | s (training) | last eval | best eval | stopped |")
for s, name in runs:
    f = out / f"summary_{name}.json"
    if not f.exists():
        print(f"| {s} | no summary | | | | | | |")
        continue
    d = json.loads(f.read_text())
    t = d.get("target", {})
    rate = d.get("eval", {}).get("success_rate")
    if t.get("reached"):
        times["device=auto" if name.startswith("seed") else "device=cpu"].append(t["seconds"])
    print(f"| {s} | {t.get('reached')} | {t.get('env_steps', d.get('env_steps'))} | {t.get('seconds')} | "
          f"{t.get('train_seconds')} | {rate} | {d.get('best_eval')} | {d.get('stopped')} |")
for device, n in (("device=auto", cut), ("device=cpu", len(runs) - cut)):
    if times[device]:
        print(f"median s to 90% ({device}) over the seeds that reached it:", statistics.median(times[device]),
              f"({len(times[device])}/{n})")
EOF

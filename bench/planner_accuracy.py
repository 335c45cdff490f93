#!/usr/bin/env python3
"""The planner's step-time model against sdrun's measured steps.

For DiT-S/2 (batch 8) on this machine: `sdrun --calibrate` measures the
devices of each configuration into a profile; then every plan of the
configuration (each mesh of the devices over data, fsdp, context and
tensor, each attention strategy -- dot_product and flash, ring and ulysses
where context splits the sequence -- and each remat policy, the offloading
ones included, or those --remats names) is predicted by
`sdopt --report=json --profile` and, where it partitions, measured by
`sdrun --metrics` (the median of the steps after the first; the targets
are checked on it, and again, for reference, on each run's fastest step,
which other work on the machine does not add to). The planner's
first choice is `sdopt --plan`'s first row. Prints one markdown table per
configuration and the targets:

  rank correlation (Spearman) of predicted vs measured >= 0.8
  the planner's first choice measures within 10% of the measured best
  median |predicted - measured| / measured <= 25%

Configurations: 2 devices in one process, 4 devices in one process, 2 MPI
ranks of one device each (over DCN, which the calibration measures between
the two ranks under mpirun; mpirun on loopback, as root, --oversubscribe, a
timeout on every run). Each configuration is calibrated with its devices
at one thread each (the devices that share this machine's cores) and its
runs use as many threads.

Usage: bench/planner_accuracy.py [--configs=2,4,mpi2] [--steps=4]
         [--model=models/dit_s2.mlir] [--batch=8] [--out=DIR] [--quick]
         [--remats=NONE,FULL,...] [--rules=dit,dit+fsdp-seq,...]
         [--accums=1,2,...] [--measured-from=DIR] [--confirm=R]
         [--rounds=R]
  --measured-from=DIR  predict again (after a change to the model) against
           the calibrated profiles and measured steps an earlier run left
           in DIR (its --out), running no sdrun; the same options
  --rules, --accums  the logical axis rules and gradient accumulations
           measured (default: dit, 1); the planner's first choice is taken
           from its search restricted to the same (--rules=dit,
           --grad-accum=1 at the defaults).
  --confirm=R  after the sweep, run the first choice and the three plans
           measured fastest again, taking turns, R times each (default 3;
           0: none), and check the first-choice target on the medians of
           those runs too: the fastest of many single runs on a shared
           machine is the luckiest one (the winner's curse), so the sweep
           alone overstates how far the first choice is from the best.
  --rounds=R  measure every plan R times (default 1), taking turns: the
           sweep runs every plan once, then again (every other round in
           reverse order, so that a slow spell of the machine does not
           always fall on the same plans), and each plan's measured step
           is the median of its steps 2..S of every round, its fastest the
           fastest of them; the table shows each round's median.
  --quick  one configuration (2 devices), NONE and FULL only, 3 steps: a
           smoke test of the script; its figures are not the table's.
Environment: BUILD (build dir, default build). Exit 1 if a target fails,
2 on a usage or setup error.
"""

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AXES = ["data", "fsdp", "context", "tensor"]
REMATS = ["NONE", "FULL", "MATMUL_WITHOUT_BATCH", "FLUX_OPTIMIZED",
          "OFFLOAD_MATMUL_WITHOUT_BATCH", "HIDDEN_STATE_WITH_OFFLOAD"]
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def die(message):
    print(f"planner_accuracy: {message}", file=sys.stderr)
    sys.exit(2)


def factorizations(n, parts):
    """Ordered factorizations of n into `parts` factors, the planner's order."""
    if parts == 1:
        return [[n]]
    out = []
    for f in range(1, n + 1):
        if n % f == 0:
            for rest in factorizations(n // f, parts - 1):
                out.append([f] + rest)
    return out


def plans(config, quick, remats, rules, accums):
    """(ici, dcn, rules, attention, remat, accum) of every plan of `config`."""
    remats = ["NONE", "FULL"] if quick else remats
    result = []
    if config == "mpi2":
        for sizes in factorizations(2, 2):
            axis = AXES[sizes.index(2)]
            for r, attention, remat, accum in itertools.product(
                    rules, ["dot_product", "flash"], remats, accums):
                result.append((f"{axis}:1", f"{axis}:2", r, attention, remat, accum))
        return result
    devices = int(config)
    for sizes in factorizations(devices, 4):
        ici = ",".join(f"{a}:{s}" for a, s in zip(AXES, sizes) if s > 1)
        attentions = ["dot_product", "flash"]
        if sizes[2] > 1:
            attentions += ["ring", "ulysses"]
        for r, attention, remat, accum in itertools.product(
                rules, attentions, remats, accums):
            result.append((ici, "", r, attention, remat, accum))
    return result


def run(cmd, log, env=None, timeout=900):
    full_env = dict(os.environ)
    full_env.update(env or {})
    with open(log, "w") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        try:
            done = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT,
                                  env=full_env, timeout=timeout)
            return done.returncode
        except subprocess.TimeoutExpired:
            f.write(f"timed out after {timeout} s\n")
            return 124


def mesh_flags(ici, dcn):
    return [f"--mesh={ici}"] + ([f"--dcn-mesh={dcn}"] if dcn else [])


def plan_flags(plan):
    _, _, rules, attention, remat, accum = plan
    return [f"--rules={rules}", f"--attention={attention}", f"--remat={remat}",
            f"--grad-accum={accum}"]


def predict(args, profile, plan, log):
    ici, dcn = plan[:2]
    cmd = [args.sdopt, args.model, *mesh_flags(ici, dcn), f"--batch={args.batch}",
           "--train", *plan_flags(plan),
           "--report=json", f"--profile={profile}", "-o", log + ".json"]
    if run(cmd, log) != 0:
        return None
    with open(log + ".json") as f:
        step = json.load(f)["step_time"]
    return step if step["fits"] else None


def measured_steps(metrics):
    """The step times of a --metrics file after the first step, or None.
    Says on stderr what the process counted in those steps (the medians of
    sdrun's page_faults and involuntary_context_switches), which tells a
    run that other work disturbed from a slow plan."""
    with open(metrics) as f:
        steps = [json.loads(line) for line in f if line.strip()]
    later = [s for s in steps if s.get("step", 0) > 1]
    if later and "page_faults" in later[0]:
        print("  a step: %d page faults, %d involuntary context switches "
              "(medians)" % (
                  statistics.median(s["page_faults"] for s in later),
                  statistics.median(s["involuntary_context_switches"]
                                    for s in later)),
              file=sys.stderr)
    times = [s["step_time_s"] for s in later]
    return times or None


def measure(args, config, plan, log, cache):
    ici, dcn = plan[:2]
    metrics = log + ".jsonl"
    if args.measured_from:
        # An earlier run's measurement of the same plan (its command line,
        # the log's first line, must be this one's but for the paths).
        earlier = os.path.join(args.measured_from, os.path.basename(metrics))
        command = os.path.join(args.measured_from, os.path.basename(log))
        if not os.path.exists(earlier) or not os.path.exists(command):
            return None
        with open(command) as f:
            words = f.readline().split()
        wanted = [*mesh_flags(ici, dcn), f"--batch={args.batch}",
                  f"--steps={args.steps}", *plan_flags(plan)]
        if any(w not in words for w in wanted):
            die(f"{command} ran another plan than {plan}: give the earlier "
                f"run's options")
        return measured_steps(earlier)
    sdrun = [args.sdrun, args.model, *mesh_flags(ici, dcn), f"--batch={args.batch}",
             f"--steps={args.steps}", *plan_flags(plan),
             f"--metrics={metrics}", f"--cache-dir={cache}"]
    env = None
    if config == "mpi2":
        # One thread a rank, as calibrated: the two ranks share two cores.
        sdrun = (["timeout", "900", "mpirun", "--oversubscribe", "-np", "2"] +
                 sdrun + ["--threads-per-device=1"])
        env = MPI_ENV
    if run(sdrun, log, env) != 0:
        return None
    return measured_steps(metrics)


def ranks(values):
    """Ranks 1..n, ties sharing their average rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    result = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            result[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return result


def spearman(xs, ys):
    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.mean(rx), statistics.mean(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx = sum((a - mx) ** 2 for a in rx)
    vy = sum((b - my) ** 2 for b in ry)
    return cov / (vx * vy) ** 0.5 if vx > 0 and vy > 0 else float("nan")


def statistics_of(pairs, first):
    """The three targets' (name, value, target, met) over (plan, predicted,
    measured) pairs."""
    rho = spearman([b[1] for b in pairs], [b[2] for b in pairs])
    errors = [abs(pr - m) / m for _, pr, m in pairs]
    best = min(m for _, _, m in pairs)
    first_measured = next((m for p, _, m in pairs if p == first), None)
    median_error = statistics.median(errors)
    return [
        ("Spearman rank correlation", f"{rho:.3f}", ">= 0.8", rho >= 0.8),
        ("first choice vs measured best",
         "not measured" if first_measured is None else
         f"{(first_measured / best - 1) * 100:+.1f}% ({first_measured:.3f} s vs {best:.3f} s)",
         "<= 10%", first_measured is not None and first_measured <= 1.1 * best),
        ("median abs error", f"{median_error * 100:.0f}%", "<= 25%", median_error <= 0.25),
    ]


def confirm(args, config, first, rows, out, cache):
    """The first choice and the sweep's three fastest plans run again,
    taking turns args.confirm times: [(plan, median of every round's
    steps, per-round medians)], fastest first, or None when the first
    choice was not measured."""
    measured = sorted((m, i) for i, (_, pr, m, _, _) in enumerate(rows)
                      if pr is not None and m is not None)
    if first is None or args.confirm == 0 or not any(
            rows[i][0] == first for _, i in measured):
        return None
    chosen = [rows[i][0] for _, i in measured[:3]]
    if first not in chosen:
        chosen.append(first)
    steps = {plan: [] for plan in chosen}
    rounds = {plan: [] for plan in chosen}
    for r in range(args.confirm):
        for k, plan in enumerate(chosen):
            tag = f"{config}-confirm-{r}-{k}"
            print(f"confirm {tag}: {plan}", file=sys.stderr)
            log = os.path.join(out, f"run-{tag}.log")
            times = measure(args, config, plan, log, cache)
            if times is None:
                return None
            steps[plan] += times
            rounds[plan].append(statistics.median(times))
    result = [(plan, statistics.median(steps[plan]), rounds[plan])
              for plan in chosen]
    return sorted(result, key=lambda entry: entry[1])


def first_choice(args, config, profile, log):
    devices, hosts = (2, 2) if config == "mpi2" else (int(config), 1)
    cmd = [args.sdopt, args.model, "--plan", f"--devices={devices}",
           f"--hosts={hosts}", f"--profile={profile}", f"--batch={args.batch}"]
    # The planner's search restricted to the plans measured.
    if args.quick:
        cmd.append("--remat=NONE")
    if args.rules == "dit":
        cmd.append("--rules=dit")
    if args.accums == "1":
        cmd.append("--grad-accum=1")
    if run(cmd, log) != 0:
        return None
    with open(log) as f:
        for line in f:
            fields = line.split()
            if fields[:1] == ["1"]:
                # "1  data:1 | data:2  dit  flash  NONE  1 ..." or
                # "1  fsdp:2  dit  flash  NONE  1 ..."
                dcn = ""
                if fields[2] == "|":
                    dcn = fields[3]
                    del fields[2:4]
                return (fields[1], dcn, fields[2], fields[3], fields[4],
                        int(fields[5]))
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", default="2,4,mpi2")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--model", default=os.path.join(ROOT, "models/dit_s2.mlir"))
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--out")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--remats", default=",".join(REMATS))
    parser.add_argument("--rules", default="dit")
    parser.add_argument("--accums", default="1")
    parser.add_argument("--measured-from")
    parser.add_argument("--confirm", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    build = os.environ.get("BUILD", os.path.join(ROOT, "build"))
    args.sdopt = os.path.join(build, "bin/sdopt")
    args.sdrun = os.path.join(build, "bin/sdrun")
    for tool in (args.sdopt, args.sdrun):
        if not os.access(tool, os.X_OK):
            die(f"{tool} not found: build it first")
    configs = args.configs.split(",")
    if args.quick:
        configs, args.steps, args.confirm = ["2"], 3, min(args.confirm, 1)
    for config in configs:
        if config != "mpi2" and not config.isdigit():
            die(f"unknown configuration '{config}' (2, 4, mpi2)")
        if config == "mpi2" and not shutil.which("mpirun"):
            die("mpi2 needs mpirun (apt install openmpi-bin)")
    if args.steps < 2:
        die("--steps must be at least 2 (step 1 is warm-up)")
    if args.confirm < 0:
        die("--confirm must be 0 or more")
    if args.rounds < 1:
        die("--rounds must be at least 1")
    if args.measured_from:
        args.confirm = 0
    out = args.out or tempfile.mkdtemp(prefix="sd-planner-accuracy.")
    os.makedirs(out, exist_ok=True)
    cache = os.path.join(out, "cache")
    print(f"logs: {out}", file=sys.stderr)

    commit = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"],
                            capture_output=True, text=True).stdout.strip()
    with open("/proc/loadavg") as f:
        load_start = " ".join(f.read().split()[:3])
    print(f"# Planner accuracy: {os.path.basename(args.model)}, batch "
          f"{args.batch}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")
    rounds = (f"; every plan run in {args.rounds} rounds, taking turns, the "
              f"median of every round's steps" if args.rounds > 1 else "")
    print(f"- sd: {commit}; load average at start {load_start}; "
          f"{args.steps} steps a run, the median of steps 2..{args.steps}"
          f"{rounds}\n")
    if args.measured_from:
        print(f"- predicted again against the profiles and steps measured in "
              f"{os.path.basename(os.path.normpath(args.measured_from))}\n")
    failed = False
    for config in configs:
        devices = 2 if config == "mpi2" else int(config)
        profile = os.path.join(out, f"profile-{config}.yml")
        if args.measured_from:
            # The earlier run's profile: its measurements belong to it.
            shutil.copy(os.path.join(args.measured_from, f"profile-{config}.yml"),
                        profile)
        # The devices that share this machine's cores, one thread each; two
        # ranks are calibrated as two ranks (each a host of one device, the
        # MPI transport between them measured as DCN).
        else:
            calibrate = [args.sdrun, f"--calibrate={profile}",
                         f"--devices={devices}", "--threads-per-device=1"]
            env = None
            if config == "mpi2":
                calibrate = ["timeout", "900", "mpirun", "--oversubscribe",
                             "-np", "2"] + calibrate
                env = MPI_ENV
            if run(calibrate, os.path.join(out, f"calibrate-{config}.log"),
                   env) != 0:
                die(f"calibration failed: {out}/calibrate-{config}.log")
        measured_plans = plans(config, args.quick, args.remats.split(","),
                               args.rules.split(","),
                               [int(a) for a in args.accums.split(",")])
        predictions = []
        for i, plan in enumerate(measured_plans):
            tag = f"{config}-{i}"
            print(f"plan {tag}: {plan}", file=sys.stderr)
            predicted = predict(args, profile, plan, os.path.join(out, f"predict-{tag}.log"))
            predictions.append(None if predicted is None else predicted["step_seconds"])
        # Every plan that fits is measured in each round, taking turns; a
        # run that fails drops the plan from the later rounds.
        steps = {i: [] for i, pr in enumerate(predictions) if pr is not None}
        per_round = {i: [] for i in steps}
        for r in range(args.rounds):
            order = sorted(steps, reverse=(r % 2 == 1))
            for i in order:
                if steps[i] is None:
                    continue
                plan = measured_plans[i]
                # Round 0's logs keep the names of a run without rounds
                # (--measured-from reads them).
                tag = f"{config}-{i}" + (f"-r{r}" if r else "")
                print(f"run {tag}: {plan}", file=sys.stderr)
                times = measure(args, config, plan,
                                os.path.join(out, f"run-{tag}.log"), cache)
                if times is None:
                    steps[i] = None
                    continue
                steps[i] += times
                per_round[i].append(statistics.median(times))
                print(f"  predicted {predictions[i]:.3f} s, measured "
                      f"{statistics.median(times):.3f} s", file=sys.stderr,
                      flush=True)
        rows = []
        for i, plan in enumerate(measured_plans):
            times = steps.get(i)
            if predictions[i] is None or not times:
                rows.append((plan, predictions[i], None, None, []))
            else:
                rows.append((plan, predictions[i], statistics.median(times),
                             min(times), per_round[i]))
        first = first_choice(args, config, profile, os.path.join(out, f"plan-{config}.log"))
        both = [(p, pr, m) for p, pr, m, _, _ in rows
                if pr is not None and m is not None]
        both_fastest = [(p, pr, f) for p, pr, _, f, _ in rows
                        if pr is not None and f is not None]
        title = ("2 MPI ranks x 1 device" if config == "mpi2"
                 else f"{devices} devices in one process")
        print(f"## {title}\n")
        rounds_head = " rounds |" if args.rounds > 1 else ""
        print("| mesh | rules | attention | remat | accum | predicted | measured | error | fastest step |" + rounds_head)
        print("|---|---|---|---|---:|---:|---:|---:|---:|" + ("---|" if args.rounds > 1 else ""))
        for plan, pr, m, fastest, medians in rows:
            ici, dcn, rules, attention, remat, accum = plan
            mesh = f"{ici} \\| {dcn}" if dcn else ici
            mark = " (first choice)" if first == plan else ""
            head = f"| {mesh}{mark} | {rules} | {attention} | {remat} | {accum} |"
            if pr is None:
                print(f"{head} does not partition or fit | | | |")
            elif m is None:
                print(f"{head} {pr:.3f} s | run failed | | |")
            else:
                rounds_cell = (f" {' / '.join(f'{x:.3f}' for x in medians)} s |"
                               if args.rounds > 1 else "")
                print(f"{head} {pr:.3f} s | {m:.3f} s | {(pr - m) / m * 100:+.0f}% | "
                      f"{fastest:.3f} s |{rounds_cell}")
        if len(both) < 2:
            print("\nfewer than two plans measured: no statistics\n")
            failed = True
            continue
        print(f"\n{len(both)} plans predicted and measured\n")
        print("| measure | value | target | result |")
        print("|---|---|---|---|")
        # The targets on each run's median step; then, for reference, on its
        # fastest step (what other work on the machine does not add to).
        # The first choice's target is judged on the runs taken again, where
        # there are any (below).
        confirmed = confirm(args, config, first, rows, out, cache)
        for label, pairs, counts in [("", both, True),
                                     (", fastest step", both_fastest, False)]:
            for name, value, target, ok in statistics_of(pairs, first):
                print(f"| {name}{label} | {value} | {target} | "
                      f"{'PASS' if ok else 'FAIL'} |")
                failed |= (counts and not ok and
                           not (confirmed and name.startswith("first choice")))
        print()
        if confirmed:
            print(f"Run again in {args.confirm} rounds, taking turns (the first "
                  f"choice and the sweep's three fastest; the median of every "
                  f"round's steps 2..{args.steps}, and each round's):\n")
            print("| mesh | rules | attention | remat | accum | median | rounds |")
            print("|---|---|---|---|---:|---:|---|")
            for plan, median, per_round in confirmed:
                ici, dcn, rules, attention, remat, accum = plan
                mesh = f"{ici} \\| {dcn}" if dcn else ici
                mark = " (first choice)" if first == plan else ""
                print(f"| {mesh}{mark} | {rules} | {attention} | {remat} | "
                      f"{accum} | {median:.3f} s | "
                      f"{' / '.join(f'{m:.3f}' for m in per_round)} s |")
            best = confirmed[0][1]
            mine = next(m for p, m, _ in confirmed if p == first)
            ok = mine <= 1.1 * best
            failed |= not ok
            print("\n| measure | value | target | result |")
            print("|---|---|---|---|")
            print(f"| first choice vs best, run again | {(mine / best - 1) * 100:+.1f}% "
                  f"({mine:.3f} s vs {best:.3f} s) | <= 10% | "
                  f"{'PASS' if ok else 'FAIL'} |\n")
    with open("/proc/loadavg") as f:
        print(f"load average at end {' '.join(f.read().split()[:3])}")
    sys.exit(1 if failed and not args.quick else 0)


if __name__ == "__main__":
    main()

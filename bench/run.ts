// The benchmark command (README: `npm run bench`). Prints one table of figures with their targets and writes
// bench/results/latest.json (git-ignored). Not part of `npm test`: figures depend on the machine and its load.
//
// Flags:
//   --only=loop-guard,semantic-anchors,memory,host,fuzz,signature   run some groups (default: all but fuzz and
//                                                    signature, the experiment of bench/signature-experiment.ts)
//   --quick                                          fewer rounds and host runs (a smoke run, figures rougher)
//   --host-runs=N                                    opencode runs per side for the whole-host figure (default 5)
//   --fuzz[=N]                                       then run the fuzz tests with BENCH_FUZZ=N calls (default 1e6);
//                                                    `--only=fuzz` runs only those
//   --traces DIR (or --traces=DIR)                   replay the real trajectories in DIR through loop-guard
//                                                    (bench/traces.ts) and semantic-anchors (bench/traces-anchors.ts);
//                                                    alone, it runs only that group (add --only=... for more)
//   --texts DIR (or --texts=DIR)                     stream the real texts and loops in DIR through the stream rule
//                                                    (bench/texts.ts); alone, it runs only that group
import { spawnSync } from "node:child_process"
import { existsSync, mkdirSync, writeFileSync } from "node:fs"
import path from "node:path"
import { machine, printTable, summarize, type Row } from "./lib.ts"

const REPO = path.resolve(import.meta.dir, "..")
const argv = process.argv.slice(2)
// `--traces DIR` as two words (npm passes them so): join them into `--traces=DIR`.
for (let i = 0; i < argv.length - 1; i++) {
  for (const name of ["--traces", "--texts"])
    if (argv[i] === name && !argv[i + 1].startsWith("--")) argv.splice(i, 2, `${name}=${argv[i + 1]}`)
}
const flag = (name: string): string | undefined => {
  const hit = argv.find((a) => a === `--${name}` || a.startsWith(`--${name}=`))
  return hit === undefined ? undefined : hit.includes("=") ? hit.slice(hit.indexOf("=") + 1) : ""
}
const known = ["only", "quick", "host-runs", "fuzz", "traces", "texts"]
for (const a of argv) {
  if (!known.some((k) => a === `--${k}` || a.startsWith(`--${k}=`))) {
    console.error(
      `unknown argument ${a}; flags: --only=loop-guard,semantic-anchors,memory,host,fuzz --quick --host-runs=N --fuzz[=N] --traces DIR --texts DIR`,
    )
    process.exit(2)
  }
}
const quick = flag("quick") !== undefined
const tracesDir = flag("traces")
if (tracesDir === "") {
  console.error("--traces needs a directory, e.g. npm run bench -- --traces ../shared/data/real-traces")
  process.exit(2)
}
const textsDir = flag("texts")
if (textsDir === "") {
  console.error("--texts needs a directory, e.g. npm run bench -- --texts ../shared/data/real-texts")
  process.exit(2)
}
const groups = (flag("only") || (tracesDir || textsDir ? "" : "loop-guard,semantic-anchors,memory,host"))
  .split(",")
  .filter(Boolean)
if (tracesDir) groups.push("traces")
if (textsDir) groups.push("texts")
const hostRuns = Number(flag("host-runs") || (quick ? 2 : 5))

const rows: Row[] = []
const results: Record<string, unknown> = { started: new Date().toISOString(), machineBefore: machine(), quick }

/** Memory scenarios run in fresh processes, 3 each, so one scenario's garbage never counts in another's heap. */
function memoryRuns(args: string[], samples: number): Record<string, number>[] {
  const out: Record<string, number>[] = []
  for (let i = 0; i < samples; i++) {
    const child = spawnSync(process.execPath, [path.join(REPO, "bench/memory-child.ts"), ...args], { encoding: "utf8" })
    if (child.status !== 0) throw new Error(`memory-child ${args.join(" ")} failed:\n${child.stderr}`)
    out.push(JSON.parse(child.stdout.trim().split("\n").pop()!))
  }
  return out
}
const med = (runs: Record<string, number>[], key: string) => summarize(runs.map((r) => r[key]))
const kib = (bytes: number) => `${(bytes / 1024).toFixed(0)} KiB`

if (groups.includes("loop-guard")) {
  const { hookCost, maskCost } = await import("./loop-guard.ts")
  const r = await hookCost({ rounds: quick ? 9 : 41 })
  rows.push(...r.rows)
  results.loopGuardHook = r.json
  const mask = maskCost({ rounds: quick ? 9 : 41 })
  rows.push(...mask.rows)
  results.loopGuardMask = mask.json
}

if (groups.includes("signature")) {
  const { signatureExperiment } = await import("./signature-experiment.ts")
  const r = signatureExperiment({ rounds: quick ? 9 : 41 })
  rows.push(...r.rows)
  results.signatureExperiment = r.json
}

if (groups.includes("semantic-anchors")) {
  const { checkCost, editCost, loadCost } = await import("./semantic-anchors.ts")
  const c = await checkCost({ samples: quick ? 5_000 : 30_000 })
  const e = await editCost({ turns: quick ? 1_000 : 5_000 })
  const l = await loadCost({ runs: quick ? 20 : 100 })
  rows.push(...c.rows, ...e.rows, ...l.rows)
  results.semanticAnchors = { ...c.json, ...e.json, ...l.json }
}

if (groups.includes("memory")) {
  const samples = quick ? 1 : 3
  const lg = memoryRuns(["loop-guard", "10000,100000"], samples)
  const per = med(lg, "perSession")
  const r10 = med(lg, "after10000").median
  const r100 = med(lg, "after100000").median
  rows.push(
    {
      group: "loop-guard",
      figure: "heap per live session (full history, at the 1,000-session bound)",
      value: per.median,
      unit: "B",
      spread: `min-max ${per.min.toFixed(0)}-${per.max.toFixed(0)} B, ${samples} processes`,
    },
    {
      group: "loop-guard",
      figure: "heap after 100,000 sessions / after 10,000 (bound reached at 1,000)",
      value: r100 / r10,
      unit: "x",
      spread: `${kib(r100)} vs ${kib(r10)}; ${kib(med(lg, "atCapacity").median)} at the bound`,
      target: { text: "<= 1.1x (bounded)", met: r100 / r10 <= 1.1 },
    },
  )
  const typical = memoryRuns(["semantic-anchors", "typical", "20000,100000"], samples)
  const worst = memoryRuns(["semantic-anchors", "worst"], samples)
  const t20 = med(typical, "after20000").median
  const t100 = med(typical, "after100000").median
  rows.push(
    {
      group: "semantic-anchors",
      figure: "heap per live root session, typical (at the 128-session bound)",
      value: med(typical, "perSession").median,
      unit: "B",
      spread: `${samples} processes`,
    },
    {
      group: "semantic-anchors",
      figure: "heap per live root session, worst case (every per-session bound full)",
      value: med(worst, "perSession").median,
      unit: "B",
      spread: `${(med(worst, "atCapacity").median / (1 << 20)).toFixed(1)} MiB for 128 such sessions`,
    },
    {
      group: "semantic-anchors",
      figure: "heap after 100,000 sessions / after 20,000 (all bounds reached)",
      value: t100 / t20,
      unit: "x",
      spread: `${kib(t100)} vs ${kib(t20)}; ${kib(med(typical, "atCapacity").median)} with 128 live sessions`,
      target: { text: "<= 1.1x (bounded)", met: t100 / t20 <= 1.1 },
    },
  )
  results.memory = { loopGuard: lg, semanticAnchorsTypical: typical, semanticAnchorsWorst: worst }
}

if (groups.includes("host")) {
  const { hostOverhead } = await import("./host.ts")
  const h = await hostOverhead({ runs: hostRuns })
  rows.push(...h.rows)
  results.host = h.json
}

if (groups.includes("traces")) {
  const { replayTraces } = await import("./traces.ts")
  results.traces = await replayTraces(path.resolve(tracesDir!))
  const { replayAnchorTraces } = await import("./traces-anchors.ts")
  results.tracesAnchors = await replayAnchorTraces(path.resolve(tracesDir!))
}

if (groups.includes("texts")) {
  const { streamTexts } = await import("./texts.ts")
  results.texts = await streamTexts(path.resolve(textsDir!))
}

if (!groups.every((g) => g === "fuzz" || g === "traces" || g === "texts")) {
  results.machineAfter = machine()
  results.rows = rows
  console.log(
    `\nmachine: ${JSON.stringify(results.machineBefore)} -> load after ${JSON.stringify((results.machineAfter as any).loadavg)}`,
  )
  console.log(
    "medians over interleaved rounds; spread as p10-p90 or min-max. On a loaded machine compare ratios, not times.\n",
  )
  printTable(rows)
  mkdirSync(path.join(REPO, "bench/results"), { recursive: true })
  writeFileSync(path.join(REPO, "bench/results/latest.json"), JSON.stringify(results, null, 2))
  console.log(`\nwritten: bench/results/latest.json`)
  const missed = rows.filter((r) => r.target && !r.target.met)
  console.log(
    missed.length
      ? `${missed.length} target(s) not met: ${missed.map((r) => `${r.group} / ${r.figure}`).join("; ")}`
      : "every target met",
  )
}

const fuzz = flag("fuzz") ?? (groups.includes("fuzz") ? "" : undefined)
if (fuzz !== undefined) {
  const calls = fuzz || "1e6"
  console.log(`\nfuzz: BENCH_FUZZ=${calls} bun test test/fuzz-*.test.ts`)
  const files = ["test/fuzz-loop-guard.test.ts", "test/fuzz-semantic-anchors.test.ts"].filter((f) =>
    existsSync(path.join(REPO, f)),
  )
  const run = spawnSync(process.execPath, ["test", "--timeout", "1800000", ...files], {
    cwd: REPO,
    stdio: "inherit",
    env: { ...process.env, BENCH_FUZZ: calls },
  })
  process.exitCode = run.status ?? 1
}

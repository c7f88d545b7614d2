// Whole-host figure: wall time of `opencode run` on the end-to-end loop scenario (four identical reads of a file,
// then an answer; the scripted fake model of test/e2e) with both plugins installed by install.sh vs with none.
// The two sandboxes are identical but for the plugin files; runs go in back-to-back pairs (none-both, both-none,
// ...) and the figure is the median of the pairwise ratios, so a change in machine load hits both sides alike.
// Wall time by process.hrtime around the process; max RSS from /usr/bin/time -v.
import { spawn } from "node:child_process"
import fs from "node:fs"
import path from "node:path"
import { MODEL, OPENCODE_BIN, createSandbox, fakeLLM, toolParts, type Sandbox, type Step } from "../test/e2e/harness.ts"
import { summarize, type Row } from "./lib.ts"

const NOTES = "hello notes, line one\n"

type Run = { wallSeconds: number; maxRssKiB: number; statuses: string[] }

async function runOnce(sb: Sandbox): Promise<Run> {
  const read = { tool: "read", args: { filePath: path.join(sb.project, "notes.txt") } }
  const script: Step[] = [read, read, read, read, { text: "I will stop." }]
  const llm = await fakeLLM(script)
  try {
    const timeFile = path.join(sb.root, "time.txt")
    const args = ["-v", "-o", timeFile, OPENCODE_BIN, "run", "--format", "json", "--model", MODEL, "read the notes"]
    const child = spawn("/usr/bin/time", args, {
      cwd: sb.project,
      env: { ...sb.env, PWD: sb.project, FAKE_LLM_BASE_URL: llm.baseURL },
      stdio: ["ignore", "pipe", "pipe"],
    })
    let stdout = ""
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d))
    child.stderr.resume()
    const started = process.hrtime.bigint()
    const code = await new Promise<number | null>((resolve, reject) => {
      const timer = setTimeout(
        () => (child.kill("SIGKILL"), reject(new Error("opencode run took over 120 s"))),
        120_000,
      )
      child.once("exit", (c) => (clearTimeout(timer), resolve(c)))
    })
    const wallSeconds = Number(process.hrtime.bigint() - started) / 1e9
    if (code !== 0) throw new Error(`opencode run exited ${code}`)
    const time = fs.readFileSync(timeFile, "utf8")
    const rss = /Maximum resident set size \(kbytes\): (\d+)/.exec(time)
    if (!rss) throw new Error(`cannot read /usr/bin/time output:\n${time}`)
    const events = stdout
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l))
    return {
      wallSeconds,
      maxRssKiB: Number(rss[1]),
      statuses: toolParts(events)
        .filter((p) => p.tool === "read")
        .map((p) => p.status),
    }
  } finally {
    await llm.close()
  }
}

export async function hostOverhead(opts: { runs: number }): Promise<{ rows: Row[]; json: Record<string, unknown> }> {
  const withPlugins = createSandbox({ files: { "notes.txt": NOTES } })
  const without = createSandbox({ files: { "notes.txt": NOTES } })
  try {
    const pluginDir = path.join(without.configDir, "plugins")
    for (const file of fs.readdirSync(pluginDir)) if (/\.(ts|js)$/.test(file)) fs.rmSync(path.join(pluginDir, file))
    const installed = fs
      .readdirSync(path.join(withPlugins.configDir, "plugins"))
      .filter((f) => f.endsWith(".ts"))
      .sort()
    if (installed.join(",") !== "loop-guard.ts,semantic-anchors.ts")
      throw new Error(`install.sh installed ${installed.join(", ")}`)

    // One warm-up run each (first start fills opencode's caches); their figures are not counted.
    const check = (run: Run, plugins: boolean) => {
      const expected = plugins ? "completed,completed,completed,error" : "completed,completed,completed,completed"
      if (run.statuses.join(",") !== expected)
        throw new Error(
          `host bench: reads ${run.statuses.join(",")} with${plugins ? "" : "out"} plugins, expected ${expected}`,
        )
    }
    check(await runOnce(without), false)
    check(await runOnce(withPlugins), true)
    const none: Run[] = []
    const both: Run[] = []
    for (let i = 0; i < opts.runs; i++) {
      // Pairs run back to back, the order alternating (none-both, both-none, ...), so drifting load and any
      // first-in-pair effect fall on both sides alike.
      const runNone = async () => {
        const a = await runOnce(without)
        check(a, false)
        none.push(a)
      }
      const runBoth = async () => {
        const b = await runOnce(withPlugins)
        check(b, true)
        both.push(b)
      }
      if (i % 2) (await runBoth(), await runNone())
      else (await runNone(), await runBoth())
    }
    const wallNone = summarize(none.map((r) => r.wallSeconds))
    const wallBoth = summarize(both.map((r) => r.wallSeconds))
    const rssNone = summarize(none.map((r) => r.maxRssKiB))
    const rssBoth = summarize(both.map((r) => r.maxRssKiB))
    // The figure: the median of the pairwise ratios (each pair ran under the same load); the ratio of the two
    // medians is given beside it.
    const pairRatios = summarize(both.map((b, i) => b.wallSeconds / none[i].wallSeconds))
    const ratio = pairRatios.median
    return {
      rows: [
        {
          group: "host",
          figure: `opencode run, loop scenario, both plugins / none (median of ${opts.runs} pairs)`,
          value: ratio,
          unit: "x",
          spread: `pairs p10-p90 ${pairRatios.p10.toFixed(3)}-${pairRatios.p90.toFixed(3)}; medians ${wallBoth.median.toFixed(2)} s vs ${wallNone.median.toFixed(2)} s (${(wallBoth.median / wallNone.median).toFixed(3)}x); both ${wallBoth.min.toFixed(2)}-${wallBoth.max.toFixed(2)} s, none ${wallNone.min.toFixed(2)}-${wallNone.max.toFixed(2)} s`,
          target: { text: "<= 1.03x", met: ratio <= 1.03 },
        },
        {
          group: "host",
          figure: "opencode run, max RSS, both plugins / none",
          value: rssBoth.median / rssNone.median,
          unit: "x",
          spread: `${(rssBoth.median / 1024).toFixed(0)} MiB vs ${(rssNone.median / 1024).toFixed(0)} MiB`,
        },
      ],
      json: {
        runs: opts.runs,
        wallSeconds: { both: wallBoth, none: wallNone, pairRatios },
        maxRssKiB: { both: rssBoth, none: rssNone },
        ratio,
        raw: { both, none },
      },
    }
  } finally {
    withPlugins.cleanup()
    without.cleanup()
  }
}

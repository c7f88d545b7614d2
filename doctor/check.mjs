// @ts-check
// The doctor: proves that the installed plugins load and really block in the user's own opencode, inside a throw-away
// sandbox (sandbox.mjs) against the scripted model (fake-llm.mjs). Plain Node 20, no dependencies.
//
// Why: a user (or an opencode update) can break the install in ways no file check shows: opencode not finding the
// files, a plugin throwing at start, a host that no longer calls the hooks. Only a real run shows a block.
//
// How: `./install.sh --check` does the parts that belong to the installer (finding opencode, the version gate's
// verdict, the installed files against the ownership manifest) and then runs
//   node doctor/check.mjs run --opencode BIN --version V --plugins-dir DIR --files "loop-guard.ts ..."
//                              [--untested] [--counted OK,FAILED]
// which copies the installed files into a sandbox and checks, each printed as `WHAT: ok (detail)` or
// `WHAT: failed: reason`: discovery (`opencode debug config`), loop-guard blocking the 4th identical read, a probe
// contract blocking a harmless command (the model must read both messages), and opencode's log having no
// "failed to load plugin". It prints `N ok, M failed` (counting the installer's checks given by --counted) and exits
// 0, or 5 with the sandbox kept for a look. `node doctor/check.mjs version BIN` prints the version BIN reports, asked
// inside a sandbox (even --version creates opencode's data dirs).
//
// How to tune: the probe script (probeScript) and the probe contract (PROBE_CONTRACT) are below; the time limits are
// DEBUG_CONFIG_TIMEOUT_MS and RUN_TIMEOUT_MS.

import { spawnSync } from "node:child_process"
import fs from "node:fs"
import path from "node:path"
import { parseArgs } from "node:util"
import { pathToFileURL } from "node:url"
import { startFakeLLM } from "./fake-llm.mjs"
import {
  MODEL,
  makeSandboxRoot,
  opencodeVersion,
  runToEnd,
  sandboxEnv,
  seedConfigDir,
  writeOpencodeConfig,
} from "./sandbox.mjs"

const EXIT_CHECK_FAILED = 5
const DEBUG_CONFIG_TIMEOUT_MS = 120_000
const RUN_TIMEOUT_MS = 180_000

/** The contract the doctor proves semantic-anchors with: it blocks one harmless command, so nothing happens even if
 * the block fails. Written into the sandbox project only. */
export const PROBE_CONTRACT = `version: 1
contracts:
  - id: doctor-probe
    description: install.sh --check proves that a contract blocks this harmless command.
    mode: block
    message: This block is expected; it is the doctor's probe.
    trigger:
      type: tool
      tools: [bash]
      args:
        command: { contains: "opencode-guards-doctor-probe" }
`
const PROBE_COMMAND = "echo opencode-guards-doctor-probe"

// ---------------------------------------------------------------------------------------------------------------
// The verdicts: pure functions of what opencode printed and what the model was sent.

/**
 * The scripted model's steps: four identical reads (loop-guard), then the probe command (the contract), then text.
 * @param {string} probeFile  absolute path of the file read four times
 * @param {{ loop: boolean, contract: boolean }} want
 */
export function probeScript(probeFile, want) {
  const read = { tool: "read", args: { filePath: probeFile } }
  return [
    ...(want.loop ? [read, read, read, read] : []),
    ...(want.contract ? [{ tool: "bash", args: { command: PROBE_COMMAND, description: "doctor probe" } }] : []),
    { text: "The doctor run is over." },
  ]
}

/** @typedef {{ ok(what: string, detail?: string): void, failed(what: string, reason: string): void,
 *              counts: { ok: number, failed: number } }} Report */
/** @typedef {{ root: string, env: Record<string, string>, project: string, probeFile: string,
 *              logDir: string }} Sandbox */
/** @typedef {{ ok: boolean, detail: string }} Verdict */

/**
 * The tool parts of `opencode run --format json` output, in order.
 * @param {string} runJsonl
 * @returns {any[]}
 */
function toolCalls(runJsonl) {
  return runJsonl
    .split("\n")
    .flatMap((/** @type {string} */ line) => {
      try {
        return [JSON.parse(line)]
      } catch {
        return []
      }
    })
    .filter((e) => e.type === "tool_use" && e.part?.type === "tool")
    .map((e) => e.part)
}

/** @param {unknown} content */
function textOf(content) {
  if (typeof content === "string") return content
  if (Array.isArray(content))
    return content.map((p) => (typeof p === "string" ? p : (p?.text ?? JSON.stringify(p)))).join("\n")
  return JSON.stringify(content ?? "")
}

/**
 * The model saw a block message when a later request carries its first line as a tool result.
 * @param {any[]} requests
 * @param {unknown} error
 */
function modelSaw(requests, error) {
  const firstLine = String(error).split("\n")[0]
  return requests.some((r) =>
    (r.messages ?? []).some((/** @type {any} */ m) => m?.role === "tool" && textOf(m.content).includes(firstLine)),
  )
}

const short = (/** @type {unknown} */ s) => String(s).split("\n")[0].slice(0, 160)

/**
 * @param {any[]} calls     tool parts
 * @param {any[]} requests  the model's request bodies
 * @returns {{ ok: boolean, detail: string }}
 */
export function loopVerdict(calls, requests) {
  const reads = calls.filter((c) => c.tool === "read")
  const fourth = reads[3]
  if (reads.length < 4) return { ok: false, detail: `only ${reads.length} read call(s) reached opencode; expected 4` }
  const notRun = reads.slice(0, 3).find((c) => c.state?.status !== "completed")
  if (notRun) {
    const statuses = reads
      .slice(0, 3)
      .map((c) => c.state?.status)
      .join(", ")
    return {
      ok: false,
      detail: `one of the first 3 identical reads did not run (${statuses}): ${short(notRun.state?.error ?? "")}`,
    }
  }
  if (fourth.state?.status !== "error")
    return {
      ok: false,
      detail: `the 4th identical read ran (status ${fourth.state?.status}): loop-guard did not block it`,
    }
  if (!/loop-guard/.test(String(fourth.state.error)))
    return { ok: false, detail: `the 4th read failed, but not by loop-guard: ${short(fourth.state.error)}` }
  if (!modelSaw(requests, fourth.state.error))
    return { ok: false, detail: "the 4th read was blocked, but the model's next request did not carry the message" }
  return { ok: true, detail: `reads 1-3 ran, the 4th was blocked and the model read: "${short(fourth.state.error)}"` }
}

/**
 * @param {any[]} calls
 * @param {any[]} requests
 * @returns {{ ok: boolean, detail: string }}
 */
export function contractVerdict(calls, requests) {
  const probe = calls.find((c) => c.tool === "bash")
  if (!probe) return { ok: false, detail: "the probe's bash call never reached opencode" }
  if (probe.state?.status !== "error")
    return { ok: false, detail: `the probe command ran (status ${probe.state?.status}): the contract did not block it` }
  if (!/doctor-probe/.test(String(probe.state.error)))
    return { ok: false, detail: `the probe failed, but not by the contract: ${short(probe.state.error)}` }
  if (!modelSaw(requests, probe.state.error))
    return { ok: false, detail: "the probe was blocked, but the model's next request did not carry the message" }
  return { ok: true, detail: `the probe command was blocked and the model read: "${short(probe.state.error)}"` }
}

/**
 * The plugins opencode logged as "failed to load plugin", with the error: "" when none.
 * @param {string} log
 * @param {string[]} plugins
 */
export function loadFailures(log, plugins) {
  const lines = log.split("\n").filter((l) => l.includes("failed to load plugin"))
  return plugins
    .flatMap((name) => {
      const line = lines.find((l) => l.includes(`/plugins/${name}`))
      return line ? [`${name}: ${(/ error=(.*)/.exec(line)?.[1] ?? "").slice(0, 200)}`] : []
    })
    .join("; ")
}

// ---------------------------------------------------------------------------------------------------------------
// The report: every check is one line; the counts include the installer's checks.

/**
 * @param {{ ok: number, failed: number }} counted  the installer's checks so far
 * @returns {Report}
 */
function makeReport(counted) {
  const counts = { ...counted }
  return {
    counts,
    ok(what, detail) {
      counts.ok++
      console.log(`${what}: ok${detail ? ` (${detail})` : ""}`)
    },
    failed(what, reason) {
      counts.failed++
      console.log(`${what}: failed: ${reason}`)
    },
  }
}

const tail = (/** @type {string} */ text, lines = 3) => text.trim().split("\n").slice(-lines).join(" ").slice(0, 300)

// ---------------------------------------------------------------------------------------------------------------
// The sandbox run.

/**
 * Copies the installed files into a new sandbox and prepares its project; returns the sandbox's paths.
 * @param {{ pluginsDir: string, files: string[], version: string }} options
 */
function fillSandbox({ pluginsDir, files, version }) {
  const root = makeSandboxRoot("opencode-guards-check.")
  const env = sandboxEnv(root, process.env.PATH ?? "/usr/bin:/bin")
  const configDir = path.join(env.XDG_CONFIG_HOME, "opencode")
  const project = path.join(root, "project")
  fs.mkdirSync(path.join(configDir, "plugins"), { recursive: true })
  for (const name of files) fs.copyFileSync(path.join(pluginsDir, name), path.join(configDir, "plugins", name))
  seedConfigDir(configDir, version)
  writeOpencodeConfig(configDir)
  fs.mkdirSync(path.join(project, ".opencode"))
  seedConfigDir(path.join(project, ".opencode"), version)
  fs.writeFileSync(path.join(project, ".opencode", "opencode-semantic-anchors.yaml"), PROBE_CONTRACT)
  const probeFile = path.join(project, "probe.txt")
  fs.writeFileSync(probeFile, "The doctor reads this file four times; the fourth read must be blocked.\n")
  // A git project, as opencode expects; without git it still runs.
  spawnSync("git", ["init", "-q", "."], { cwd: project, env, stdio: "ignore", timeout: 30_000 })
  return { root, env, project, probeFile, logDir: path.join(env.XDG_DATA_HOME, "opencode", "log") }
}

/**
 * `opencode debug config` lists each plugin it found as a file:// URL.
 * @param {Report} report
 * @param {Sandbox} sandbox
 * @param {string} bin
 * @param {string[]} plugins
 */
async function checkDiscovery(report, sandbox, bin, plugins) {
  const what = "plugins discovered (opencode debug config)"
  const env = { ...sandbox.env, FAKE_LLM_BASE_URL: "http://127.0.0.1:9/v1" }
  const r = await runToEnd(bin, ["debug", "config"], { cwd: sandbox.project, env, timeoutMs: DEBUG_CONFIG_TIMEOUT_MS })
  const out = path.join(sandbox.root, "debug-config.json")
  fs.writeFileSync(out, r.stdout)
  fs.writeFileSync(path.join(sandbox.root, "debug-config.err"), r.stderr)
  if (r.code !== 0) return report.failed(what, `opencode debug config failed: ${r.error ?? tail(r.stderr)}`)
  const missing = plugins.filter(
    (name) => !new RegExp(`"file://[^"]*/plugins/${name.replace(/\./g, "\\.")}"`).test(r.stdout),
  )
  if (missing.length) return report.failed(what, `not listed: ${missing.join(" ")}; see ${out}`)
  report.ok(what, plugins.join(" "))
}

/**
 * One `opencode run` against the probe script; returns whether it ran at all.
 * @param {Report} report
 * @param {Sandbox} sandbox
 * @param {string} bin
 * @param {string[]} plugins
 */
async function checkBlocking(report, sandbox, bin, plugins) {
  const want = { loop: plugins.includes("loop-guard.ts"), contract: plugins.includes("semantic-anchors.ts") }
  let llm
  try {
    llm = await startFakeLLM({
      script: probeScript(sandbox.probeFile, want),
      logFile: path.join(sandbox.root, "requests.jsonl"),
    })
  } catch (error) {
    report.failed("blocking run", `the scripted model did not start: ${short(error)}`)
    return false
  }
  try {
    const env = { ...sandbox.env, FAKE_LLM_BASE_URL: llm.baseURL }
    const args = ["run", "--format", "json", "--model", MODEL, "install.sh doctor run"]
    const r = await runToEnd(bin, args, { cwd: sandbox.project, env, timeoutMs: RUN_TIMEOUT_MS })
    const runFile = path.join(sandbox.root, "run.jsonl")
    fs.writeFileSync(runFile, r.stdout)
    fs.writeFileSync(path.join(sandbox.root, "run.err"), r.stderr)
    if (r.code !== 0) {
      const why = r.timedOut
        ? `no exit within ${RUN_TIMEOUT_MS / 1000} s`
        : `exit ${r.code}: ${r.error ?? tail(r.stderr)}`
      report.failed("opencode run in the sandbox", why)
    }
    const calls = toolCalls(r.stdout)
    /** @param {string} what @param {Verdict} verdict */
    const say = (what, verdict) => (verdict.ok ? report.ok(what, verdict.detail) : report.failed(what, verdict.detail))
    if (want.loop) say("loop-guard blocks the 4th identical read", loopVerdict(calls, llm.requests))
    if (want.contract) say("semantic-anchors blocks a contract", contractVerdict(calls, llm.requests))
    return true
  } finally {
    await llm.close()
  }
}

/**
 * opencode logs a plugin whose server() threw as "failed to load plugin" and goes on without it.
 * @param {Report} report
 * @param {Sandbox} sandbox
 * @param {string[]} plugins
 */
function checkLoaded(report, sandbox, plugins) {
  const what = "plugins loaded (opencode's log)"
  const files = fs.existsSync(sandbox.logDir) ? fs.readdirSync(sandbox.logDir).filter((f) => f.endsWith(".log")) : []
  const log = files.map((f) => fs.readFileSync(path.join(sandbox.logDir, f), "utf8")).join("")
  if (!log) return report.failed(what, `opencode wrote no log under ${sandbox.logDir}`)
  const failures = loadFailures(log, plugins)
  if (failures) return report.failed(what, `opencode logged 'failed to load plugin' for ${failures}`)
  report.ok(what, `no 'failed to load plugin' for ${plugins.join(" ")}`)
}

/**
 * The whole sandbox part of the doctor; returns the exit code.
 * @param {{ bin: string, version: string, pluginsDir: string, files: string[], untested: boolean,
 *           counted: { ok: number, failed: number } }} options
 */
export async function runDoctor({ bin, version, pluginsDir, files, untested, counted }) {
  const report = makeReport(counted)
  const plugins = files.filter((f) => f.endsWith(".ts"))
  let sandbox
  try {
    sandbox = fillSandbox({ pluginsDir, files, version })
  } catch (error) {
    report.failed("sandbox", `could not prepare a sandbox under ${process.env.TMPDIR || "/tmp"}: ${short(error)}`)
    console.log(`${report.counts.ok} ok, ${report.counts.failed} failed`)
    return EXIT_CHECK_FAILED
  }
  const removeSandbox = () => fs.rmSync(sandbox.root, { recursive: true, force: true })
  const onSignal = () => (removeSandbox(), process.exit(130))
  process.once("SIGINT", onSignal)
  process.once("SIGTERM", onSignal)

  await checkDiscovery(report, sandbox, bin, plugins)
  if (await checkBlocking(report, sandbox, bin, plugins)) checkLoaded(report, sandbox, plugins)

  console.log(`${report.counts.ok} ok, ${report.counts.failed} failed`)
  if (report.counts.failed > 0) {
    console.log(
      `the sandbox is kept for a look: ${sandbox.root} (opencode's log: ${sandbox.logDir}/; delete it when done)`,
    )
    return EXIT_CHECK_FAILED
  }
  removeSandbox()
  if (untested) {
    console.log(
      `the installed plugins load and block in this opencode ${version}, a version the end-to-end suite has not ` +
        "tested: this check is the proof on this machine (default settings, one run). Restart opencode if it is running.",
    )
  } else {
    console.log("the installed plugins load and block in this opencode. Restart opencode if it is running.")
  }
  return 0
}

// ---------------------------------------------------------------------------------------------------------------
// CLI (install.sh calls it; not meant to be run by hand, though it can be).

/** @param {string[]} argv */
async function main(argv) {
  const [command, ...rest] = argv
  if (command === "version" && rest.length === 1) {
    const version = opencodeVersion(rest[0], process.env.PATH ?? "/usr/bin:/bin")
    if (version) console.log(version)
    return version ? 0 : 1
  }
  if (command === "run") {
    const { values, positionals } = parseArgs({
      args: rest,
      allowPositionals: true,
      options: {
        opencode: { type: "string" },
        version: { type: "string" },
        "plugins-dir": { type: "string" },
        files: { type: "string" },
        untested: { type: "boolean", default: false },
        counted: { type: "string", default: "0,0" },
      },
    })
    const [ok, failed] = (values.counted ?? "0,0").split(",").map(Number)
    if (values.opencode && values.version && values["plugins-dir"] && values.files && positionals.length === 0) {
      return runDoctor({
        bin: values.opencode,
        version: values.version,
        pluginsDir: values["plugins-dir"],
        files: values.files.split(" ").filter(Boolean),
        untested: values.untested ?? false,
        counted: { ok: ok || 0, failed: failed || 0 },
      })
    }
  }
  process.stderr.write(
    "usage: node doctor/check.mjs version OPENCODE\n" +
      '       node doctor/check.mjs run --opencode BIN --version V --plugins-dir DIR --files "A B" [--untested] [--counted OK,FAILED]\n' +
      "(./install.sh --check runs it)\n",
  )
  return 2
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main(process.argv.slice(2))
}

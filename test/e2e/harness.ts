// End-to-end harness: a real opencode (the pinned devDependency, or OPENCODE_GUARDS_OPENCODE_BIN) in a throw-away
// sandbox, talking to the scripted fake model. The sandbox (environment, seeded config dirs, opencode.json) and the
// model are the doctor's own, doctor/sandbox.mjs and doctor/fake-llm.mjs. Recipe and host facts:
// ../shared/opencode-host.md.
//
// What it guarantees:
// - Every path opencode or install.sh could write (HOME, XDG_*, TMPDIR) lives in a fresh temp dir: the developer's
//   real ~/.config/opencode is never read or written.
// - The plugins get into the sandbox only through the project's own ./install.sh (HOME and XDG_CONFIG_HOME pointing
//   into the sandbox, nothing else), the way a user installs them.
// - No network outside 127.0.0.1: the config dirs are pre-seeded so opencode's embedded npm has nothing to install,
//   and npm's registry is pointed at a closed local port in case it tries anyway; model and update fetches are off.
// - The fake model server is listening before opencode starts (opencode would otherwise retry for ~70 s).

import { spawn, spawnSync, type ChildProcess } from "node:child_process"
import fs from "node:fs"
import path from "node:path"
import { startFakeLLM } from "../../doctor/fake-llm.mjs"
import {
  MODEL,
  makeSandboxRoot,
  opencodeVersion,
  sandboxEnv,
  seedConfigDir,
  writeOpencodeConfig,
} from "../../doctor/sandbox.mjs"

export const REPO = path.resolve(import.meta.dir, "../..")
/**
 * The opencode under test: $OPENCODE_GUARDS_OPENCODE_BIN (the version matrix, `npm run test:hosts`, sets it to a
 * release installed in its cache), else the pinned devDependency.
 */
export const OPENCODE_BIN = process.env.OPENCODE_GUARDS_OPENCODE_BIN || path.join(REPO, "node_modules/.bin/opencode")
export { MODEL }
/** The PATH of every sandbox: the opencode under test first, then the dev toolchain, then the caller's PATH. */
const SANDBOX_PATH = [
  path.dirname(OPENCODE_BIN),
  path.join(REPO, "node_modules/.bin"),
  process.env.PATH ?? "/usr/bin:/bin",
].join(":")
/** The version the opencode under test reports (the config dirs are seeded with it). */
export const OPENCODE_VERSION = opencodeVersion(OPENCODE_BIN, SANDBOX_PATH)
if (!OPENCODE_VERSION) throw new Error(`${OPENCODE_BIN} --version reported no version: is it an opencode executable?`)

/**
 * One reply of the scripted model; `usage.prompt_tokens` is the prompt size it reports (default 10). A text step may
 * stream: its `reasoning` then its `text`, cut every `chunk` characters (or given as pieces), `delayMs` between pieces
 * (doctor/fake-llm.mjs, header).
 */
export type Step = (
  { tool: string; args?: unknown } | { tools: { tool: string; args?: unknown }[] } | { text: string } | StreamedStep
) & { usage?: { prompt_tokens: number } }

export type StreamedStep = {
  reasoning?: string | string[]
  text?: string | string[]
  chunk?: number
  delayMs?: number
}

export interface FakeLLM {
  baseURL: string
  port: number
  /** Every request body in arrival order; `_fake.title` marks title requests, `_fake.step` the script step. */
  requests: any[]
  close(): Promise<void>
}

export interface Sandbox {
  root: string
  home: string
  /** $XDG_CONFIG_HOME/opencode: where install.sh puts the plugins and where opencode.json lives. */
  configDir: string
  dataDir: string
  /** The small git project opencode runs in. */
  project: string
  env: Record<string, string>
  installOutput: string
  /**
   * Every line opencode wrote to its log files so far. Under `run` the file can miss its last lines (the process
   * exits before its writer flushes): assert on log lines of `run` through `--print-logs` (stderr) instead.
   */
  log(): string
  cleanup(): void
}

export interface SandboxOptions {
  /** Files of the project, relative path -> content (committed to its git repo). */
  files?: Record<string, string>
  /** Files written into the global config dir after install (e.g. a global semantic-anchors YAML). */
  configFiles?: Record<string, string>
  /** Extra top-level keys merged into the sandbox's opencode.json (e.g. a permission rule). */
  opencode?: Record<string, unknown>
  /** Extra install.sh arguments, e.g. ["--only", "loop-guard"] (default: none, both plugins). */
  install?: string[]
}

export function createSandbox(opts: SandboxOptions = {}): Sandbox {
  const root = makeSandboxRoot("oc-e2e-")
  const env = sandboxEnv(root, SANDBOX_PATH)
  const configDir = path.join(env.XDG_CONFIG_HOME, "opencode")
  const project = path.join(root, "project")

  // Install the plugins exactly as a user does.
  // A host chosen through OPENCODE_GUARDS_OPENCODE_BIN may be outside the supported range on purpose (the matrix
  // finds where the range ends): install despite the version gate there, which test/install.test.ts covers.
  const gate = process.env.OPENCODE_GUARDS_OPENCODE_BIN ? ["--force"] : []
  const install = spawnSync("bash", [path.join(REPO, "install.sh"), ...gate, ...(opts.install ?? [])], {
    cwd: env.HOME,
    env: { PATH: env.PATH, HOME: env.HOME, XDG_CONFIG_HOME: env.XDG_CONFIG_HOME, TMPDIR: env.TMPDIR },
    encoding: "utf8",
  })
  const installOutput = `${install.stdout}${install.stderr}`
  if (install.status !== 0) throw new Error(`install.sh failed (exit ${install.status}):\n${installOutput}`)

  seedConfigDir(configDir, OPENCODE_VERSION)
  writeOpencodeConfig(configDir, opts.opencode)
  for (const [rel, content] of Object.entries(opts.configFiles ?? {})) {
    fs.mkdirSync(path.dirname(path.join(configDir, rel)), { recursive: true })
    fs.writeFileSync(path.join(configDir, rel), content)
  }

  const files = { "README.md": "# e2e project\n", ...(opts.files ?? {}) }
  for (const [rel, content] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(project, rel)), { recursive: true })
    fs.writeFileSync(path.join(project, rel), content)
  }
  if (fs.existsSync(path.join(project, ".opencode"))) seedConfigDir(path.join(project, ".opencode"), OPENCODE_VERSION)
  const git = (...args: string[]) => {
    const r = spawnSync("git", args, { cwd: project, env, encoding: "utf8" })
    if (r.status !== 0) throw new Error(`git ${args.join(" ")}: ${r.stderr}`)
  }
  git("init", "-q", "-b", "main")
  git("add", "-A")
  git("commit", "-q", "-m", "e2e fixture")

  const logDir = path.join(env.XDG_DATA_HOME, "opencode", "log")
  return {
    root,
    home: env.HOME,
    configDir,
    dataDir: env.XDG_DATA_HOME,
    project,
    env,
    installOutput,
    log: () =>
      fs.existsSync(logDir)
        ? fs
            .readdirSync(logDir)
            .sort()
            .map((f) => fs.readFileSync(path.join(logDir, f), "utf8"))
            .join("")
        : "",
    cleanup: () => fs.rmSync(root, { recursive: true, force: true }),
  }
}

export type BeforeReply = (body: any) => Promise<void> | void
/** Answers a request with this step instead of the script's (undefined: the script's step `stepNo`). */
export type PickStep = (body: any, stepNo: number) => Step | undefined

export async function fakeLLM(
  script: Step[],
  logFile?: string,
  beforeReply?: BeforeReply,
  pickStep?: PickStep,
): Promise<FakeLLM> {
  const llm: FakeLLM = await startFakeLLM({ script, logFile, beforeReply, pickStep })
  // Prove it is listening before any opencode starts: a refused connection costs ~70 s of opencode retries.
  const res = await fetch(`${llm.baseURL}/models`)
  if (res.status !== 404) throw new Error(`fake model server not answering at ${llm.baseURL}`)
  return llm
}

// ---------------------------------------------------------------------------------------------------------------
// Reading what happened

/** The tool messages of one request: what the model saw as results of its previous calls. */
export function toolMessages(request: any): { tool_call_id: string; content: string }[] {
  return (request?.messages ?? [])
    .filter((m: any) => m.role === "tool")
    .map((m: any) => ({ tool_call_id: m.tool_call_id, content: contentText(m.content) }))
}

function contentText(content: unknown): string {
  if (typeof content === "string") return content
  if (Array.isArray(content)) return content.map((c: any) => (typeof c === "string" ? c : (c?.text ?? ""))).join("")
  return JSON.stringify(content)
}

/** The agent-loop requests (title requests left out), in order. */
export function agentRequests(llm: FakeLLM): any[] {
  return llm.requests.filter((r) => !r._fake?.title)
}

/** The tool result the model saw for the call made in script step `step` (index `i` for parallel calls). */
export function resultSeenFor(llm: FakeLLM, step: number, i = 0): string | undefined {
  const next = agentRequests(llm).find((r) => r._fake.step === step + 1)
  if (!next) return undefined
  const assistants = next.messages.filter((m: any) => m.role === "assistant")
  const call = assistants[step]?.tool_calls?.[i]
  if (!call) return undefined
  return toolMessages(next).find((t) => t.tool_call_id === call.id)?.content
}

/** The user messages' text of a request. */
export function userTexts(request: any): string[] {
  return (request?.messages ?? []).filter((m: any) => m.role === "user").map((m: any) => contentText(m.content))
}

// ---------------------------------------------------------------------------------------------------------------
// opencode run

export interface RunResult {
  code: number | null
  stdout: string
  stderr: string
  /** The JSONL events of `--format json`. */
  events: any[]
  llm: FakeLLM
}

/** Tool parts from `run --format json` events, in order: `{tool, status, input, output?, error?}`. */
export function toolParts(
  events: any[],
): { tool: string; status: string; input: any; output?: string; error?: string }[] {
  return events
    .filter((e) => e.type === "tool_use" && e.part?.type === "tool")
    .map((e) => ({
      tool: e.part.tool,
      status: e.part.state?.status,
      input: e.part.state?.input,
      output: e.part.state?.output,
      error: e.part.state?.error,
    }))
}

function collect(child: ChildProcess): { out: () => string; err: () => string } {
  let out = ""
  let err = ""
  child.stdout?.setEncoding("utf8").on("data", (d: string) => (out += d))
  child.stderr?.setEncoding("utf8").on("data", (d: string) => (err += d))
  return { out: () => out, err: () => err }
}

export async function runOpencode(
  sb: Sandbox,
  opts: { script: Step[]; prompt?: string; args?: string[]; timeoutMs?: number },
): Promise<RunResult> {
  const llm = await fakeLLM(opts.script, path.join(sb.root, "requests.jsonl"))
  try {
    const args = ["run", "--format", "json", "--model", MODEL, ...(opts.args ?? [])]
    if (opts.prompt !== undefined) args.push(opts.prompt)
    const child = spawn(OPENCODE_BIN, args, {
      cwd: sb.project,
      env: { ...sb.env, PWD: sb.project, FAKE_LLM_BASE_URL: llm.baseURL },
      stdio: ["ignore", "pipe", "pipe"],
    })
    const io = collect(child)
    const code = await waitExit(child, opts.timeoutMs ?? 90_000)
    const stdout = io.out()
    const events = stdout
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => {
        try {
          return JSON.parse(l)
        } catch {
          return { type: "unparsed", line: l }
        }
      })
    return { code, stdout, stderr: io.err(), events, llm }
  } finally {
    await llm.close()
  }
}

function waitExit(child: ChildProcess, timeoutMs: number): Promise<number | null> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      reject(new Error(`opencode did not exit within ${timeoutMs} ms`))
    }, timeoutMs)
    child.once("exit", (code) => {
      clearTimeout(timer)
      resolve(code)
    })
  })
}

// ---------------------------------------------------------------------------------------------------------------
// opencode serve

export interface Serve {
  url: string
  llm: FakeLLM
  /** Every event seen on GET /event so far (parsed `data:` payloads). */
  events: any[]
  api(method: string, pathname: string, body?: unknown): Promise<{ status: number; json: any; text: string }>
  createSession(): Promise<string>
  /** POST /session/:id/message; resolves when the agent loop for that message has finished. */
  prompt(sessionID: string, text: string, agent?: string): Promise<any>
  /** POST /session/:id/command. */
  command(
    sessionID: string,
    command: string,
    args: string,
    agent?: string,
  ): Promise<{ status: number; json: any; text: string }>
  waitForEvent(pred: (e: any) => boolean, timeoutMs?: number): Promise<any>
  stderr(): string
  close(): Promise<void>
}

export async function startServe(
  sb: Sandbox,
  opts: { script: Step[]; beforeReply?: BeforeReply; pickStep?: PickStep },
): Promise<Serve> {
  const llm = await fakeLLM(opts.script, path.join(sb.root, "requests.jsonl"), opts.beforeReply, opts.pickStep)
  const child = spawn(OPENCODE_BIN, ["serve", "--port", "0", "--hostname", "127.0.0.1"], {
    cwd: sb.project,
    env: { ...sb.env, PWD: sb.project, FAKE_LLM_BASE_URL: llm.baseURL },
    stdio: ["ignore", "pipe", "pipe"],
  })
  const io = collect(child)
  let url: string
  try {
    url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`opencode serve printed no URL:\n${io.out()}\n${io.err()}`)),
        60_000,
      )
      const check = () => {
        const m = /(http:\/\/127\.0\.0\.1:\d+)/.exec(io.out() + io.err())
        if (m) {
          clearTimeout(timer)
          resolve(m[1])
        }
      }
      child.stdout?.on("data", check)
      child.stderr?.on("data", check)
      child.once("exit", (c) => reject(new Error(`opencode serve exited (${c}):\n${io.out()}\n${io.err()}`)))
    })
  } catch (e) {
    child.kill("SIGKILL")
    await llm.close()
    throw e
  }

  const events: any[] = []
  const waiters: { pred: (e: any) => boolean; resolve: (e: any) => void }[] = []
  const abort = new AbortController()
  const eventStream = (async () => {
    const res = await fetch(`${url}/event`, { signal: abort.signal })
    const reader = res.body!.getReader()
    const dec = new TextDecoder()
    let buf = ""
    for (;;) {
      const { value, done } = await reader.read()
      if (done) return
      buf += dec.decode(value, { stream: true })
      let idx: number
      while ((idx = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, idx)
        buf = buf.slice(idx + 2)
        const data = block
          .split("\n")
          .filter((l) => l.startsWith("data:"))
          .map((l) => l.slice(5).trim())
          .join("")
        if (!data) continue
        let e: any
        try {
          e = JSON.parse(data)
        } catch {
          continue
        }
        events.push(e)
        for (const w of [...waiters]) {
          if (w.pred(e)) {
            waiters.splice(waiters.indexOf(w), 1)
            w.resolve(e)
          }
        }
      }
    }
  })().catch(() => {})

  const api = async (method: string, pathname: string, body?: unknown) => {
    const res = await fetch(`${url}${pathname}`, {
      method,
      headers: body === undefined ? {} : { "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    const text = await res.text()
    let json: any
    try {
      json = JSON.parse(text)
    } catch {
      json = undefined
    }
    return { status: res.status, json, text }
  }
  const [providerID, modelID] = MODEL.split("/")
  const serve: Serve = {
    url,
    llm,
    events,
    api,
    async createSession() {
      const r = await api("POST", "/session", {})
      if (r.status !== 200 || !r.json?.id) throw new Error(`POST /session: ${r.status} ${r.text}`)
      return r.json.id
    },
    async prompt(sessionID, text, agent = "build") {
      const r = await api("POST", `/session/${sessionID}/message`, {
        agent,
        model: { providerID, modelID },
        parts: [{ type: "text", text }],
      })
      if (r.status !== 200) throw new Error(`POST /session/${sessionID}/message: ${r.status} ${r.text}`)
      return r.json
    },
    command(sessionID, command, args, agent = "build") {
      return api("POST", `/session/${sessionID}/command`, { command, arguments: args, agent, model: MODEL })
    },
    waitForEvent(pred, timeoutMs = 30_000) {
      const seen = events.find(pred)
      if (seen) return Promise.resolve(seen)
      return new Promise((resolve, reject) => {
        const w = { pred, resolve: (e: any) => (clearTimeout(timer), resolve(e)) }
        const timer = setTimeout(() => {
          waiters.splice(waiters.indexOf(w), 1)
          reject(new Error("event not seen within timeout"))
        }, timeoutMs)
        waiters.push(w)
      })
    },
    stderr: () => io.err(),
    async close() {
      abort.abort()
      await eventStream
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once("exit", r))
        child.kill("SIGTERM")
        const t = setTimeout(() => child.kill("SIGKILL"), 5000)
        await exited
        clearTimeout(t)
      }
      await llm.close()
    },
  }
  return serve
}

// TUI driver: the real opencode TUI (`opencode`, no subcommand) in a sandbox from ./harness, inside tmux on a private
// socket, talking to the scripted fake model. Why: some of what the plugins do is only visible to the person at the
// keyboard (toasts, permission dialogs, red tool rows), and only the TUI shows it.
//
// How:
// - `tmux -L <unique socket>` with its socket dir (TMUX_TMPDIR) inside the sandbox, a 200x50 window, no status line,
//   and a pane that stays after opencode exits (so a crash is still on screen for the failure message). The tmux
//   server inherits the sandbox env plus FAKE_LLM_BASE_URL, so opencode sees nothing of the real user's setup.
// - Typing is `send-keys -l` (literal text) and `send-keys <key>` (tmux key names: Enter, Escape, Up, Down, Tab, C-c).
// - A background poller captures the pane (`capture-pane -p`) every POLL_MS and keeps each distinct frame, so a toast
//   shown for ~5 s is never missed between two waits. `waitForScreen` looks through the kept frames; `seen` does too.
// - Every wait is bounded; `close()` kills every process the tmux server started (found by parent pid, killed by pid),
//   then the tmux server itself (by pid), also when a test failed or timed out (`closeAllTuis`, for afterAll/afterEach,
//   and a process exit hook as the last resort).
//
// Tuning: POLL_MS (frame rate), MAX_FRAMES (memory bound), the start-up timeout in `startTui` (opencode boots in
// ~3-6 s here, slower when the machine is loaded).

import { execFile, spawnSync } from "node:child_process"
import fs from "node:fs"
import path from "node:path"
import { promisify } from "node:util"
import { fakeLLM, MODEL, OPENCODE_BIN, type BeforeReply, type FakeLLM, type Sandbox, type Step } from "./harness"

const run = promisify(execFile)

export const COLS = 200
export const ROWS = 50
const POLL_MS = 150
const MAX_FRAMES = 600
/**
 * What the TUI's prompt box shows once it is ready for input (the home screen and the session view): the agent and
 * the sandbox model's name (doctor/sandbox.mjs names it "fake-model").
 */
const READY = /Build · fake-model\b/

export interface Frame {
  /** ms since the TUI was started. */
  at: number
  text: string
}

export interface Tui {
  llm: FakeLLM
  /** The tmux socket name (`tmux -L <socket>`), for manual inspection while debugging. */
  socket: string
  /** Distinct frames seen so far, oldest first (at most MAX_FRAMES: the oldest are dropped). */
  frames: Frame[]
  /** A fresh capture of the pane as plain text. */
  screen(): Promise<string>
  /** A fresh capture with colours and attributes as SGR escape sequences (`capture-pane -e`). */
  screenAnsi(): Promise<string>
  /** Types text literally (no key names are interpreted). */
  type(text: string): Promise<void>
  /** Presses tmux keys, in order: "Enter", "Escape", "Up", "Down", "Left", "Right", "Tab", "C-c", ... */
  press(...keys: string[]): Promise<void>
  /** Types a line and presses Enter (a prompt, or a slash command such as `/anchor reload`). */
  submit(text: string): Promise<void>
  /**
   * Answers the permission dialog showing now (waits up to `timeoutMs` for `Permission required`): "once" is Enter,
   * "always" is Right, Enter, then Confirm (Enter) on the "Always allow" screen, "reject" is Escape. Resolves with
   * the dialog's frame (for "always", the "Always allow" screen's frame, which lists the request's `always` entries).
   */
  answerPermission(choice: "once" | "always" | "reject", timeoutMs?: number): Promise<string>
  /** The number of frames seen so far: pass it as `since` to look only at what came after this moment. */
  mark(): number
  /**
   * Resolves with the first kept frame (from index `since`, default 0) that satisfies `pred`, polling until
   * `timeoutMs`; rejects with the last frame and `what` in the message when none did.
   */
  waitForScreen(
    pred: (screen: string) => boolean,
    timeoutMs: number,
    opts?: { since?: number; what?: string },
  ): Promise<string>
  /** The first kept frame (from `since`) that satisfies `pred`, without waiting. */
  seen(pred: (screen: string) => boolean, since?: number): string | undefined
  /** Kills opencode and everything else the tmux server started, then the server, then the fake model. Idempotent. */
  close(): Promise<void>
}

export interface TuiOptions {
  script: Step[]
  beforeReply?: BeforeReply
  /** Extra opencode arguments after `--model fake/fake-model`. */
  args?: string[]
  /** How long to wait for the prompt box (default 90 s: slow when the machine is loaded). */
  startTimeoutMs?: number
}

// ---------------------------------------------------------------------------------------------------------------
// Whether the TUI tests can run here

export type TuiAvailability = { ok: true } | { ok: false; reason: string }

/** tmux present and usable. The reason is written for the person reading `npm test` output. */
export function tuiAvailability(): TuiAvailability {
  const r = spawnSync("tmux", ["-V"], { encoding: "utf8" })
  if (r.error || r.status !== 0) return { ok: false, reason: "tmux not found (apt-get install tmux)" }
  return { ok: true }
}

/** Under CI the TUI tests never skip: a missing tmux is a failure there (`.ci/run` installs it). */
export function underCI(): boolean {
  const ci = (process.env.CI ?? "").toLowerCase()
  return ci !== "" && ci !== "0" && ci !== "false"
}

// ---------------------------------------------------------------------------------------------------------------
// Reading a screen

/** Whitespace-insensitive text, for matching a sentence the TUI wrapped over several lines. */
export const flat = (text: string) => text.replace(/\s+/g, "")

/**
 * The text inside the toast box of a frame (top right, drawn between two `┃` borders), its lines joined with spaces;
 * "" when no toast shows. Match it with `flat` on both sides: the TUI wraps inside words too ("run /" + "anchor").
 */
export function toastText(frame: string): string {
  const lines = frame.split("\n")
  const out: string[] = []
  // The toast sits in the first lines: below the top bar, above the conversation. A line is a toast line when it
  // holds two borders; the text is what lies between the last two.
  for (const line of lines.slice(0, 16)) {
    const right = line.lastIndexOf("┃")
    const left = line.lastIndexOf("┃", right - 1)
    if (left < 0 || right - left < 20) continue
    const text = line.slice(left + 1, right).trim()
    if (text) out.push(text)
  }
  return out.join(" ")
}

export type RGB = [number, number, number]

/** xterm's 256-colour palette as RGB (what tmux stores for a TERM without true colour). */
function paletteRGB(n: number): RGB {
  const base: RGB[] = [
    [0, 0, 0],
    [205, 0, 0],
    [0, 205, 0],
    [205, 205, 0],
    [0, 0, 238],
    [205, 0, 205],
    [0, 205, 205],
    [229, 229, 229],
    [127, 127, 127],
    [255, 0, 0],
    [0, 255, 0],
    [255, 255, 0],
    [92, 92, 255],
    [255, 0, 255],
    [0, 255, 255],
    [255, 255, 255],
  ]
  if (n < 16) return base[n]
  if (n < 232) {
    const level = (v: number) => (v === 0 ? 0 : 55 + 40 * v)
    const i = n - 16
    return [level(Math.floor(i / 36)), level(Math.floor(i / 6) % 6), level(i % 6)]
  }
  const grey = 8 + 10 * (n - 232)
  return [grey, grey, grey]
}

/**
 * For each screen line containing `needle`: the foreground colour at the needle's first character, read from a
 * `screenAnsi()` capture (SGR 38;5;n, 38;2;r;g;b, 30-37, 90-97; null for the terminal default).
 */
export function colourOf(ansiScreen: string, needle: string): { line: string; fg: RGB | null }[] {
  const rows: { line: string; fg: RGB | null }[] = []
  for (const raw of ansiScreen.split("\n")) {
    // One pass: the plain text, and the foreground colour of each of its characters.
    let plain = ""
    const colours: (RGB | null)[] = []
    let fg: RGB | null = null
    for (const part of raw.split(/(\x1b\[[0-9;]*m)/)) {
      const m = /^\x1b\[([0-9;]*)m$/.exec(part)
      if (!m) {
        for (const ch of part) ((plain += ch), colours.push(fg))
        continue
      }
      const codes = (m[1] || "0").split(";").map(Number)
      for (let k = 0; k < codes.length; k++) {
        const c = codes[k]
        if (c === 0 || c === 39) fg = null
        else if (c >= 30 && c <= 37) fg = paletteRGB(c - 30)
        else if (c >= 90 && c <= 97) fg = paletteRGB(c - 90 + 8)
        else if ((c === 38 || c === 48) && codes[k + 1] === 5) {
          if (c === 38) fg = paletteRGB(codes[k + 2])
          k += 2
        } else if ((c === 38 || c === 48) && codes[k + 1] === 2) {
          if (c === 38) fg = [codes[k + 2], codes[k + 3], codes[k + 4]]
          k += 4
        }
      }
    }
    const at = plain.indexOf(needle)
    // Index in code points: `colours` has one entry per code point, `indexOf` counts UTF-16 units.
    if (at >= 0) rows.push({ line: plain.trimEnd(), fg: colours[[...plain.slice(0, at)].length] ?? null })
  }
  return rows
}

/** A red-ish colour (opencode's theme draws failed tool rows in a pink red, 256-colour 168 = rgb 215,95,135 here). */
export const reddish = (c: RGB | null) => c !== null && c[0] >= 150 && c[0] - c[1] >= 60 && c[0] - c[2] >= 40

// ---------------------------------------------------------------------------------------------------------------
// Processes, found and killed by id

/** Every live descendant of `root` (children first seen by their parent pid in /proc), deepest last. */
function descendants(root: number): number[] {
  const parentOf = new Map<number, number>()
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, "utf8")
      // pid (comm) state ppid ...: comm may contain spaces and parentheses, so split after the last ")".
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
      parentOf.set(Number(entry), ppid)
    } catch {
      // the process ended while we looked
    }
  }
  const out: number[] = []
  const queue = [root]
  while (queue.length) {
    const pid = queue.shift()!
    for (const [child, parent] of parentOf)
      if (parent === pid && !out.includes(child)) (out.push(child), queue.push(child))
  }
  return out
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

function signal(pids: number[], sig: NodeJS.Signals) {
  for (const pid of pids) {
    try {
      process.kill(pid, sig)
    } catch {
      // already gone
    }
  }
}

const live = new Set<Tui>()
const syncKills = new Map<Tui, () => void>()

/** Closes every TUI not closed yet: call it from afterAll/afterEach so a failed or timed-out test leaves nothing. */
export async function closeAllTuis() {
  await Promise.all([...live].map((tui) => tui.close()))
}

// Last resort when the test process exits without afterAll (e.g. a crash): synchronous SIGKILL by pid.
process.once("exit", () => {
  for (const kill of syncKills.values()) kill()
})

// ---------------------------------------------------------------------------------------------------------------
// The driver

let counter = 0

export async function startTui(sb: Sandbox, opts: TuiOptions): Promise<Tui> {
  const availability = tuiAvailability()
  if (!availability.ok) throw new Error(`TUI driver: ${availability.reason}`)
  const llm = await fakeLLM(opts.script, path.join(sb.root, "requests.jsonl"), opts.beforeReply)
  const socket = `oc-tui-${process.pid}-${++counter}`
  const tmuxDir = path.join(sb.root, "tmux")
  fs.mkdirSync(tmuxDir, { recursive: true })
  const conf = path.join(tmuxDir, "tmux.conf")
  fs.writeFileSync(
    conf,
    [
      "set -g status off", // the whole 200x50 is opencode's
      "set -g remain-on-exit on", // a crashed opencode stays on screen for the failure message
      "set -sg escape-time 0", // Escape reaches opencode at once
      "set -g history-limit 2000",
      "",
    ].join("\n"),
  )
  const env: Record<string, string> = {
    ...sb.env,
    PWD: sb.project,
    FAKE_LLM_BASE_URL: llm.baseURL,
    TMUX_TMPDIR: tmuxDir,
  }
  delete env.TMUX
  delete env.TMUX_PANE
  const tmux = (...args: string[]) => run("tmux", ["-L", socket, ...args], { env, encoding: "utf8" })
  const tmuxSync = (...args: string[]) => spawnSync("tmux", ["-L", socket, ...args], { env, encoding: "utf8" })

  const command = [OPENCODE_BIN, "--model", MODEL, ...(opts.args ?? [])]
  const size = ["-x", String(COLS), "-y", String(ROWS)]
  let ids: number[]
  try {
    await tmux("-f", conf, "new-session", "-d", "-s", "tui", ...size, "-c", sb.project, "--", ...command)
    ids = (await tmux("display-message", "-p", "-t", "tui", "#{pid} #{pane_pid}")).stdout.trim().split(" ").map(Number)
  } catch (error) {
    // Nothing is tracked yet: stop this socket's server (if it came up) and the model, then report.
    tmuxSync("kill-server")
    await llm.close()
    throw error
  }
  const [serverPid, panePid] = ids
  const started = Date.now()
  const frames: Frame[] = []
  const known = new Set<number>([panePid])
  let closed = false

  const capture = async (ansi = false) =>
    (await tmux("capture-pane", "-p", ...(ansi ? ["-e"] : []), "-t", "tui")).stdout
  const keep = (text: string) => {
    if (frames.length && frames[frames.length - 1].text === text) return
    frames.push({ at: Date.now() - started, text })
    if (frames.length > MAX_FRAMES) frames.shift()
  }
  // The poller: one capture at a time, every POLL_MS, until close. It also remembers opencode's processes by pid.
  const poller = (async () => {
    while (!closed) {
      try {
        keep(await capture())
        for (const pid of descendants(panePid)) known.add(pid)
      } catch {
        // the server is going away (close) or busy: the next round tries again
      }
      await new Promise((r) => setTimeout(r, POLL_MS))
    }
  })()

  const killSync = () => {
    const pids = [...new Set([...descendants(panePid), ...known])].filter(alive)
    signal(pids, "SIGKILL")
    if (alive(serverPid)) signal([serverPid], "SIGKILL")
  }

  const tui: Tui = {
    llm,
    socket,
    frames,
    screen: () => capture(),
    screenAnsi: () => capture(true),
    async type(text) {
      await tmux("send-keys", "-t", "tui", "-l", text)
    },
    async press(...keys) {
      for (const key of keys) await tmux("send-keys", "-t", "tui", key)
    },
    async submit(text) {
      await tui.type(text)
      // Let the prompt box take the text (and any autocomplete settle) before Enter.
      await new Promise((r) => setTimeout(r, 300))
      await tui.press("Enter")
    },
    async answerPermission(choice, timeoutMs = 60_000) {
      const since = tui.mark()
      const dialog = await tui.waitForScreen((s) => s.includes("Permission required"), timeoutMs, {
        since: Math.max(0, since - 1),
        what: "the permission dialog",
      })
      if (choice === "once") await tui.press("Enter")
      if (choice === "reject") await tui.press("Escape")
      if (choice !== "always") return dialog
      await tui.press("Right", "Enter")
      const always = await tui.waitForScreen((s) => s.includes("Always allow"), 10_000, {
        since,
        what: 'the "Always allow" screen',
      })
      await tui.press("Enter")
      return always
    },
    mark: () => frames.length,
    seen(pred, since = 0) {
      return frames.slice(since).find((f) => pred(f.text))?.text
    },
    async waitForScreen(pred, timeoutMs, o = {}) {
      const deadline = Date.now() + timeoutMs
      for (;;) {
        const hit = tui.seen(pred, o.since ?? 0)
        if (hit !== undefined) return hit
        if (Date.now() > deadline || closed) {
          const last = frames[frames.length - 1]?.text ?? "(no frame captured)"
          throw new Error(
            `TUI: ${o.what ?? "expected screen"} not seen within ${timeoutMs} ms (${frames.length} frames kept); last frame:\n${last}`,
          )
        }
        await new Promise((r) => setTimeout(r, POLL_MS / 2))
      }
    },
    async close() {
      if (closed) return
      closed = true
      live.delete(tui)
      await poller
      // opencode first (TERM, then KILL after 3 s), by pid; then the tmux server, by pid.
      const pids = [...new Set([...descendants(panePid), ...known])].filter(alive)
      signal(pids, "SIGTERM")
      for (let i = 0; i < 30 && pids.some(alive); i++) await new Promise((r) => setTimeout(r, 100))
      signal(pids.filter(alive), "SIGKILL")
      tmuxSync("kill-server")
      for (let i = 0; i < 20 && alive(serverPid); i++) await new Promise((r) => setTimeout(r, 100))
      if (alive(serverPid)) signal([serverPid], "SIGKILL")
      syncKills.delete(tui)
      await llm.close()
    },
  }
  live.add(tui)
  syncKills.set(tui, killSync)

  try {
    await tui.waitForScreen((s) => READY.test(s), opts.startTimeoutMs ?? 90_000, { what: "opencode's prompt box" })
  } catch (error) {
    await tui.close()
    throw error
  }
  return tui
}

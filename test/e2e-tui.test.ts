// End-to-end in the real opencode TUI (issue 10): what the person at the keyboard sees, read from the screen of an
// `opencode` started in tmux (test/e2e/tui.ts) with both plugins installed by install.sh and the scripted fake model.
// Without tmux these tests are skipped with a line saying so (`npm test` repeats it at the end); under CI they never
// skip, a missing tmux fails them (`.ci/run` installs it).
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test"
import fs from "node:fs"
import path from "node:path"
import { createSandbox, resultSeenFor, type Sandbox, type SandboxOptions } from "./e2e/harness"
import {
  closeAllTuis,
  colourOf,
  flat,
  reddish,
  startTui,
  toastText,
  tuiAvailability,
  underCI,
  type Frame,
  type Tui,
} from "./e2e/tui"

const availability = tuiAvailability()
const run = availability.ok || underCI()
if (!run) console.log(`TUI tests skipped: ${availability.ok ? "" : availability.reason}`)
const tuiDescribe = run ? describe : describe.skip

// Each test drives one TUI; every wait inside is bounded well below this.
const TEST_TIMEOUT = 200_000
const NOTES = "hello notes, line one\n"

const sandboxes: Sandbox[] = []
afterEach(() => closeAllTuis())
afterAll(async () => {
  await closeAllTuis()
  sandboxes.forEach((sb) => sb.cleanup())
})

function sandbox(opts: SandboxOptions = {}) {
  const sb = createSandbox({ ...opts, files: { "notes.txt": NOTES, ...(opts.files ?? {}) } })
  sandboxes.push(sb)
  return sb
}

const readNotes = (sb: Sandbox) => ({ tool: "read", args: { filePath: path.join(sb.project, "notes.txt") } })
/** A frame whose toast box contains `text` (wrapping ignored). */
const toastShows = (text: string) => (frame: string) => flat(toastText(frame)).includes(flat(text))

// The driver's screen readers, on frames shaped like the ones captured (no tmux needed).
describe("TUI screen readers", () => {
  const pad = (left: string, right = "") => `${left.padEnd(100)}${right}`
  const frame = [
    "",
    pad("  ┃  say hello", "┃                                                          ┃"),
    pad("  ┃", "┃  semantic-anchors: 1 config problem (1 error); run /     ┃    Context"),
    pad("", "┃  anchor status                                           ┃    15 tokens"),
    pad("  ┃", "┃                                                          ┃"),
    "     → Read notes.txt",
  ].join("\n")

  test.each([
    ["a toast box, wrapped inside a word", frame, "semantic-anchors: 1 config problem (1 error); run / anchor status"],
    ["no toast: one border per line", "  ┃  say hello\n  ┃\n     → Read notes.txt", ""],
    ["two borders close together are not a toast", "  ┃ x ┃", ""],
  ])("toastText: %s", (_name, screen, expected) => {
    expect(toastText(screen)).toBe(expected)
  })

  test("flat matches a sentence across the TUI's wrapping", () => {
    expect(flat(toastText(frame))).toContain(flat("run /anchor status"))
    expect(flat(toastText(frame))).not.toContain(flat("loop-guard: blocked"))
  })

  test.each([
    [
      "256-colour red row",
      "\x1b[48;5;232m     \x1b[38;5;168m→\x1b[38;5;15m \x1b[38;5;168mRead notes.txt \x1b[38;5;15m",
      true,
    ],
    [
      "256-colour grey row",
      "\x1b[48;5;232m     \x1b[38;5;8m→\x1b[38;5;15m \x1b[38;5;8mRead notes.txt \x1b[38;5;15m",
      false,
    ],
    ["true-colour red row", "  \x1b[38;2;224;108;117mRead notes.txt\x1b[0m", true],
    ["basic red (31)", "  \x1b[31mRead notes.txt\x1b[0m", true],
    ["default colour after a reset", "\x1b[38;5;168mx\x1b[0m Read notes.txt", false],
  ])("colourOf + reddish: %s", (_name, line, red) => {
    const rows = colourOf(`header\n${line}\nfooter`, "Read notes.txt")
    expect(rows.length).toBe(1)
    expect(rows[0].line).toContain("Read notes.txt")
    expect(reddish(rows[0].fg)).toBe(red)
  })
})

tuiDescribe("e2e in the opencode TUI (tmux)", () => {
  test("tmux is available (under CI these tests never skip)", () => {
    if (!availability.ok) throw new Error(`TUI tests cannot run: ${availability.reason}; CI never skips them`)
  })

  test(
    "smoke: the TUI starts with both plugins installed, a typed prompt reaches the scripted model, its answer is on screen",
    async () => {
      const sb = sandbox()
      for (const plugin of ["loop-guard.ts", "semantic-anchors.ts"])
        expect(fs.existsSync(path.join(sb.configDir, "plugins", plugin))).toBe(true)
      const tui = await startTui(sb, { script: [{ text: "Hello from the scripted model." }] })
      await tui.submit("say hello")
      await tui.waitForScreen((s) => s.includes("Hello from the scripted model."), 90_000, { what: "the answer" })
      // The prompt went through the TUI to the model, and the screen is the session view with the prompt in it.
      expect(tui.llm.requests.some((r) => JSON.stringify(r.messages).includes("say hello"))).toBe(true)
      expect(await tui.screen()).toContain("say hello")
      // semantic-anchors is loaded in this TUI: its /anchor command is offered when "/" is typed.
      await tui.type("/anch")
      await tui.waitForScreen((s) => /\/anchor\s+semantic-anchors:/.test(s), 30_000, { what: "the /anchor command" })
    },
    TEST_TIMEOUT,
  )

  test(
    "a broken project contract file: `/anchor reload` shows semantic-anchors' config-problem toast on screen",
    async () => {
      const sb = sandbox({
        files: { ".opencode/opencode-semantic-anchors.yaml": "version: 1\ncontracts:\n  - id: [broken\n" },
      })
      const tui = await startTui(sb, { script: [{ text: "Hi from the model." }, { text: "Reloaded." }] })
      // A first message first: a toast sent while the home screen switches to the session view is painted over.
      await tui.submit("hello")
      await tui.waitForScreen((s) => s.includes("Hi from the model."), 90_000, { what: "the first answer" })
      // No toast showing before the command, so the one seen next is the reload's.
      await tui.waitForScreen((s) => toastText(s) === "", 20_000, { since: tui.mark(), what: "a screen without toast" })
      const since = tui.mark()
      await tui.submit("/anchor reload")
      const frame = await tui.waitForScreen(toastShows("semantic-anchors:"), 60_000, { since, what: "the toast" })
      expect(flat(toastText(frame))).toContain(flat("config problem"))
      expect(flat(toastText(frame))).toContain(flat("run /anchor status"))
    },
    TEST_TIMEOUT,
  )

  test(
    "the model's anchor_bypass asks the person in a permission dialog; Allow once grants one override",
    async () => {
      const sb = sandbox()
      const tui = await startTui(sb, {
        script: [
          { tool: "anchor_bypass", args: { reason: "the fixture needs a force-push" } },
          { text: "Bypass done." },
        ],
      })
      await tui.submit("push the fixture")
      const dialog = await tui.answerPermission("once", 90_000)
      expect(dialog).toContain("anchor-bypass")
      await tui.waitForScreen((s) => s.includes("Bypass done."), 60_000, { what: "the answer after the dialog" })
      expect(resultSeenFor(tui.llm, 0)).toContain("granted")
    },
    TEST_TIMEOUT,
  )

  describe("four identical reads: loop-guard blocks the 4th", () => {
    let tui: Tui
    let sb: Sandbox
    let frames: Frame[] = []
    let finalAnsi = ""
    beforeAll(async () => {
      sb = sandbox()
      const read = readNotes(sb)
      tui = await startTui(sb, { script: [read, read, read, read, { text: "I will stop reading." }] })
      await tui.submit("read the notes")
      await tui.waitForScreen((s) => s.includes("I will stop reading."), 90_000, { what: "the final answer" })
      // The 4th row turns red when its part ends in `error`; give the last repaint a moment.
      await tui.waitForScreen((s) => (s.match(/→ Read notes\.txt/g) ?? []).length === 4, 10_000, { what: "4 rows" })
      await new Promise((r) => setTimeout(r, 500))
      finalAnsi = await tui.screenAnsi()
      frames = [...tui.frames]
      await tui.close()
    }, TEST_TIMEOUT)

    test("the screen shows the 4th read as a red tool row (the first three grey); the model was told why", () => {
      const rows = colourOf(finalAnsi, "Read notes.txt")
      expect(rows.length).toBe(4)
      expect(rows.slice(0, 3).map((r) => reddish(r.fg))).toEqual([false, false, false])
      expect(reddish(rows[3].fg)).toBe(true)
      // Today the row carries no text: the block message reaches only the model (issue 10).
      expect(resultSeenFor(tui.llm, 3)).toContain("loop-guard blocked this read call")
    })

    // Issue 10, item 1: loop-guard tells the human with a toast on each block.
    test("the person sees loop-guard's toast on screen: `loop-guard: blocked ...`", () => {
      const frame = frames.find((f) => toastShows("loop-guard: blocked")(f.text))
      expect(frame).toBeDefined()
      expect(flat(toastText(frame!.text))).toContain(flat("read"))
    })
  })
})

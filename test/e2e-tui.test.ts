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

// Closing a TUI waits up to ~5 s for its processes to end (tui.ts): more than bun's 5 s hook default under load.
const CLOSE_TIMEOUT = 30_000

const sandboxes: Sandbox[] = []
afterEach(() => closeAllTuis(), CLOSE_TIMEOUT)
afterAll(async () => {
  await closeAllTuis()
  sandboxes.forEach((sb) => sb.cleanup())
}, CLOSE_TIMEOUT)

function sandbox(opts: SandboxOptions = {}) {
  const sb = createSandbox({ ...opts, files: { "notes.txt": NOTES, ...(opts.files ?? {}) } })
  sandboxes.push(sb)
  return sb
}

const readNotes = (sb: Sandbox) => ({ tool: "read", args: { filePath: path.join(sb.project, "notes.txt") } })
/** A frame whose toast box contains `text` (wrapping ignored). */
const toastShows = (text: string) => (frame: string) => flat(toastText(frame)).includes(flat(text))

const PROJECT_CONFIG = ".opencode/opencode-semantic-anchors.yaml"
// the default protection off: these rows are about a project contract (the protection's block has its own row)
const NO_FORCE_PUSH = `version: 1
settings:
  protection: off
contracts:
  - id: no-force-push
    description: Never rewrite shared history.
    mode: block
    trigger: { type: tool, tools: [bash], args: { command: { regex: '\\bgit\\s+push\\b.*\\s--force\\b' } } }
`
/** A force-push that leaves a line in push.log when it ran at all (there is no remote: git itself then fails). */
const forcePush = (branch: string) => ({
  tool: "bash",
  args: { command: `echo ${branch} >> push.log; git push --force origin ${branch}`, description: "Force-push" },
})
const pushRuns = (sb: Sandbox) => {
  const file = path.join(sb.project, "push.log")
  return fs.existsSync(file) ? fs.readFileSync(file, "utf8").split("\n").filter(Boolean).length : 0
}
/** Holds the scripted model's answer to step `step` for `ms`: the toast of the step before shows alone meanwhile. */
const holdStep = (step: number, ms: number) => async (body: any) => {
  if (body?._fake?.step === step) await new Promise((r) => setTimeout(r, ms))
}

/**
 * With TUI_CAPTURE_DIR set, the frames a test looked at are written there (`<name>.txt`), for the README's captures.
 * Off by default: the tests only read the screen.
 */
function keepCapture(name: string, frame: string) {
  const dir = process.env.TUI_CAPTURE_DIR
  if (!dir) return
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(path.join(dir, `${name}.txt`), frame)
}

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
      // From the last frame kept: a screen that no longer changes adds no new frame.
      await tui.waitForScreen((s) => toastText(s) === "", 20_000, {
        since: Math.max(0, tui.mark() - 1),
        what: "a screen without toast",
      })
      const since = tui.mark()
      await tui.submit("/anchor reload")
      const frame = await tui.waitForScreen(toastShows("semantic-anchors:"), 60_000, { since, what: "the toast" })
      expect(flat(toastText(frame))).toContain(flat("config problem"))
      expect(flat(toastText(frame))).toContain(flat("run /anchor status"))
    },
    TEST_TIMEOUT,
  )

  // Issue 10, items 2 and 3: a config problem at start and the tip on the first message, both seen without a click
  // and without /anchor reload. The problem toast comes ~0.7 s after the first message, the tip one toast later.
  describe("a broken project contract file and a long goal-less first prompt", () => {
    let tui: Tui
    let since = 0
    beforeAll(async () => {
      const sb = sandbox({ files: { [PROJECT_CONFIG]: "version: 1\ncontracts:\n  - id: [broken\n" } })
      tui = await startTui(sb, { script: [{ text: "Understood." }] })
      since = tui.mark()
      await tui.submit("refactor the whole module and rename every function in it please")
      await tui.waitForScreen((s) => s.includes("Understood."), 90_000, { since, what: "the answer" })
      // The tip is sent one toast after the problem (0.7 s + 5.5 s after the message): wait for it, bounded.
      await tui.waitForScreen(toastShows("semantic-anchors: tip:"), 60_000, { since, what: "the tip toast" })
    }, TEST_TIMEOUT)

    test("the config-problem toast is on screen after the first prompt (no /anchor reload)", () => {
      const frame = tui.seen(toastShows("semantic-anchors: 1 config problem"), since)
      expect(frame).toBeDefined()
      const text = flat(toastText(frame!))
      expect(text).toContain(flat(`${PROJECT_CONFIG}: cannot parse YAML`))
      expect(text).toContain(flat("run /anchor status to see all"))
      keepCapture("config-problem", frame!)
    })

    test("the intent tip is on screen, whole, in plain words, naming the plugin", () => {
      const frame = tui.seen(toastShows("semantic-anchors: tip:"), since)!
      expect(flat(toastText(frame))).toContain(
        flat(
          "semantic-anchors: tip: Say the goal and how the result can be verified (e.g. 'so that ...', 'done when the tests pass'). (intent-anchor)",
        ),
      )
      keepCapture("tip", frame)
    })
  })

  // The default protection, with no config file: a chained, wrapped force push is blocked, the person sees the toast
  // and the red row, and the push never ran.
  test(
    "no config: `cd app && env X=1 git push -f origin main` is blocked by protect-remote-history (block toast, red row)",
    async () => {
      const sb = sandbox()
      fs.mkdirSync(path.join(sb.project, "app"), { recursive: true })
      const push = {
        tool: "bash",
        args: {
          command: "echo main >> push.log; cd app && env X=1 git push -f origin main",
          description: "Force-push",
        },
      }
      const tui = await startTui(sb, { script: [push, { text: "The push was blocked." }] })
      const since = tui.mark()
      await tui.submit("push the fix so that the release can go out")
      const block = await tui.waitForScreen(toastShows("semantic-anchors: blocked a bash call"), 90_000, {
        since,
        what: "the block toast",
      })
      expect(flat(toastText(block))).toContain(
        flat(
          "semantic-anchors: blocked a bash call: Never overwrite or delete pushed history (protect-remote-history). The agent was told why; /anchor bypass <reason> lets one call through.",
        ),
      )
      keepCapture("protection-block", block)
      await tui.waitForScreen((s) => s.includes("The push was blocked."), 60_000, { since, what: "the answer" })
      expect(pushRuns(sb)).toBe(0)
      const rows = colourOf(await tui.screenAnsi(), "git push -f origin main")
      expect(rows.some((r) => reddish(r.fg))).toBe(true)
    },
    TEST_TIMEOUT,
  )

  // Issue 10, item 2: the first warn of a turn and a contract's block, each a toast; then the person's own
  // `/anchor bypass` and its outcome toast.
  test(
    "a write with no source (warn toast), a force-push a project contract blocks (block toast, red row), `/anchor bypass` (granted toast)",
    async () => {
      const sb = sandbox({ files: { [PROJECT_CONFIG]: NO_FORCE_PUSH } })
      const tui = await startTui(sb, {
        script: [
          { tool: "write", args: { filePath: path.join(sb.project, "todo.md"), content: "- ship\n" } },
          forcePush("main"),
          { text: "The push was blocked; may I?" },
          { text: "Noted." },
        ],
        // The warn toast stays alone on screen for a few seconds before the block's toast replaces it.
        beforeReply: holdStep(1, 4000),
      })
      const since = tui.mark()
      await tui.submit("write the todo file so that we remember")
      const warn = await tui.waitForScreen(toastShows("semantic-anchors: the write call ran"), 90_000, {
        since,
        what: "the warn toast",
      })
      expect(flat(toastText(warn))).toContain(
        flat(
          "semantic-anchors: the write call ran, with a note to the agent: Write only on a cited source (source-anchor).",
        ),
      )
      keepCapture("warn", warn)
      const block = await tui.waitForScreen(toastShows("semantic-anchors: blocked a bash call"), 60_000, {
        since,
        what: "the block toast",
      })
      expect(flat(toastText(block))).toContain(
        flat(
          "semantic-anchors: blocked a bash call: Never rewrite shared history (no-force-push). The agent was told why; /anchor bypass <reason> lets one call through.",
        ),
      )
      keepCapture("block", block)
      await tui.waitForScreen((s) => s.includes("The push was blocked; may I?"), 60_000, { since, what: "the answer" })
      expect(pushRuns(sb)).toBe(0)
      // The blocked call is a red row (its command is the row's title: the person's own tool call, not our text).
      const rows = colourOf(await tui.screenAnsi(), "git push --force origin main")
      expect(rows.some((r) => reddish(r.fg))).toBe(true)

      const afterBlock = tui.mark()
      await tui.submit("/anchor bypass the fixture branch is mine")
      const granted = await tui.waitForScreen(toastShows("semantic-anchors: bypass granted once"), 60_000, {
        since: afterBlock,
        what: "the granted toast",
      })
      expect(flat(toastText(granted))).toContain(
        flat(
          "semantic-anchors: bypass granted once (override 1 of 3): the next blocked call in this session may run once.",
        ),
      )
    },
    TEST_TIMEOUT,
  )

  // Issue 10, item 4: the bypass question carries its facts (the dialog shows only the permission's name, so the name
  // is the facts), a toast says them too, "Allow always" is told to mean this one call and is asked again, and each
  // outcome is a toast: Allow always / Allow once -> granted, Reject -> refused.
  test(
    "anchor_bypass: the dialog and a toast show contract, tool, reason and overrides left; always = once; each outcome is a toast",
    async () => {
      const sb = sandbox({ files: { [PROJECT_CONFIG]: NO_FORCE_PUSH } })
      const reason = "the fixture needs a force-push"
      const facts = `contract no-force-push blocked a bash call; reason: ${reason}; 3 of 3 overrides left`
      const tui = await startTui(sb, {
        script: [
          forcePush("a"), // 0: blocked
          { tool: "anchor_bypass", args: { reason } }, // 1: asked (1), "Allow always"
          forcePush("b"), // 2: runs
          { text: "Pushed once." }, // 3
          { text: "Reloaded." }, // 4: after /anchor reload (overrides back to 3 of 3)
          forcePush("c"), // 5: blocked
          { tool: "anchor_bypass", args: { reason } }, // 6: the same question again (2): asked, "Allow once"
          forcePush("d"), // 7: runs
          forcePush("e"), // 8: blocked
          { tool: "anchor_bypass", args: { reason: "one more" } }, // 9: asked (3), "Reject"
          { text: "I stop here." }, // 10
        ],
      })
      const dialogShowsFacts = (frame: string) => {
        expect(frame).toContain("Permission required")
        expect(flat(frame)).toContain(flat(`Call tool anchor-bypass: ${facts}`))
      }
      // The toast and the dialog come by different ways (a client call, the permission event): either may be first.
      const askToast = (since: number) =>
        tui.waitForScreen(
          toastShows(`semantic-anchors: the agent asks you to let one blocked call run once: ${facts}.`),
          30_000,
          { since, what: "the toast with the question's facts" },
        )

      // 1: "Allow always": its screen says it is this one call only; the outcome is "granted once".
      let since = tui.mark()
      await tui.submit("push the fixture so that the demo works")
      await tui.waitForScreen((s) => s.includes("Permission required"), 120_000, { since, what: "dialog 1" })
      const dialog1 = tui.seen((s) => s.includes("Permission required"), since)!
      dialogShowsFacts(dialog1)
      keepCapture("bypass-dialog", await askToast(since))
      const always = await tui.answerPermission("always")
      expect(always).toContain("Always allow")
      expect(always).toContain("- this one blocked call only: semantic-anchors asks again next time")
      await tui.waitForScreen(toastShows("semantic-anchors: bypass granted once (override 1 of 3)"), 60_000, {
        since,
        what: "granted toast 1",
      })
      await tui.waitForScreen((s) => s.includes("Pushed once."), 60_000, { since, what: "answer 1" })
      expect(pushRuns(sb)).toBe(1)

      // /anchor reload: overrides back to 3 of 3, so the next question is word for word the first one.
      since = tui.mark()
      await tui.submit("/anchor reload")
      await tui.waitForScreen((s) => s.includes("Reloaded."), 60_000, { since, what: "the reload's answer" })

      // 2: the same question is asked again ("always" was not remembered); "Allow once" grants.
      since = tui.mark()
      await tui.submit("push again so that the demo works")
      await tui.waitForScreen((s) => s.includes("Permission required"), 120_000, { since, what: "dialog 2" })
      // The question's toast before the answer: the outcome's toast replaces it, and under load a toast that came
      // after the dialog could be replaced before a frame of it was kept.
      await askToast(since)
      const dialog2 = await tui.answerPermission("once")
      dialogShowsFacts(dialog2)
      const granted = await tui.waitForScreen(
        toastShows("semantic-anchors: bypass granted once (override 1 of 3)"),
        60_000,
        { since, what: "granted toast 2" },
      )
      keepCapture("bypass-granted", granted)

      // 3: "Reject": the outcome is "refused", and the blocked call never ran.
      const beforeThird = tui.mark()
      // In the same turn as dialog 2: wait for the third question itself (dialog 2 may still be on the last frame).
      const dialog3 = await tui.waitForScreen(
        (s) => s.includes("Permission required") && flat(s).includes(flat("reason: one more")),
        120_000,
        { since: beforeThird, what: "dialog 3" },
      )
      expect(flat(dialog3)).toContain(
        flat(
          "Call tool anchor-bypass: contract no-force-push blocked a bash call; reason: one more; 2 of 3 overrides left",
        ),
      )
      await tui.press("Escape")
      const refused = await tui.waitForScreen(toastShows("semantic-anchors: bypass refused"), 60_000, {
        since: beforeThird,
        what: "the refused toast",
      })
      expect(flat(toastText(refused))).toContain(
        flat("semantic-anchors: bypass refused: you did not allow it; the blocked call stays blocked."),
      )
      keepCapture("bypass-refused", refused)
      await tui.waitForScreen((s) => s.includes("I stop here."), 60_000, {
        since: beforeThird,
        what: "the last answer",
      })
      expect(pushRuns(sb)).toBe(2)
      expect(fs.readFileSync(path.join(sb.project, "push.log"), "utf8")).toBe("b\nd\n")
    },
    TEST_TIMEOUT + 100_000,
  )

  test(
    "protect-secrets, no config: `cat .env` runs, the person sees the toast naming .env, the model never reads the value",
    async () => {
      const canary = `sk-tuicanary${Date.now()}R4w`
      const sb = sandbox({
        install: ["--only", "semantic-anchors"],
        files: { ".env": `OPENAI_API_KEY=${canary}\nPORT=3000\n` },
      })
      const tui = await startTui(sb, {
        script: [
          { tool: "bash", args: { command: "cat .env", description: "Show the settings" } },
          { text: "Checked." },
        ],
        beforeReply: holdStep(1, 4000), // the toast stays alone on screen before the answer
      })
      const since = tui.mark()
      await tui.submit("show the settings so that we can check the port")
      const frame = await tui.waitForScreen(toastShows("semantic-anchors: secrets from .env"), 90_000, {
        since,
        what: "the secrets toast",
      })
      expect(flat(toastText(frame))).toContain(
        flat("semantic-anchors: secrets from .env were taken out of a bash result before the model read it."),
      )
      keepCapture("secrets", frame)
      await tui.waitForScreen((s) => s.includes("Checked."), 60_000, { since, what: "the answer" })
      expect(resultSeenFor(tui.llm, 0)).toContain("OPENAI_API_KEY=[secret from .env redacted by semantic-anchors]")
      expect(JSON.stringify(tui.llm.requests)).not.toContain(canary)
      await tui.close()
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
      keepCapture("loop-guard", frame!.text)
    })
  })
})

// Issue 17, item 5: a model whose reasoning repeats one sentence. loop-guard alone (semantic-anchors' tip toasts
// would replace its toast). The reply is held 2 s so the session view is up before the stream starts (a toast sent
// while the first message switches views is painted over); then 20-character pieces, 10 ms apart.
const LOOPING_SENTENCE = "I should check the configuration file once more. " // 49 characters
tuiDescribe("e2e in the opencode TUI (tmux): a reasoning loop", () => {
  let tui: Tui
  let since = 0
  let toastFrame: string | undefined
  let finalFrame = ""
  beforeAll(async () => {
    const sb = sandbox({ install: ["--only", "loop-guard"] })
    tui = await startTui(sb, {
      script: [
        {
          reasoning: "The build fails in the config loader. " + LOOPING_SENTENCE.repeat(400),
          text: "This answer is never reached.",
          chunk: 20,
          delayMs: 10,
        },
      ],
      beforeReply: holdStep(0, 2000),
    })
    since = tui.mark()
    await tui.submit("fix the failing build")
    toastFrame = await tui.waitForScreen(toastShows("loop-guard: stopped the agent"), 90_000, {
      since,
      what: "loop-guard's stop toast",
    })
    // The aborted message's footer says so once the run has ended.
    finalFrame = await tui.waitForScreen((s) => /▣\s+Build · fake-model · interrupted/.test(s), 60_000, {
      since,
      what: "the interrupted message",
    })
    await tui.close()
  }, TEST_TIMEOUT)

  test("the person sees loop-guard's error toast: the reasoning, the passage's length and count, not its text", () => {
    const text = flat(toastText(toastFrame!))
    expect(text).toMatch(
      new RegExp(flat("loop-guard: stopped the agent: its reasoning repeated a 49-character passage \\d+ times")),
    )
    expect(text).not.toContain(flat("configuration"))
    keepCapture("loop-guard-stream", toastFrame!)
  })

  test("the stream was closed long before its end; the screen shows the message interrupted, its thinking folded", () => {
    const fake = tui.llm.requests.find((r) => !r._fake.title)?._fake
    expect(fake?.closedEarly).toBe(true)
    expect(fake.chunksSent).toBeLessThan(fake.chunksTotal / 4)
    // The TUI folds reasoning into one `Thought` row: the loop itself is never on screen.
    expect(finalFrame).toMatch(/\+ Thought: [\d.]+m?s/)
    expect(finalFrame).not.toContain(LOOPING_SENTENCE.trim())
    expect(finalFrame).not.toContain("This answer is never reached.")
    keepCapture("loop-guard-stream-interrupted", finalFrame)
  })
})

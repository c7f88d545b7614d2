// loop-guard's stream rule through the interface opencode uses: `server(input)`, then the `event` hook fed the
// host's streaming events (message.part.updated at a part's start and end, message.part.delta for each chunk) and
// the `experimental.chat.messages.transform` hook. The texts are synthetic, written for these tests.
import { describe, expect, test } from "bun:test"
import { startLoopGuard } from "./lib/loop-guard.ts"
import plugin, {
  MAX_STREAM_PARTS,
  STREAM_MAX_PERIOD,
  STREAM_CODE_CHARS,
  STREAM_CODE_REPEATS,
  STREAM_LONG_CHARS,
  STREAM_LONG_REPEATS,
  STREAM_MIN_CHARS,
  STREAM_REPEATS,
  StreamWatcher,
  cutText,
} from "../loop-guard.ts"

/** The rule: stopped no later than the 8th copy or 1,000 characters after the loop began, the later. */
const RULE_COPIES = 8
const RULE_CHARS = 1000
/** Less than a stop needs, and enough that twice it is a stop. */
const HALF = STREAM_MIN_CHARS - 100

/** Starts the plugin as opencode does (test/lib/loop-guard.ts), with the given environment, and drives its hooks. */
async function start(env: Record<string, string> = {}) {
  const started = await startLoopGuard(env)
  return { ...started, ...host(started.hooks) }
}

/** The host's event shapes (opencode 1.18.33, ../shared/opencode-host.md "Streamed text and reasoning"). */
function host(hooks: any) {
  const send = (event: unknown) => hooks.event?.({ event })
  const part = (sessionID: string, id: string, type: string, text: string, end?: number) => ({
    id,
    sessionID,
    messageID: `msg_${sessionID}`,
    type,
    text,
    time: end === undefined ? { start: 1 } : { start: 1, end },
  })
  return {
    send,
    begin: (sessionID: string, id: string, type: "reasoning" | "text") =>
      send({ type: "message.part.updated", properties: { sessionID, part: part(sessionID, id, type, "") } }),
    delta: (sessionID: string, partID: string, delta: string) =>
      send({
        type: "message.part.delta",
        properties: { sessionID, messageID: `msg_${sessionID}`, partID, field: "text", delta },
      }),
    end: (sessionID: string, id: string, type: "reasoning" | "text", text: string) =>
      send({ type: "message.part.updated", properties: { sessionID, part: part(sessionID, id, type, text, 2) } }),
    idle: (sessionID: string) => send({ type: "session.idle", properties: { sessionID } }),
  }
}

/** Chunks of a text, as a provider streams them: fixed sizes, or a repeating pattern of sizes. */
function chunks(text: string, sizes: number[]): string[] {
  const out: string[] = []
  for (let i = 0, k = 0; i < text.length; k++) {
    const size = sizes[k % sizes.length]
    out.push(text.slice(i, i + size))
    i += size
  }
  return out
}

/** Streams a whole part; returns the characters sent when the first abort was asked (or null). */
async function stream(
  run: Awaited<ReturnType<typeof start>>,
  sessionID: string,
  partID: string,
  type: "reasoning" | "text",
  text: string,
  sizes: number[],
): Promise<number | null> {
  await run.begin(sessionID, partID, type)
  let sent = 0
  let stoppedAt: number | null = null
  for (const piece of chunks(text, sizes)) {
    await run.delta(sessionID, partID, piece)
    sent += piece.length
    if (stoppedAt === null && run.aborts.length > 0) stoppedAt = sent
  }
  await run.end(sessionID, partID, type, text)
  return stoppedAt
}

const repeat = (unit: string, times: number) => unit.repeat(times)

/** A made-up paragraph of about `length` characters, different sentences each time (no repeat inside). */
function paragraph(seed: number, length: number): string {
  const words = ["module", "parser", "returns", "cache", "value", "index", "request", "handler", "token", "schema"]
  let text = ""
  for (let i = 0; text.length < length; i++) {
    text += `Step ${seed}.${i}: the ${words[(seed + i) % 10]} ${words[(i * 7 + seed) % 10]} checks item ${i * 13 + seed}. `
  }
  return text
}

const PROSE = "I looked at the failing test and the stack trace points to the date parsing in utils.\n\n"
const SIZES = [[1], [7], [40], [300], [3, 17, 1, 40, 9, 28]]

// ---------------------------------------------------------------------------------------------------------------
// Loops: stopped, within the rule's bound, whatever the chunk size
// ---------------------------------------------------------------------------------------------------------------

type LoopCase = { name: string; kind: "reasoning" | "text"; before: string; unit: string; times: number }
const LOOPS: LoopCase[] = [
  { name: "one character (!!!!)", kind: "reasoning", before: "Checking the output", unit: "!", times: 3000 },
  { name: "a word ( it it it)", kind: "reasoning", before: "Maybe I should use", unit: " it", times: 1000 },
  {
    name: "a word in the answer (court court)",
    kind: "text",
    before: "The filing went to ",
    unit: "court ",
    times: 600,
  },
  {
    name: "a 4-character cycle inside a made-up hash in a code fence",
    kind: "text",
    before: "Here is the config:\n\n```python\nc.password = 'argon2:$argon2id$v=19$m=10240,t=10,p=8$c2FsdA$Vk",
    unit: "Qxzp",
    times: 800,
  },
  {
    name: "a sentence",
    kind: "reasoning",
    before: PROSE,
    unit: "Let me check the schema to get the right column types. ",
    times: 100,
  },
  {
    name: "two lines",
    kind: "text",
    before: PROSE,
    unit: "    `def run(self, *, mode=None)` -> `def run(self, *, mode=None)` (no change)\n    Wait, I want to add `strict`.\n",
    times: 60,
  },
  { name: "a paragraph of 1,000+ characters", kind: "reasoning", before: PROSE, unit: paragraph(1, 1100), times: 12 },
  {
    name: "two paragraphs alternating",
    kind: "text",
    before: PROSE,
    unit: paragraph(2, 500) + "\n" + paragraph(3, 400) + "\n",
    times: 12,
  },
  {
    // `<|im_end|>` holds a | with no blank beside it: no table cell separator, so the lines are text, not rows
    name: "a chat-template turn repeated as text (<|im_end|>, <|im_start|>)",
    kind: "text",
    before: PROSE,
    unit: "tell me something about you?<|im_end|>\n<|im_start|>assistant\n",
    times: 60,
  },
  {
    name: "whole lines in a code fence, past the code backstop",
    kind: "text",
    before: "```python\n",
    unit: "x = compute(x)  # again\n",
    times: 600,
  },
]

describe("a part that repeats itself is stopped", () => {
  for (const loop of LOOPS) {
    for (const sizes of SIZES) {
      test(`${loop.name}, ${loop.kind}, chunks of ${sizes.join("/")}`, async () => {
        const run = await start()
        const text = loop.before + repeat(loop.unit, loop.times)
        const stoppedAt = await stream(run, "ses_a", "prt_1", loop.kind, text, sizes)
        expect(run.aborts).toEqual([{ path: { id: "ses_a" } }])
        const code = loop.name.startsWith("whole lines")
        const bound = code
          ? Math.max(STREAM_CODE_REPEATS * loop.unit.length, STREAM_CODE_CHARS)
          : Math.max(RULE_COPIES * loop.unit.length, RULE_CHARS)
        expect(stoppedAt!).toBeLessThanOrEqual(loop.before.length + bound + Math.max(...sizes))
        expect(run.toasts).toHaveLength(1)
        const whose = loop.kind === "reasoning" ? "its reasoning" : "its answer"
        expect(run.toasts[0].variant).toBe("error")
        expect(run.toasts[0].message).toMatch(
          new RegExp(`^loop-guard: stopped the agent: ${whose} repeated an? \\d+-character passage \\d+ times$`),
        )
        // never the passage itself: not in the toast, not in the log
        const said = JSON.stringify([run.toasts, run.logs])
        if (loop.unit.trim().length >= 4) expect(said.includes(loop.unit.trim().slice(0, 12))).toBe(false)
        const line = run.logs.find((l) => l.message.startsWith("loop-guard: stopped the session's run"))
        expect(line?.level).toBe("error")
        expect(line?.extra?.period).toBeGreaterThan(0)
        expect(line?.extra?.period % loop.unit.length === 0 || loop.unit.length % line?.extra?.period === 0).toBe(true)
      })
    }
  }

  test("a loop that drifts (a space here and there differs, then the period changes) is one loop", async () => {
    const variants = ["Let me   (   Let me   )  ", "Let me   (   Let me)  ", "Let me   (   Let me   )  "]
    let text = PROSE
    for (let i = 0; i < 30; i++) text += variants[i % 7 === 3 ? 1 : 0]
    const began = PROSE.length
    text += repeat("Let me (", 300) // and then it settles into a shorter cycle
    for (const sizes of SIZES) {
      const run = await start()
      const stoppedAt = await stream(run, "ses_d", "prt_d", "text", text, sizes)
      expect(stoppedAt!).toBeLessThanOrEqual(began + RULE_CHARS + Math.max(...sizes))
    }
  })

  test("any passage of 1 to STREAM_MAX_PERIOD characters repeated back to back is stopped within the rule", () => {
    let seed = 12345
    const random = () => (seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 2 ** 32
    const letters = "abcdefghijklmnopqrstuvwxyz      ,.\n"
    const passage = (n: number) =>
      Array.from({ length: n }, () => letters[Math.floor(random() * letters.length)]).join("")
    for (const p of [1, 2, 3, 5, 17, 64, 125, 333, 999, 1000, 2500, 4000, 5000, STREAM_MAX_PERIOD]) {
      const before = paragraph(p, 300 + Math.floor(random() * 2000))
      const unit = passage(p)
      const text = before + unit.repeat(Math.ceil(Math.max(10 * p, 3000) / p))
      const watcher = new StreamWatcher()
      let loop = null
      for (const piece of chunks(text, [1 + Math.floor(random() * 40)])) loop ??= watcher.feed(piece)
      expect(loop).not.toBeNull()
      const copies = p >= STREAM_LONG_CHARS ? STREAM_LONG_REPEATS : RULE_COPIES // a long passage: the long rule
      expect(loop!.at).toBeLessThanOrEqual(before.length + Math.max(copies * p, RULE_CHARS))
      expect(loop!.period).toBe(p)
      expect(loop!.start).toBeLessThanOrEqual(before.length)
    }
  })

  test("a line looping inside an indented fence is still stopped, at the code backstop", async () => {
    const run = await start()
    const text = "1. Run:\n    ```\n" + repeat("    0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n", 400)
    const stoppedAt = await stream(run, "ses_a", "prt_1", "text", text, [40])
    expect(run.aborts).toEqual([{ path: { id: "ses_a" } }])
    expect(stoppedAt!).toBeGreaterThanOrEqual(STREAM_CODE_CHARS) // not at the main rule's 800 characters
  })

  test("a cycle inside a line in an indented fence follows the main rule", async () => {
    const run = await start()
    await stream(run, "ses_a", "prt_1", "text", "1. Config:\n    ```\n    key = 'ab" + repeat("Qxzp", 400), [40])
    expect(run.aborts).toEqual([{ path: { id: "ses_a" } }])
    expect(run.toasts[0].message).toBe(
      "loop-guard: stopped the agent: its answer repeated a 4-character passage 200 times",
    )
  })

  test("the toast counts the passage's copies and names its length", async () => {
    const run = await start()
    await stream(run, "ses_a", "prt_1", "reasoning", repeat("Let me check the entity model. ", 200), [40])
    expect(run.toasts[0].message).toBe(
      `loop-guard: stopped the agent: its reasoning repeated a 31-character passage ${Math.floor(STREAM_MIN_CHARS / 31)} times`,
    )
  })
})

// ---------------------------------------------------------------------------------------------------------------
// Long passages: 4 verbatim copies of STREAM_LONG_CHARS or more are a loop; fewer, or copies that differ, are not
// ---------------------------------------------------------------------------------------------------------------

/** A passage of exactly `length` characters, its sentences all different, ending with ". " (no rotation into PROSE). */
function passageOf(seed: number, length: number): string {
  const text = paragraph(seed, length + 40).slice(0, length - 2)
  return text + ". "
}

/** Lines of code, all different, `length` characters in all (the last line padded by a comment). */
function codeLines(length: number): string {
  let code = ""
  for (let i = 0; code.length < length - 40; i++) code += `  const v${i} = compute(${i * 7}, "k${i % 13}")\n`
  return code + `  // end ${"-".repeat(length - code.length - 10)}\n`
}

const LONG_PASSAGE = passageOf(11, 1200)
const LONG_CODE = codeLines(1200)

/** Each copy of `unit` with one small change: copy i gets `change(i)` in place of `word`. */
function varied(unit: string, times: number, word: string, change: (i: number) => string): string {
  return Array.from({ length: times }, (_, i) => unit.replace(word, change(i))).join("")
}

type LongCase = {
  name: string
  /** the text before the loop, the loop's copies (the repeated passage is `period` long), the text after */
  before: string
  loop: string
  after: string
  period: number
  /** null: never stopped; n: stopped within the n-th copy (its verdict after copy n - 1 ends, by copy n's end) */
  copies: number | null
}

const LONG_CASES: LongCase[] = [
  {
    name: "a 1,200-character passage x4, the text ending with copy 4",
    before: PROSE,
    loop: repeat(LONG_PASSAGE, 4),
    after: "",
    period: 1200,
    copies: STREAM_LONG_REPEATS,
  },
  {
    name: "a 1,200-character passage x10, in the answer",
    before: PROSE,
    loop: repeat(LONG_PASSAGE, 10),
    after: "",
    period: 1200,
    copies: STREAM_LONG_REPEATS,
  },
  {
    name: `a passage of STREAM_LONG_CHARS (${STREAM_LONG_CHARS}) characters x4`,
    before: PROSE,
    loop: repeat(passageOf(12, STREAM_LONG_CHARS), 4),
    after: "",
    period: STREAM_LONG_CHARS,
    copies: STREAM_LONG_REPEATS,
  },
  {
    name: "a 5,000-character passage x4 (beyond the earlier 4,000-character limit)",
    before: PROSE,
    loop: repeat(passageOf(13, 5000), 4),
    after: "",
    period: 5000,
    copies: STREAM_LONG_REPEATS,
  },
  {
    name: `a passage of STREAM_MAX_PERIOD (${STREAM_MAX_PERIOD}) characters x4`,
    before: PROSE,
    loop: repeat(passageOf(14, STREAM_MAX_PERIOD), 4),
    after: "",
    period: STREAM_MAX_PERIOD,
    copies: STREAM_LONG_REPEATS,
  },
  {
    name: "a whole fenced code block, fences included, x4 (a fence line is no code line: the long rule)",
    before: PROSE,
    loop: repeat("```ts\n" + codeLines(1200 - 10) + "```\n", 4),
    after: "",
    period: 1200,
    copies: STREAM_LONG_REPEATS,
  },
  {
    name: "a 1,200-character passage x3, then other prose",
    before: PROSE,
    loop: repeat(LONG_PASSAGE, 3),
    after: paragraph(21, 2000),
    period: 1200,
    copies: null,
  },
  {
    name: "a 1,200-character passage x3 and all but 40 characters of a 4th, then other prose",
    before: PROSE,
    loop: repeat(LONG_PASSAGE, 3) + LONG_PASSAGE.slice(0, 1160),
    after: "and that is where the two drafts differ: " + paragraph(22, 2000),
    period: 1200,
    copies: null,
  },
  {
    name: "a 999-character passage x5 (shorter than STREAM_LONG_CHARS: the main rule's 6 copies)",
    before: PROSE,
    loop: repeat(passageOf(15, 999), 5),
    after: paragraph(23, 1500),
    period: 999,
    copies: null,
  },
  {
    name: "a 999-character passage x8: stopped at its 6th copy (the main rule)",
    before: PROSE,
    loop: repeat(passageOf(15, 999), 8),
    after: "",
    period: 999,
    copies: STREAM_REPEATS,
  },
  {
    name: "a 1,200-character passage x4, its step counter different in each copy",
    before: PROSE,
    loop: varied(LONG_PASSAGE, 4, "Step 11.0", (i) => `Step 11.0 (try ${i + 1})`),
    after: paragraph(24, 1500),
    period: 1200,
    copies: null,
  },
  {
    name: "a 1,200-character passage x6, one word different in each copy",
    before: PROSE,
    loop: varied(LONG_PASSAGE, 6, "module", (i) => ["module", "parser", "cache", "value", "index", "token"][i]),
    after: paragraph(25, 1500),
    period: 1200,
    copies: null,
  },
  {
    name: "a 1,200-character block of code lines x8 inside one fence (the code backstop)",
    before: PROSE + "```ts\n",
    loop: repeat(LONG_CODE, 8),
    after: "```\n",
    period: 1200,
    copies: null,
  },
  {
    name: `a 1,200-character block of code lines inside one fence, x${STREAM_CODE_REPEATS + 2}: stopped at the code backstop`,
    before: PROSE + "```ts\n",
    loop: repeat(LONG_CODE, STREAM_CODE_REPEATS + 2),
    after: "```\n",
    period: 1200,
    copies: STREAM_CODE_REPEATS,
  },
  {
    name: "a Markdown table of 1,000+ characters x8 (rows: the code backstop)",
    before: PROSE,
    loop: repeat(table(24), 8),
    after: "\nDone.\n",
    period: table(24).length,
    copies: null,
  },
]

/** Chunk sizes of 1 to 60 characters, from a seed: a repeating pattern of 97 random sizes. */
function randomSizes(seed: number): number[] {
  let x = seed >>> 0
  return Array.from({ length: 97 }, () => {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0
    return 1 + (x % 60)
  })
}

describe("long passages: the long-passage rule", () => {
  for (const c of LONG_CASES) {
    for (const seed of [1, 2, 3]) {
      test(`${c.name}, random chunks (seed ${seed})`, async () => {
        const run = await start()
        const text = c.before + c.loop + c.after
        const stoppedAt = await stream(run, "ses_long", "prt_long", "text", text, randomSizes(seed))
        if (c.copies === null) {
          expect([run.aborts, run.toasts]).toEqual([[], []])
          return
        }
        expect(run.aborts).toEqual([{ path: { id: "ses_long" } }])
        expect(stoppedAt).not.toBeNull()
        // the verdict's character (the log line's `at`): inside copy n, by its end; the abort follows its chunk
        const line = run.logs.find((l) => l.message.startsWith("loop-guard: stopped the session's run"))
        const at = line?.extra?.at
        expect(at).toBeLessThanOrEqual(c.before.length + c.copies * c.period)
        expect(at).toBeGreaterThan(c.before.length + (c.copies - 1) * c.period)
        expect(line?.extra?.period).toBe(c.period)
        expect(run.toasts[0].message).toMatch(
          new RegExp(
            `^loop-guard: stopped the agent: its answer repeated an? ${c.period}-character passage ${c.copies} times$`,
          ),
        )
      })
    }
  }

  test("the watcher alone: a 1,200-character passage x4 fed one character at a time ends at copy 4's last", () => {
    const watcher = new StreamWatcher()
    const text = PROSE + repeat(LONG_PASSAGE, 4)
    let loop = null
    for (let i = 0; i < text.length && !loop; i++) loop = watcher.feed(text[i])
    expect(loop).toEqual({
      period: 1200,
      count: STREAM_LONG_REPEATS,
      start: PROSE.length,
      first: 1200,
      at: text.length,
      code: false,
    })
  })

  test("the long-passage rule's part is cut after the passage's first copy in the model's next context", async () => {
    const run = await start()
    const saved = PROSE + repeat(LONG_PASSAGE, 5)
    await stream(run, "ses_a", "prt_r", "reasoning", saved, randomSizes(4))
    expect(run.aborts).toHaveLength(1)
    const messages = [{ info: { id: "msg_ses_a" }, parts: [{ id: "prt_r", type: "reasoning", text: saved }] }]
    await run.hooks["experimental.chat.messages.transform"]({}, { messages })
    expect(messages[0].parts[0].text).toBe(
      PROSE +
        LONG_PASSAGE +
        `\n\n[loop-guard stopped a repetition here: the passage above was repeated ${STREAM_LONG_REPEATS} times; the ` +
        "repetitions were cut. Do not repeat it: continue with what comes next, or tell the user what blocks you.]",
    )
  })
})

// ---------------------------------------------------------------------------------------------------------------
// Legitimate repetition: never stopped
// ---------------------------------------------------------------------------------------------------------------

/** A row of a grid file, 40 characters: 30 of them make 1,200. */
const ZERO_ROW = "0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"

function table(rows: number): string {
  let text = "| file | status | owner | notes |\n| --- | --- | --- | --- |\n"
  for (let i = 0; i < rows; i++)
    text += `| src/mod${i % 7}/file${i}.ts | ${i % 3 ? "ok" : "failing"} | team-${i % 4} | - |\n`
  return text
}

const LEGIT: { name: string; kind: "reasoning" | "text"; text: string }[] = [
  { name: "a Markdown table of 200 rows", kind: "text", text: "Results:\n\n" + table(200) },
  {
    name: "a table whose cells repeat (ok/ok/ok), 40 identical rows",
    kind: "text",
    text: "| a | b | c | d |\n|---|---|---|---|\n" + repeat("| ok | ok | ok | ok |\n", 40),
  },
  {
    name: "a list of 300 near-identical paths",
    kind: "text",
    text: Array.from({ length: 300 }, (_, i) => `- packages/app/src/components/widget/Button${i}.test.tsx`).join("\n"),
  },
  {
    name: "a list of near-identical ids",
    kind: "reasoning",
    text: Array.from({ length: 200 }, (_, i) => `id-0000-0000-0000-${String(i).padStart(4, "0")}`).join(", "),
  },
  {
    name: "a code block with 200 identical lines",
    kind: "text",
    text: "```rust\n" + repeat('    assert_eq!(parse("x"), Ok(1));\n', 200) + "```\n",
  },
  {
    name: "a dummy weights file, the same row 120 times",
    kind: "text",
    text: '```json\n{\n  "w": [\n' + repeat("    [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8],\n", 120) + "  ]\n}\n```\n",
  },
  {
    name: "a quoted log with 60 repeated lines",
    kind: "text",
    text: "The server log:\n\n```\n" + repeat("WARN pool: connection refused, retrying in 1s\n", 60) + "```\n",
  },
  {
    name: "headings and dividers between sections",
    kind: "text",
    text: Array.from({ length: 30 }, (_, i) => `---\n\n## Section ${i}\n\n${paragraph(i, 120)}\n\n`).join(""),
  },
  {
    name: "a long divider line of 200 '='",
    kind: "text",
    text: "Summary\n" + repeat("=", 200) + "\n" + paragraph(4, 300),
  },
  {
    name: "box drawing: a diagram with empty rows",
    kind: "text",
    text:
      "```\n┌" +
      repeat("─", 60) +
      "┐\n" +
      repeat("│" + repeat(" ", 60) + "│\n", 8) +
      "│ client ──► gateway ──► service" +
      repeat(" ", 29) +
      "│\n" +
      repeat("│" + repeat(" ", 60) + "│\n", 8) +
      "└" +
      repeat("─", 60) +
      "┘\n```\n",
  },
  {
    name: "box drawing outside a fence: a box with 30 empty rows",
    kind: "text",
    text: "┌" + repeat("─", 60) + "┐\n" + repeat("│" + repeat(" ", 60) + "│\n", 30) + "└" + repeat("─", 60) + "┘\n",
  },
  {
    name: "an ASCII table with 60 identical rows",
    kind: "text",
    text: "+-----+-----+\n" + repeat("| n/a | n/a |\n+-----+-----+\n", 60),
  },
  {
    name: "a fenced block inside a nested list item (indented 4 spaces) with 30 identical lines",
    kind: "text",
    text:
      "Steps:\n\n1. Setup\n    - Create `grid.txt`:\n\n    ```\n" +
      repeat("    " + ZERO_ROW, 30) +
      "    ```\n\nThen run it.\n",
  },
  {
    name: "a fenced block inside a blockquote with 30 identical lines",
    kind: "text",
    text: "As the README says:\n\n> ```\n" + repeat("> " + ZERO_ROW, 30) + "> ```\n",
  },
  {
    name: "a table without outer pipes, 80 identical rows",
    kind: "text",
    text: "name | status | owner\n--- | --- | ---\n" + repeat("n/a | skipped | none\n", 80),
  },
  {
    name: "a table without outer pipes, cells unpadded on one side, 60 identical rows",
    kind: "text",
    text: "Results:\n\nname |status\n--- |---\n" + repeat("pending |none\n", 60) + "\nDone.\n",
  },
  {
    name: "padding: a table with wide blank cells",
    kind: "text",
    text: Array.from({ length: 20 }, (_, i) => `| row ${i}${repeat(" ", 80)}| ${i * 7} |`).join("\n"),
  },
  {
    name: "reasoning that repeats a fact a few times",
    kind: "reasoning",
    text: repeat("The value is 5. ", 3) + paragraph(5, 2000) + repeat("So the answer is 5.\n", 3),
  },
]

describe("legitimate repetition is never stopped", () => {
  for (const legit of LEGIT) {
    for (const sizes of SIZES) {
      test(`${legit.name}, chunks of ${sizes.join("/")}`, async () => {
        const run = await start()
        expect(await stream(run, "ses_l", "prt_1", legit.kind, legit.text, sizes)).toBeNull()
        expect(run.aborts).toEqual([])
        expect(run.toasts).toEqual([])
      })
    }
  }
  // Whole lines repeated outside a fence, a table or a diagram follow the main rule: the watcher cannot tell a quoted
  // log from a model repeating a pair of lines (the recorded real loop of a 2-line pair must still be caught early).
  test("a log of identical lines outside a code fence is stopped like prose: a known limit, see docs/loop-guard.md", async () => {
    const run = await start()
    const text =
      "The test output was:\n" +
      repeat("npm WARN deprecated inflight@1.0.6: not supported\n", 25) +
      "So the warnings are noise; the real failure is elsewhere.\n"
    const stoppedAt = await stream(run, "ses_l", "prt_1", "reasoning", text, [40])
    expect(run.aborts).toEqual([{ path: { id: "ses_l" } }])
    expect(stoppedAt!).toBeLessThan(text.length) // stopped inside the log, at the main rule
    expect(run.toasts[0].message).toBe(
      "loop-guard: stopped the agent: its reasoning repeated a 50-character passage 16 times",
    )
  })
})

// ---------------------------------------------------------------------------------------------------------------
// Parts, sessions and bounds
// ---------------------------------------------------------------------------------------------------------------

describe("parts and sessions", () => {
  test("parts interleaved across sessions: only the looping session is stopped", async () => {
    const run = await start()
    const loop = chunks(PROSE + repeat("Wait, the answer is 5. ", 200), [11])
    const fine = chunks(paragraph(7, 5000), [13])
    await run.begin("ses_1", "prt_loop", "reasoning")
    await run.begin("ses_2", "prt_fine", "text")
    await run.begin("ses_2", "prt_fine_r", "reasoning")
    for (let i = 0; i < Math.max(loop.length, fine.length); i++) {
      if (i < loop.length) await run.delta("ses_1", "prt_loop", loop[i])
      if (i < fine.length) await run.delta("ses_2", "prt_fine", fine[i])
      if (i < fine.length) await run.delta("ses_2", "prt_fine_r", fine[fine.length - 1 - i])
    }
    expect(run.aborts).toEqual([{ path: { id: "ses_1" } }])
    expect(run.toasts[0].message).toContain("its reasoning")
  })

  test("reasoning and answer of one message are watched apart: half a loop in each is no loop", async () => {
    const run = await start()
    await stream(run, "ses_a", "prt_r", "reasoning", repeat("!", HALF), [40])
    await stream(run, "ses_a", "prt_t", "text", repeat("!", HALF), [40])
    expect(run.aborts).toEqual([])
  })

  test("a part's watcher is dropped at its end (time.end set): a new part starts from nothing", async () => {
    const run = await start()
    await stream(run, "ses_a", "prt_1", "text", repeat("!", HALF), [40])
    await run.begin("ses_a", "prt_1", "text") // announced again: a new watcher
    for (const piece of chunks(repeat("!", HALF), [40])) await run.delta("ses_a", "prt_1", piece)
    expect(run.aborts).toEqual([])
  })

  test("deltas of a part never announced as reasoning or text (a tool's streamed input) are not watched", async () => {
    const run = await start()
    await run.send({
      type: "message.part.updated",
      properties: { sessionID: "ses_a", part: { id: "prt_tool", sessionID: "ses_a", type: "tool", tool: "write" } },
    })
    for (const id of ["prt_tool", "prt_unknown"]) {
      for (const piece of chunks(repeat("0,0,0,0\n", 500), [40])) await run.delta("ses_a", id, piece)
    }
    expect(run.aborts).toEqual([])
  })

  test("a session's watchers are dropped when it goes idle", async () => {
    const run = await start()
    await run.begin("ses_a", "prt_1", "reasoning")
    await run.delta("ses_a", "prt_1", repeat("!", HALF))
    await run.idle("ses_a")
    await run.delta("ses_a", "prt_1", repeat("!", HALF)) // dropped: not watched any more
    await run.begin("ses_a", "prt_1", "reasoning")
    await run.delta("ses_a", "prt_1", repeat("!", HALF))
    expect(run.aborts).toEqual([])
    await run.delta("ses_a", "prt_1", repeat("!", HALF))
    expect(run.aborts).toHaveLength(1) // the new watcher, twice HALF in
  })

  test(`at most ${MAX_STREAM_PARTS} parts are tracked: the least recently fed is dropped`, async () => {
    const run = await start()
    for (let i = 0; i <= MAX_STREAM_PARTS; i++) {
      await run.begin("ses_a", `prt_${i}`, "text")
      await run.delta("ses_a", `prt_${i}`, repeat("!", HALF))
    }
    await run.delta("ses_a", "prt_0", repeat("!", HALF)) // prt_0 was dropped: HALF characters is no loop yet
    await run.delta(`ses_a`, `prt_${MAX_STREAM_PARTS}`, repeat("!", HALF)) // still tracked: twice HALF
    expect(run.aborts).toHaveLength(1)
    expect(run.logs.filter((l) => l.level === "error").map((l) => l.extra?.partID)).toEqual([`prt_${MAX_STREAM_PARTS}`])
  })

  test("the state of a watcher stays bounded whatever the part's length", () => {
    const watcher = new StreamWatcher()
    expect(watcher.bytes).toBeLessThan(1024) // nothing allocated before the first character
    const prose = paragraph(9, 200_000)
    for (const piece of chunks(prose, [40])) expect(watcher.feed(piece)).toBeNull()
    expect(watcher.length).toBe(prose.length)
    expect(watcher.bytes).toBeLessThan(40 * 1024)
  })

  test("one verdict per part: the stream goes on (warn) without a second toast", async () => {
    const run = await start({ OPENCODE_LOOP_GUARD_STREAM: "warn" })
    await stream(run, "ses_a", "prt_1", "text", repeat("again ", 2000), [40])
    expect(run.toasts).toHaveLength(1)
  })
})

// ---------------------------------------------------------------------------------------------------------------
// Modes
// ---------------------------------------------------------------------------------------------------------------

describe("modes", () => {
  const loopText = repeat("The user wants the file. ", 200)

  test("warn: a warning toast and a log line, no abort, no cut", async () => {
    const run = await start({ OPENCODE_LOOP_GUARD: "warn" })
    await stream(run, "ses_a", "prt_1", "reasoning", loopText, [40])
    expect(run.aborts).toEqual([])
    expect(run.toasts).toEqual([
      {
        message: `loop-guard: its reasoning repeated a 25-character passage ${Math.floor(STREAM_MIN_CHARS / 25)} times (warn mode: not stopped)`,
        variant: "warning",
      },
    ])
    expect(run.logs.some((l) => l.level === "warn" && l.message.includes("warn mode"))).toBe(true)
    const output = { messages: [{ info: {}, parts: [{ id: "prt_1", type: "reasoning", text: loopText }] }] }
    await run.hooks["experimental.chat.messages.transform"]({}, output)
    expect(output.messages[0].parts[0].text).toBe(loopText)
  })

  test("OPENCODE_LOOP_GUARD=off: nothing at all", async () => {
    const run = await start({ OPENCODE_LOOP_GUARD: "off" })
    await stream(run, "ses_a", "prt_1", "reasoning", loopText, [40])
    expect([run.aborts, run.toasts]).toEqual([[], []])
    expect(run.hooks["tool.execute.before"]).toBeUndefined()
  })

  test("OPENCODE_LOOP_GUARD_STREAM=off: the stream is not watched, tool calls still are", async () => {
    const run = await start({ OPENCODE_LOOP_GUARD_STREAM: "off" })
    await stream(run, "ses_a", "prt_1", "reasoning", loopText, [40])
    expect([run.aborts, run.toasts]).toEqual([[], []])
    expect(run.hooks["tool.execute.before"]).toBeDefined()
    expect(run.hooks["experimental.chat.messages.transform"]).toBeUndefined()
  })

  test("OPENCODE_LOOP_GUARD=off with OPENCODE_LOOP_GUARD_STREAM=block: only the stream is watched", async () => {
    const run = await start({ OPENCODE_LOOP_GUARD: "off", OPENCODE_LOOP_GUARD_STREAM: "block" })
    expect(run.hooks["tool.execute.before"]).toBeUndefined()
    await stream(run, "ses_a", "prt_1", "reasoning", loopText, [40])
    expect(run.aborts).toHaveLength(1)
  })

  test("an invalid OPENCODE_LOOP_GUARD_STREAM is logged and the main mode used", async () => {
    const run = await start({ OPENCODE_LOOP_GUARD_STREAM: "loud" })
    expect(run.logs.map((l) => l.message)).toContain(
      'loop-guard: OPENCODE_LOOP_GUARD_STREAM="loud" is not block, warn or off; using block',
    )
    await stream(run, "ses_a", "prt_1", "reasoning", loopText, [40])
    expect(run.aborts).toHaveLength(1)
  })
})

// ---------------------------------------------------------------------------------------------------------------
// The model's next context
// ---------------------------------------------------------------------------------------------------------------

describe("the looping part is cut in the model's next context", () => {
  test("the stopped part keeps its first passage and a note; other parts are untouched", async () => {
    const run = await start()
    const unit = "Let me check the entity model to get the right column types. "
    const saved = PROSE + repeat(unit, 30) // what the host saved: what had arrived when the stream closed
    await stream(run, "ses_a", "prt_r", "reasoning", saved, [40])
    expect(run.aborts).toHaveLength(1)
    const messages = [
      { info: { id: "msg_u", role: "user" }, parts: [{ id: "prt_u", type: "text", text: "fix the schema" }] },
      {
        info: { id: "msg_ses_a", role: "assistant" },
        parts: [
          { id: "prt_r", type: "reasoning", text: saved },
          { id: "prt_other", type: "text", text: repeat(unit, 3) },
        ],
      },
      { info: { id: "msg_u2", role: "user" }, parts: [{ id: "prt_u2", type: "text", text: "go on" }] },
    ]
    await run.hooks["experimental.chat.messages.transform"]({}, { messages })
    const cut = messages[1].parts[0].text
    expect(cut).toBe(
      PROSE +
        unit +
        `\n\n[loop-guard stopped a repetition here: the passage above was repeated ${Math.floor(STREAM_MIN_CHARS / unit.length)} times; the repetitions were ` +
        "cut. Do not repeat it: continue with what comes next, or tell the user what blocks you.]",
    )
    expect(messages[1].parts[1].text).toBe(repeat(unit, 3))
    expect(messages[0].parts[0].text).toBe("fix the schema")
    // every later request is built again from the stored text: the cut applies each time
    messages[1].parts[0].text = saved
    await run.hooks["experimental.chat.messages.transform"]({}, { messages })
    expect(messages[1].parts[0].text).toBe(cut)
  })

  test("cutText never splits a surrogate pair and leaves a shorter text alone", () => {
    const note = "[note]"
    expect(cutText("ab😀😀😀", { offset: 3, note })).toBe("ab😀\n\n[note]")
    expect(cutText("short", { offset: 10, note })).toBe("short")
  })

  test("a transform with odd messages does not throw", async () => {
    const run = await start()
    await stream(run, "ses_a", "prt_r", "reasoning", repeat("!", 1200), [40])
    for (const output of [undefined, {}, { messages: null }, { messages: [null, { parts: [null, 5, { id: 3 }] }] }]) {
      await run.hooks["experimental.chat.messages.transform"]({}, output)
    }
  })
})

// ---------------------------------------------------------------------------------------------------------------
// Fail-open
// ---------------------------------------------------------------------------------------------------------------

describe("fail-open", () => {
  test("an event that throws when read is let through and logged once per session", async () => {
    const run = await start()
    const bad = {
      type: "message.part.delta",
      get properties(): unknown {
        throw new Error("unreadable")
      },
    }
    await run.send(bad)
    await run.send(bad)
    const errors = run.logs.filter((l) => l.message.includes("internal error in the stream check"))
    expect(errors).toHaveLength(1)
    await stream(run, "ses_a", "prt_1", "text", repeat("!", 1200), [40]) // the rule goes on working
    expect(run.aborts).toHaveLength(1)
  })

  test("odd events change nothing", async () => {
    const run = await start()
    for (const event of [
      undefined,
      null,
      { type: "message.part.delta" },
      { type: "message.part.delta", properties: { sessionID: "s", partID: "p", field: "text", delta: 5 } },
      { type: "message.part.delta", properties: { sessionID: "s", partID: "p", field: "other", delta: "!!!" } },
      { type: "message.part.updated", properties: { part: { type: "tool", id: "x" } } },
      { type: "message.part.updated", properties: { part: null } },
    ]) {
      await run.send(event)
    }
    expect([run.aborts, run.toasts]).toEqual([[], []])
  })

  test("a client whose calls throw does not break the stream rule", async () => {
    const boom = () => {
      throw new Error("down")
    }
    const hooks: any = await plugin.server({
      client: { app: { log: boom }, tui: { showToast: boom }, session: { abort: boom } },
    } as any)
    const run = host(hooks)
    await run.begin("s", "p", "text")
    await run.delta("s", "p", repeat("!", 1500))
  })
})

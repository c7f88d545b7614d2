// loop-guard's stream rule and a repetition the person asked for, through the interface opencode uses: `server(input)`,
// then `chat.message` with the person's message (its text in `output.parts`), then the streamed answer as the host's
// events (message.part.updated at a part's start and end, message.part.delta for each chunk). The texts are synthetic.
import { describe, expect, test } from "bun:test"
import { startLoopGuard } from "./lib/loop-guard.ts"
import { ASKED_MARGIN, askedRepetition, madeOfAsked } from "../loop-guard.ts"

type Run = Awaited<ReturnType<typeof startLoopGuard>>

/** The person's message, as chat.message carries it (../shared/opencode-host.md). */
async function say(run: Run, sessionID: string, text: string) {
  await run.hooks["chat.message"](
    { sessionID, model: { providerID: "fake", modelID: "fake-model" } },
    { message: { id: `msg_u_${sessionID}`, sessionID, role: "user", agent: "build" }, parts: [{ type: "text", text }] },
  )
}

/** Streams a whole part in chunks of `size`; returns the characters sent when the first abort was asked (or null). */
async function stream(
  run: Run,
  sessionID: string,
  partID: string,
  type: "reasoning" | "text",
  text: string,
  size = 40,
) {
  const part = (end?: number) => ({
    id: partID,
    sessionID,
    messageID: `msg_${sessionID}`,
    type,
    text: end === undefined ? "" : text,
    time: end === undefined ? { start: 1 } : { start: 1, end },
  })
  const send = (event: unknown) => run.hooks.event({ event })
  await send({ type: "message.part.updated", properties: { sessionID, part: part() } })
  let stoppedAt: number | null = null
  const aborts = run.aborts.length
  for (let i = 0; i < text.length; i += size) {
    const delta = text.slice(i, i + size)
    await send({
      type: "message.part.delta",
      properties: { sessionID, messageID: `msg_${sessionID}`, partID, field: "text", delta },
    })
    if (stoppedAt === null && run.aborts.length > aborts) stoppedAt = i + delta.length
  }
  await send({ type: "message.part.updated", properties: { sessionID, part: part(2) } })
  return stoppedAt
}

const lines = (line: string, times: number) => `${line}\n`.repeat(times)
const zeroRow = (cells: number, separator: string) => Array(cells).fill("0").join(separator) + "\n"
const INTRO = "Here you go:\n\n"
const OUTRO = "\n\nThat is what you asked for."
const CHANT = "Let me check the schema to get the right column types. "

/**
 * Each example of the issue and its look-alikes: the message, an answer that gives what it asks for, and one copy.
 * `numbered`: copies numbered 1., 2., ...: no loop to the rule even when nobody asked (the counter changes).
 */
type Example = { name: string; message: string; answer: string; passage: string; numbered?: boolean }
const EXAMPLES: Example[] = [
  { name: "print 'ha' 2000 times", message: "print 'ha' 2000 times", answer: "ha".repeat(2000), passage: "ha" },
  {
    name: "the same, as `opencode run` wraps it in double quotes, spaced copies",
    message: `"print 'ha' 2000 times"`,
    answer: "ha ".repeat(2000),
    passage: "ha ",
  },
  {
    name: "the same, double quotes, 2,000, upper case, one per line",
    message: 'Print "HA" 2,000 times please',
    answer: lines("HA", 2000),
    passage: "HA\n",
  },
  {
    name: "write 'All work and no play makes Jack a dull boy.' 100 times",
    message: "write 'All work and no play makes Jack a dull boy.' 100 times",
    answer: lines("All work and no play makes Jack a dull boy.", 100),
    passage: "All work and no play makes Jack a dull boy.\n",
  },
  {
    name: "the same in curly quotes, copies numbered",
    message: "Write “All work and no play makes Jack a dull boy.” 100 times.",
    answer: Array.from({ length: 100 }, (_, i) => `${i + 1}. All work and no play makes Jack a dull boy.\n`).join(""),
    passage: "All work and no play makes Jack a dull boy.\n",
    numbered: true,
  },
  {
    name: "a 200 x 16 grid of zeros, one row per line, no code block",
    message: "a 200 x 16 grid of zeros, one row per line, no code block",
    answer: zeroRow(16, " ").repeat(200),
    passage: zeroRow(16, " "),
  },
  {
    name: "200 rows of 16 zeros, commas between",
    message: "give me 200 rows of 16 zeros separated by commas",
    answer: zeroRow(16, ", ").repeat(200),
    passage: zeroRow(16, ", "),
  },
  {
    name: "repeat the word test 500 times, each on its own line",
    message: "repeat the word test 500 times, each on its own line",
    answer: lines("test", 500),
    passage: "test\n",
  },
  {
    name: "say the word 'Test' 500 times",
    message: "say the word 'Test' 500 times",
    answer: "Test ".repeat(500),
    passage: "Test ",
  },
]

describe("asked and within the count: the answer runs whole", () => {
  for (const example of EXAMPLES) {
    for (const [framing, answer] of [
      ["alone", example.answer],
      ["with an intro and an outro", INTRO + example.answer + OUTRO],
    ]) {
      test(`${example.name}, ${framing}`, async () => {
        const run = await startLoopGuard()
        await say(run, "ses_a", example.message)
        expect(await stream(run, "ses_a", "prt_1", "text", answer)).toBeNull()
        expect(run.aborts).toEqual([])
        expect(run.toasts).toEqual([])
      })
    }
  }

  test("the log says an asked-for repetition ran, once per part, with no word of the message or the answer", async () => {
    const run = await startLoopGuard()
    await say(run, "ses_a", "write 'All work and no play makes Jack a dull boy.' 100 times")
    await stream(run, "ses_a", "prt_1", "text", lines("All work and no play makes Jack a dull boy.", 100))
    expect(run.logs.map((l) => [l.level, l.message])).toEqual([
      [
        "info",
        "loop-guard: the answer repeats what the person asked to be repeated: let through up to the asked count",
      ],
    ])
    expect(JSON.stringify(run.logs)).not.toMatch(/work|play|Jack|boy|write|times/)
  })
})

describe("asked, then far past the count: stopped", () => {
  for (const example of EXAMPLES) {
    test(example.name, async () => {
      const run = await startLoopGuard()
      await say(run, "ses_a", example.message)
      const asked = askedRepetition(example.message)!
      const copies = Math.ceil((5 * example.answer.length) / example.passage.length)
      const answer = INTRO + example.passage.repeat(copies)
      const stoppedAt = await stream(run, "ses_a", "prt_1", "text", answer)
      expect(run.aborts).toEqual([{ path: { id: "ses_a" } }])
      // stopped once past its characters, not before the count's worth was streamed
      const chars = Math.max(...asked.passages.map((p) => p.chars))
      expect(stoppedAt!).toBeGreaterThan(example.answer.length)
      expect(stoppedAt!).toBeLessThanOrEqual(INTRO.length + chars + 40)
      expect(run.toasts[0].message).toStartWith("loop-guard: stopped the agent: its answer repeated")
    })
  }
})

describe("asked, then a different passage chanted in the same answer: stopped", () => {
  for (const example of EXAMPLES) {
    for (const [joint, gap] of [
      ["after a paragraph", "\n\nNow for something else.\n\n"],
      ["straight after", ""],
    ]) {
      test(`${example.name}, the chant ${joint}`, async () => {
        const run = await startLoopGuard()
        await say(run, "ses_a", example.message)
        const asked = INTRO + example.answer + gap
        const stoppedAt = await stream(run, "ses_a", "prt_1", "text", asked + CHANT.repeat(100))
        expect(run.aborts).toEqual([{ path: { id: "ses_a" } }])
        expect(stoppedAt!).toBeGreaterThan(asked.length) // the asked part ran whole
        expect(stoppedAt!).toBeLessThanOrEqual(asked.length + 1000) // the chant within the usual rule
      })
    }
  }
})

/** The examples the rule stops when nobody asked for them. */
const LOOPS = EXAMPLES.filter((example) => !example.numbered)

describe("not asked: the same answer is stopped", () => {
  for (const message of [
    null,
    "summarize the build script",
    "print the build log",
    "why does the test fail 3 times in a row?",
    "repeat the last command",
    "write 'ok' 3 times",
  ]) {
    for (const example of LOOPS) {
      test(`after ${message === null ? "no message" : JSON.stringify(message)}: ${example.name}`, async () => {
        const run = await startLoopGuard()
        if (message !== null) await say(run, "ses_a", message)
        expect(await stream(run, "ses_a", "prt_1", "text", example.answer)).not.toBeNull()
        expect(run.aborts).toEqual([{ path: { id: "ses_a" } }])
        expect(run.logs.filter((l) => l.level === "info")).toEqual([])
      })
    }
  }

  test("the reasoning stays watched: asked, a reasoning that repeats the passage is stopped", async () => {
    const run = await startLoopGuard()
    await say(run, "ses_a", "print 'ha' 2000 times")
    expect(await stream(run, "ses_a", "prt_r", "reasoning", "ha".repeat(2000))).not.toBeNull()
    expect(run.toasts[0].message).toStartWith("loop-guard: stopped the agent: its reasoning repeated")
  })

  test("another session's message allows nothing here", async () => {
    const run = await startLoopGuard()
    await say(run, "ses_b", "print 'ha' 2000 times")
    await say(run, "ses_a", "summarize the build script")
    expect(await stream(run, "ses_b", "prt_b", "text", "ha".repeat(2000))).toBeNull()
    expect(await stream(run, "ses_a", "prt_a", "text", "ha".repeat(2000))).not.toBeNull()
    expect(run.aborts).toEqual([{ path: { id: "ses_a" } }])
  })
})

describe("the allowance of one turn does not reach the next", () => {
  for (const example of LOOPS) {
    test(example.name, async () => {
      const run = await startLoopGuard()
      await say(run, "ses_a", example.message)
      expect(await stream(run, "ses_a", "prt_1", "text", example.answer)).toBeNull()
      await run.hooks.event({ event: { type: "session.idle", properties: { sessionID: "ses_a" } } })
      await say(run, "ses_a", "thanks; now summarize the build script")
      expect(await stream(run, "ses_a", "prt_2", "text", example.answer)).not.toBeNull()
      expect(run.aborts).toEqual([{ path: { id: "ses_a" } }])
    })
  }

  test("each part of the asked turn may repeat it (a text before and after a tool call)", async () => {
    const run = await startLoopGuard()
    await say(run, "ses_a", "print 'ha' 2000 times")
    expect(await stream(run, "ses_a", "prt_1", "text", "ha".repeat(2000))).toBeNull()
    expect(await stream(run, "ses_a", "prt_2", "text", "ha".repeat(2000))).toBeNull()
    expect(run.aborts).toEqual([])
  })
})

describe("askedRepetition: what counts as asking", () => {
  const CASES: [string, { count: number; passages: string[] } | null][] = [
    ["print 'ha' 2000 times", { count: 2000, passages: ["ha"] }],
    [`"print 'ha' 2000 times"`, { count: 2000, passages: ["ha", "print 'ha' 2000 times"] }],
    ["don't stop: print 'ha' 2,000 times", { count: 2000, passages: ["ha"] }],
    ["a 200 x 16 grid of zeros, one row per line", { count: 3200, passages: ["0"] }],
    ["a 200 by 16 grid of dots", { count: 3200, passages: ["."] }],
    ["print 200 rows of 16 zeros", { count: 3200, passages: ["0"] }],
    ["repeat the word test 500 times, each on its own line", { count: 500, passages: ["test"] }],
    ["write `SELECT 1;` 40 lines", { count: 40, passages: ["select 1;"] }],
    ["write 'x' 10 copies", { count: 10, passages: ["x"] }],
    ["summarize the build script", null],
    ["print 'ha'", null], // a passage, no count
    ["run the tests 5 times", null], // a count, no passage
    ["write 'ha' 1 times", null], // a count under 2
    ["the word is done, thanks", null],
  ]
  for (const [message, expected] of CASES) {
    test(JSON.stringify(message), () => {
      const asked = askedRepetition(message)
      expect(asked && { count: asked.count, passages: asked.passages.map((p) => p.text) }).toEqual(expected)
    })
  }

  test("a passage's characters: the margin times the count's worth of copies with a separator", () => {
    expect(askedRepetition("print 'ha' 2000 times")!.passages[0].chars).toBe(Math.ceil(ASKED_MARGIN * 2000 * 4))
  })

  const COPIES: [string, string, boolean][] = [
    ["ha", "ha", true],
    ["ah", "ha", true], // another rotation of the copy
    ["a\nh", "ha", true],
    ["0 0 0 0\n", "0", true],
    ["7. all work\n", "all work", true],
    ["ha ", "ha ha", true], // the passage longer than the copy
    ["ho ", "ha", false],
    ["haha yes ", "ha", false], // a letter outside the passage
    ["1 1 1\n", "0", false],
  ]
  for (const [copy, passage, made] of COPIES) {
    test(`madeOfAsked(${JSON.stringify(copy)}, ${JSON.stringify(passage)}) is ${made}`, () => {
      expect(madeOfAsked(copy, passage)).toBe(made)
    })
  }
})

describe("chat.message never fails the prompt", () => {
  test("odd inputs are ignored, a later message still counts", async () => {
    const run = await startLoopGuard()
    for (const [input, output] of [
      [undefined, undefined],
      [{}, {}],
      [{ sessionID: "ses_a" }, { parts: "not a list" }],
      [{ sessionID: "ses_a" }, { parts: [null, { type: "text", text: 5 }, { type: "file" }] }],
    ])
      await run.hooks["chat.message"](input, output)
    await run.hooks["chat.message"](
      { sessionID: "ses_a" },
      { parts: [{ type: "text", text: "print 'ha' 2000 times", synthetic: true }] },
    )
    expect(await stream(run, "ses_a", "prt_1", "text", "ha".repeat(2000))).not.toBeNull() // synthetic: not the person's
    await say(run, "ses_a", "print 'ha' 2000 times")
    expect(await stream(run, "ses_a", "prt_2", "text", "ha".repeat(2000))).toBeNull()
  })
})

// End-to-end: loop-guard's stream rule in a real opencode (issue 17, item 5). The scripted model streams its
// reasoning (`reasoning_content`) and its answer (`content`) in small pieces with a pause between them
// (doctor/fake-llm.mjs); loop-guard watches every piece through `message.part.delta` and stops a part that repeats
// itself with `client.session.abort`. Asserted here, under `opencode serve`:
// - what the model server saw: its stream closed long before its end (`_fake.chunksSent` of `_fake.chunksTotal`);
// - what the run reports: the prompt ends with `MessageAbortedError`;
// - what the human is shown: loop-guard's error toast (`tui.toast.show` events of GET /event) and a log line;
// - what the model receives with the human's next message: the looping part cut, with loop-guard's note;
// - a passage of 1,200 characters repeated: the stream closed after its 4th copy, before the 6-copy rule's stop;
// - and that a long legitimate answer (a table, a list, code blocks with repeated lines) runs to its end.
// - a repetition the person asked for (`print 'ha' 2000 times`) runs whole with no toast; the same answer to another
//   request, or in the next turn, is stopped.
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import {
  agentRequests,
  createSandbox,
  runOpencode,
  startServe,
  userTexts,
  type Sandbox,
  type Serve,
  type StreamedStep,
} from "./e2e/harness"

// Each describe starts one opencode serve and sends two prompts; slow when the machine is loaded.
const SETUP_TIMEOUT = 240_000
// serve.close() gives opencode 5 s to end before SIGKILL (harness.ts): more than bun's 5 s hook default.
const CLOSE_TIMEOUT = 30_000

const sandboxes: Sandbox[] = []
afterAll(() => sandboxes.forEach((sb) => sb.cleanup()))

/** loop-guard alone: the stream rule is loop-guard's, and semantic-anchors' tips would add toasts of their own. */
function loopGuardOnly() {
  const sb = createSandbox({ install: ["--only", "loop-guard"] })
  sandboxes.push(sb)
  return sb
}

/** Pieces of 20 characters, 5 ms apart: a loop of 400 copies would stream for about 5 s. */
const LOOP_STREAM = { chunk: 20, delayMs: 5 }
const COPIES = 400
const REASONING_PASSAGE = "I should check the configuration file once more. " // 49 characters
const ANSWER_PASSAGE = "Let me re-run the tests to be sure they pass. " // 46 characters

/** How many times `passage` occurs in `text`. */
const occurrences = (text: string, passage: string) => text.split(passage).length - 1

/** Polls until the fake model's reply to `request` has ended (completed, or closed by opencode). */
async function replyEnded(request: any, timeoutMs = 10_000): Promise<any> {
  const deadline = Date.now() + timeoutMs
  while (!request._fake.finished) {
    if (Date.now() > deadline) throw new Error("the scripted model's reply did not end")
    await new Promise((r) => setTimeout(r, 20))
  }
  return request._fake
}

/** The parts of a session's messages (GET /session/:id/message), with their message's role and error. */
async function sessionParts(
  serve: Serve,
  id: string,
): Promise<{ role: string; error?: string; type: string; text?: string }[]> {
  const r = await serve.api("GET", `/session/${id}/message`)
  return (r.json ?? []).flatMap((m: any) =>
    (m.parts ?? []).map((p: any) => ({ role: m.info?.role, error: m.info?.error?.name, type: p.type, text: p.text })),
  )
}

/** loop-guard's toasts, as the TUI is told them. */
const loopGuardToasts = (serve: Serve) =>
  serve.events
    .filter((e) => e.type === "tui.toast.show" && String(e.properties?.message).startsWith("loop-guard"))
    .map((e) => e.properties as { message: string; variant: string })

/** The request that answers the user message containing `text` (its first step). */
const requestFor = (serve: Serve, text: string) =>
  agentRequests(serve.llm).find((q) => userTexts(q).at(-1)?.includes(text))

/** The assistant messages of a request, as the model reads them back. */
const assistantsOf = (request: any): { content?: string; reasoning_content?: string }[] =>
  (request?.messages ?? []).filter((m: any) => m.role === "assistant")

/**
 * One session: a first prompt answered by `first` (a streamed step), then a second prompt answered with a plain
 * text. Resolves with what each prompt returned.
 */
async function twoPrompts(first: StreamedStep) {
  const sb = loopGuardOnly()
  const serve = await startServe(sb, {
    script: [first],
    pickStep: (body) => (userTexts(body).at(-1)?.includes("second message") ? { text: "Second answer." } : undefined),
  })
  try {
    const id = await serve.createSession()
    const firstReply = await serve.prompt(id, "fix the failing build")
    const secondReply = await serve.prompt(id, "second message: what now?")
    return { sb, serve, id, firstReply, secondReply }
  } catch (error) {
    await serve.close() // the describe's afterAll has no serve to close then
    throw error
  }
}

/**
 * Whether opencode's log holds `text`, read again for up to 10 s: `serve` writes its log file in batches, so a line
 * logged at the abort can reach the file after the run's reply has come back.
 */
async function logOnceWritten(sb: { log(): string }, text: string, timeoutMs = 10_000): Promise<boolean> {
  const until = Date.now() + timeoutMs
  while (!sb.log().includes(text)) {
    if (Date.now() > until) return false
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  return true
}

/**
 * The first agent request's stream of `more than` pieces was closed by the client long before its end (piece 40 or
 * later, before a quarter of them); prints the figures and the toast for the README.
 */
async function expectClosedEarly(serve: Serve, label: string, more: number) {
  const fake = await replyEnded(agentRequests(serve.llm)[0])
  console.log(
    `${label}: ${fake.chunksSent} of ${fake.chunksTotal} pieces of 20 characters sent; toast: ${loopGuardToasts(serve)[0]?.message}`,
  )
  expect(fake.closedEarly).toBe(true)
  expect(fake.chunksTotal).toBeGreaterThan(more)
  expect(fake.chunksSent).toBeGreaterThanOrEqual(40)
  expect(fake.chunksSent).toBeLessThan(fake.chunksTotal / 4)
}

describe("e2e stream: a looping reasoning is stopped", () => {
  let s: Awaited<ReturnType<typeof twoPrompts>>
  beforeAll(async () => {
    s = await twoPrompts({
      reasoning: "The build fails in the config loader. " + REASONING_PASSAGE.repeat(COPIES),
      text: "This answer is never reached.",
      ...LOOP_STREAM,
    })
  }, SETUP_TIMEOUT)
  afterAll(() => s?.serve.close(), CLOSE_TIMEOUT)

  test("the model server sees its stream closed long before its end; the run reports the abort", async () => {
    expect(s.firstReply.info?.error?.name).toBe("MessageAbortedError")
    // The rule stops 800 characters into the loop (piece 42, after the first sentence); what else was sent is the
    // host's latency.
    await expectClosedEarly(s.serve, "reasoning loop", 950)
    // The reasoning part was saved with what had arrived; the answer never started.
    const parts = await sessionParts(s.serve, s.id)
    const reasoning = parts.filter((p) => p.type === "reasoning")
    expect(reasoning.length).toBe(1)
    expect(reasoning[0].error).toBe("MessageAbortedError")
    expect(occurrences(reasoning[0].text ?? "", REASONING_PASSAGE)).toBeGreaterThanOrEqual(6)
    expect(parts.some((p) => p.type === "text" && p.text?.includes("never reached"))).toBe(false)
  })

  test("the human is told, in an error toast naming the reasoning, the passage's length and count, not its text", async () => {
    const toasts = loopGuardToasts(s.serve)
    expect(toasts.length).toBe(1)
    expect(toasts[0].variant).toBe("error")
    expect(toasts[0].message).toMatch(
      /^loop-guard: stopped the agent: its reasoning repeated a 49-character passage \d+ times$/,
    )
    expect(toasts[0].message).not.toContain("configuration")
    expect(await logOnceWritten(s.sb, "loop-guard: stopped the session's run: its reasoning repeated")).toBe(true)
  })

  test("the next message works, and the loop is not in what the model receives", () => {
    expect(s.secondReply.info?.error).toBeUndefined()
    expect(s.secondReply.parts?.find((p: any) => p.type === "text")?.text).toBe("Second answer.")
    const next = requestFor(s.serve, "second message")
    expect(next).toBeDefined()
    expect(occurrences(JSON.stringify(next.messages), REASONING_PASSAGE)).toBeLessThanOrEqual(2)
    // What opencode 1.18.33 sends back for a turn aborted in its reasoning: nothing. The assistant message holds
    // only a reasoning part, and the request carries no assistant message for it (reasoning goes back to the model,
    // as `reasoning_content`, only beside a text: see the answer's case).
    expect(assistantsOf(next)).toEqual([])
  })
})

describe("e2e stream: a looping answer is stopped", () => {
  let s: Awaited<ReturnType<typeof twoPrompts>>
  beforeAll(async () => {
    s = await twoPrompts({
      reasoning: "The user wants the build fixed.",
      text: "I fixed the import in the loader.\n\n" + ANSWER_PASSAGE.repeat(COPIES),
      ...LOOP_STREAM,
    })
  }, SETUP_TIMEOUT)
  afterAll(() => s?.serve.close(), CLOSE_TIMEOUT)

  test("the model server sees its stream closed long before its end; the run reports the abort", async () => {
    expect(s.firstReply.info?.error?.name).toBe("MessageAbortedError")
    await expectClosedEarly(s.serve, "answer loop", 900)
    const parts = await sessionParts(s.serve, s.id)
    const text = parts.filter((p) => p.type === "text" && p.error === "MessageAbortedError")
    expect(text.length).toBe(1)
    expect(occurrences(text[0].text ?? "", ANSWER_PASSAGE)).toBeGreaterThanOrEqual(6)
  })

  test("the human is told, in an error toast naming the answer, the passage's length and count, not its text", () => {
    const toasts = loopGuardToasts(s.serve)
    expect(toasts.length).toBe(1)
    expect(toasts[0].variant).toBe("error")
    expect(toasts[0].message).toMatch(
      /^loop-guard: stopped the agent: its answer repeated a 46-character passage \d+ times$/,
    )
    expect(toasts[0].message).not.toContain("tests")
  })

  test("the next message works; the model receives the answer cut after the passage, with loop-guard's note", () => {
    expect(s.secondReply.info?.error).toBeUndefined()
    expect(s.secondReply.parts?.find((p: any) => p.type === "text")?.text).toBe("Second answer.")
    const next = requestFor(s.serve, "second message")
    const [cut] = assistantsOf(next)
    expect(cut).toBeDefined()
    const content = String(cut.content)
    expect(content.startsWith("I fixed the import in the loader.\n\n" + ANSWER_PASSAGE)).toBe(true)
    expect(occurrences(content, ANSWER_PASSAGE)).toBeLessThanOrEqual(2)
    expect(content).toContain("[loop-guard stopped a repetition here")
    // The reasoning of that turn goes back too, untouched.
    expect(cut.reasoning_content).toBe("The user wants the build fixed.")
    // Nowhere else in the request: the loop is gone from the model's context.
    expect(occurrences(JSON.stringify(next.messages), ANSWER_PASSAGE)).toBeLessThanOrEqual(2)
  })
})

/**
 * A passage of 1,200 characters, its sentences all different: the long-passage rule's case (issue 22, item 7). The
 * main rule would wait for its 6th copy; the long rule stops it at the end of its 4th.
 */
function longPassage(): string {
  const files = ["loader", "parser", "schema", "cache", "router", "config", "session", "index"]
  let text = ""
  for (let i = 0; text.length < 1198; i++)
    text += `Step ${i + 1}: open src/${files[i % 8]}_${i * 7}.ts and compare its ${i * 13 + 5} exports with the tests. `
  return text.slice(0, 1198) + ". "
}
const LONG_PASSAGE = longPassage()
const LONG_BEFORE = "I fixed the import in the loader.\n\n"

describe("e2e stream: a 1,200-character passage repeated in the answer is stopped by the end of its 4th copy", () => {
  let s: Awaited<ReturnType<typeof twoPrompts>>
  beforeAll(async () => {
    s = await twoPrompts({
      reasoning: "The user wants the build fixed.",
      text: LONG_BEFORE + LONG_PASSAGE.repeat(10),
      ...LOOP_STREAM,
    })
  }, SETUP_TIMEOUT)
  afterAll(() => s?.serve.close(), CLOSE_TIMEOUT)

  test("the stream is closed after the 4th copy's last piece, before the 6-copy rule's stop; the run reports the abort", async () => {
    expect(LONG_PASSAGE.length).toBe(1200)
    expect(s.firstReply.info?.error?.name).toBe("MessageAbortedError")
    const fake = await replyEnded(agentRequests(s.serve.llm)[0])
    const piece = LOOP_STREAM.chunk
    const fourth = Math.ceil((LONG_BEFORE.length + 4 * 1200) / piece) // the piece that carries the verdict
    console.log(
      `long passage: ${fake.chunksSent} of ${fake.chunksTotal} pieces of ${piece} characters sent (the 4th copy ` +
        `ends in piece ${fourth}); toast: ${loopGuardToasts(s.serve)[0]?.message}`,
    )
    expect(fake.closedEarly).toBe(true)
    expect(fake.chunksSent).toBeGreaterThanOrEqual(fourth)
    // the rest is the host's latency (5 to 26 pieces in 3 runs on a loaded 2-core machine); the main rule alone
    // would stop at the 6th copy's end, 120 pieces later than the 4th
    expect(fake.chunksSent).toBeLessThan((LONG_BEFORE.length + 6 * 1200) / piece)
  })

  test("the human is told: a 1200-character passage 4 times", () => {
    const toasts = loopGuardToasts(s.serve)
    expect(toasts.map((t) => [t.message, t.variant])).toEqual([
      ["loop-guard: stopped the agent: its answer repeated a 1200-character passage 4 times", "error"],
    ])
  })

  test("the model receives the answer cut after the passage's first copy, with loop-guard's note", () => {
    expect(s.secondReply.parts?.find((p: any) => p.type === "text")?.text).toBe("Second answer.")
    const [cut] = assistantsOf(requestFor(s.serve, "second message"))
    const content = String(cut?.content)
    expect(content.startsWith(LONG_BEFORE + LONG_PASSAGE + "\n\n[loop-guard stopped a repetition here")).toBe(true)
    expect(occurrences(content, LONG_PASSAGE)).toBe(1)
  })
})

/**
 * A 20 KB answer a coding agent writes: prose, a Markdown table, a list of near-identical paths, a code block whose
 * lines repeat (a zero-filled byte table, 40 identical lines) and a quoted log with repeated lines. Every number
 * differs from row to row, as in real reports; the repetition is in the code and the log, where it is legitimate.
 */
function legitimateAnswer(): string {
  const out: string[] = ["# Migration report", ""]
  const verbs = ["loaded", "parsed", "validated", "migrated", "indexed", "compiled", "bundled"]
  const section = (n: number) => {
    out.push(`## Part ${n}`, "")
    for (let i = 0; i < 6; i++) {
      const k = n * 10 + i
      out.push(
        `Module ${k} ${verbs[k % verbs.length]} its settings from \`config/part_${n}/module_${k}.yaml\` in ${(k * 37) % 991} ms; ` +
          `${(k * 13) % 97} of its ${100 + k} checks were rewritten, and the cache hit rate went from ${(k * 7) % 61}% to ${(k * 11) % 89}%.`,
      )
    }
    out.push("")
  }
  for (let n = 1; n <= 8; n++) section(n)
  out.push("| module | time (ms) | status | notes |", "| --- | --- | --- | --- |")
  for (let i = 1; i <= 60; i++)
    out.push(
      `| module_${String(i).padStart(3, "0")} | ${(i * 53) % 907} | ${i % 9 === 0 ? "failed" : "passed"} | run ${i} |`,
    )
  out.push("", "Files changed:", "")
  for (let i = 1; i <= 50; i++) out.push(`- src/services/handlers/handler_${String(i).padStart(3, "0")}.ts`)
  out.push("", "The lookup table is zero-filled on purpose:", "", "```c", "static const uint8_t table[320] = {")
  for (let i = 0; i < 40; i++) out.push("    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,")
  out.push("};", "```", "", "The log of the failed run:", "", "```")
  for (let i = 0; i < 30; i++) out.push("WARN  connection refused, retrying in 5s")
  out.push("ERROR gave up after 30 retries", "```", "", "---", "")
  for (let n = 9; n <= 24; n++) section(n)
  out.push("All checks pass now.")
  return out.join("\n")
}

describe("e2e stream: a 20 KB legitimate answer runs to its end", () => {
  const answer = legitimateAnswer()
  let serve: Serve
  let reply: any
  let id: string
  beforeAll(async () => {
    serve = await startServe(loopGuardOnly(), {
      script: [{ reasoning: "The user wants a report of the migration.", text: answer, chunk: 40, delayMs: 2 }],
    })
    try {
      id = await serve.createSession()
      reply = await serve.prompt(id, "write the migration report")
    } catch (error) {
      await serve.close()
      throw error
    }
  }, SETUP_TIMEOUT)
  afterAll(() => serve?.close(), CLOSE_TIMEOUT)

  test("the answer is 20 KB with a table, a list, a code block and a log whose lines repeat", () => {
    expect(answer.length).toBeGreaterThanOrEqual(20_000)
    expect(answer).toContain("| --- | --- | --- | --- |")
    expect(answer).toContain("- src/services/handlers/handler_050.ts")
    expect(occurrences(answer, "    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,\n")).toBe(40)
    expect(occurrences(answer, "WARN  connection refused, retrying in 5s\n")).toBe(30)
  })

  test("every piece was sent, the run finished normally, the whole answer was saved, no toast", async () => {
    expect(reply.info?.error).toBeUndefined()
    const fake = await replyEnded(agentRequests(serve.llm)[0])
    expect(fake.closedEarly).toBe(false)
    expect(fake.chunksSent).toBe(fake.chunksTotal)
    expect(fake.chunksTotal).toBeGreaterThan(500)
    const text = (await sessionParts(serve, id)).find((p) => p.type === "text" && p.role === "assistant")
    expect(text?.text).toBe(answer)
    expect(loopGuardToasts(serve)).toEqual([])
  })
})

describe("e2e stream: OPENCODE_LOOP_GUARD_STREAM=warn tells, and stops nothing", () => {
  let serve: Serve
  let reply: any
  beforeAll(async () => {
    const sb = loopGuardOnly()
    sb.env.OPENCODE_LOOP_GUARD_STREAM = "warn"
    serve = await startServe(sb, { script: [{ text: ANSWER_PASSAGE.repeat(200), chunk: 40, delayMs: 2 }] })
    try {
      reply = await serve.prompt(await serve.createSession(), "fix the failing build")
    } catch (error) {
      await serve.close()
      throw error
    }
  }, SETUP_TIMEOUT)
  afterAll(() => serve?.close(), CLOSE_TIMEOUT)

  test("the looping answer streams to its end; the human gets a warning toast that says it was not stopped", async () => {
    expect(reply.info?.error).toBeUndefined()
    const fake = await replyEnded(agentRequests(serve.llm)[0])
    expect(fake.closedEarly).toBe(false)
    expect(fake.chunksSent).toBe(fake.chunksTotal)
    const toasts = loopGuardToasts(serve)
    expect(toasts.length).toBe(1)
    expect(toasts[0].variant).toBe("warning")
    expect(toasts[0].message).toMatch(
      /^loop-guard: its answer repeated a 46-character passage \d+ times \(warn mode: not stopped\)$/,
    )
  })
})

/**
 * A repetition the person asked for: `opencode run "print 'ha' 2000 times"` (run wraps the prompt in double quotes),
 * the scripted model answering with `ha` 2,000 times. loop-guard reads the message in `chat.message` and lets the
 * answer run whole; the same answer to a request that asks for nothing of the kind is stopped as any loop.
 */
describe("e2e stream: a repetition the person asked for runs whole under opencode run", () => {
  const HA = "ha".repeat(2000)
  // 10 ms a piece (2 s in all): the stop comes at about the 40th piece, and the abort has time to reach the model
  // server before half the answer is sent, even on a loaded machine
  const runFor = (prompt: string) =>
    runOpencode(loopGuardOnly(), {
      prompt,
      args: ["--print-logs"],
      script: [{ reasoning: "The user wants ha repeated.", text: HA, chunk: 20, delayMs: 10 }],
    })

  test(
    "asked: every piece is streamed, the run ends normally, the whole answer is printed, nothing is stopped",
    async () => {
      const r = await runFor("print 'ha' 2000 times")
      const fake = await replyEnded(agentRequests(r.llm)[0])
      console.log(`asked repetition: ${fake.chunksSent} of ${fake.chunksTotal} pieces sent, exit ${r.code}`)
      expect(r.code).toBe(0)
      expect(fake.closedEarly).toBe(false)
      expect(fake.chunksSent).toBe(fake.chunksTotal)
      const text = r.events.filter((e) => e.type === "text").map((e) => e.part?.text ?? "")
      expect(text).toContain(HA)
      // what the log says: an asked-for repetition ran; no stop, no word of the person's message
      const lines = r.stderr.split("\n").filter((line) => line.includes("loop-guard"))
      expect(lines.some((line) => line.includes("the answer repeats what the person asked to be repeated"))).toBe(true)
      expect(lines.some((line) => line.includes("stopped"))).toBe(false)
      expect(lines.join("\n")).not.toContain("print")
    },
    SETUP_TIMEOUT,
  )

  test(
    "not asked: the same answer to another request is stopped",
    async () => {
      const r = await runFor("summarize the build script")
      const fake = await replyEnded(agentRequests(r.llm)[0])
      console.log(`same answer, not asked: ${fake.chunksSent} of ${fake.chunksTotal} pieces sent, exit ${r.code}`)
      expect(r.code).not.toBe(0)
      expect(fake.closedEarly).toBe(true)
      expect(fake.chunksSent).toBeLessThan(fake.chunksTotal / 2)
      expect(r.stderr).toContain("loop-guard: stopped the session's run: its answer repeated")
      expect(r.stderr).not.toContain("asked to be repeated")
    },
    SETUP_TIMEOUT,
  )
})

describe("e2e stream: the asked repetition under opencode serve, toasts seen, and the next turn", () => {
  const HA = "ha".repeat(2000)
  let serve: Serve
  let asked: any
  let next: any
  beforeAll(async () => {
    serve = await startServe(loopGuardOnly(), {
      script: [],
      pickStep: () => ({ text: HA, chunk: 20, delayMs: 2 }),
    })
    try {
      const id = await serve.createSession()
      asked = await serve.prompt(id, "print 'ha' 2000 times")
      next = await serve.prompt(id, "thanks; now summarize the build script")
    } catch (error) {
      await serve.close()
      throw error
    }
  }, SETUP_TIMEOUT)
  afterAll(() => serve?.close(), CLOSE_TIMEOUT)

  test("asked: the whole answer, no toast; the next message asks for nothing: the same answer is stopped, with the toast", async () => {
    expect(asked.info?.error).toBeUndefined()
    expect(asked.parts?.find((p: any) => p.type === "text")?.text).toBe(HA)
    const [first, second] = agentRequests(serve.llm)
    expect((await replyEnded(first)).closedEarly).toBe(false)
    expect(next.info?.error?.name).toBe("MessageAbortedError")
    expect((await replyEnded(second)).closedEarly).toBe(true)
    expect(loopGuardToasts(serve).map((t) => [t.message, t.variant])).toEqual([
      [
        expect.stringMatching(/^loop-guard: stopped the agent: its answer repeated a \d+-character passage \d+ times$/),
        "error",
      ],
    ])
  })
})

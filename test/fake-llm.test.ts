// The scripted model's streaming (doctor/fake-llm.mjs), without opencode: a streamed step arrives as its reasoning
// pieces, then its text pieces, spaced by its delay; a client that closes the stream early stops the writing, and the
// request records how many pieces were sent before that. The end-to-end stream tests (test/e2e-loop-guard-stream)
// rest on these counts.
import { afterEach, describe, expect, test } from "bun:test"
import { piecesOf, startFakeLLM } from "../doctor/fake-llm.mjs"

const servers: { close(): Promise<void> }[] = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()))
})

async function serve(script: any[]) {
  const llm = await startFakeLLM({ script })
  servers.push(llm)
  return llm
}

/** An agent-loop request (it carries tools) asking for a stream, as opencode sends it. */
const post = (baseURL: string, init: { stream?: boolean; signal?: AbortSignal } = {}) =>
  fetch(`${baseURL}/chat/completions`, {
    method: "POST",
    body: JSON.stringify({ stream: init.stream ?? true, tools: [{ type: "function" }], messages: [] }),
    signal: init.signal,
  })

/** The `choices[0].delta` of each SSE data line of a whole reply. */
function deltasOf(sse: string): any[] {
  return sse
    .split("\n\n")
    .filter((b) => b.startsWith("data: {"))
    .map((b) => JSON.parse(b.slice(6)))
    .flatMap((c) => c.choices.map((ch: any) => ch.delta))
}

/** Polls until the request's reply has ended (completed or closed by the client). */
async function replyEnded(request: any, timeoutMs = 5000) {
  const deadline = Date.now() + timeoutMs
  while (!request._fake.finished) {
    if (Date.now() > deadline) throw new Error("the fake model's reply did not end")
    await new Promise((r) => setTimeout(r, 10))
  }
  return request._fake
}

describe("piecesOf: how a streamed field is cut", () => {
  test.each([
    ["no chunk: one piece", "abcdef", undefined, ["abcdef"]],
    ["every 4 characters, the last shorter", "abcdefghij", 4, ["abcd", "efgh", "ij"]],
    ["code points, not UTF-16 units", "a😀b😀c", 2, ["a😀", "b😀", "c"]],
    ["an array is sent as given", ["x", "yz"], 1, ["x", "yz"]],
    ["empty string: no piece", "", 3, []],
    ["absent: no piece", undefined, 3, []],
  ])("%s", (_name, value, chunk, expected) => {
    expect(piecesOf(value, chunk)).toEqual(expected)
  })
})

describe("fake-llm streams a step as many chunks", () => {
  test("reasoning pieces first (reasoning_content), then text pieces (content); all sent, not closed early", async () => {
    const llm = await serve([{ reasoning: "think ".repeat(5), text: "answer", chunk: 6, delayMs: 1 }])
    const deltas = deltasOf(await (await post(llm.baseURL)).text())
    const reasoning = deltas.filter((d) => "reasoning_content" in d).map((d) => d.reasoning_content)
    const content = deltas.filter((d) => d.content).map((d) => d.content)
    expect(reasoning).toEqual(Array(5).fill("think "))
    expect(content).toEqual(["answer"])
    // Order: every reasoning piece comes before the first text piece.
    const firstText = deltas.findIndex((d) => d.content)
    expect(deltas.slice(firstText).some((d) => "reasoning_content" in d)).toBe(false)
    const fake = await replyEnded(llm.requests[0])
    expect(fake).toMatchObject({ chunksTotal: 6, chunksSent: 6, closedEarly: false, finished: true })
  })

  test("delayMs spaces the pieces out", async () => {
    const llm = await serve([{ text: "abcdefghij", chunk: 1, delayMs: 20 }])
    const started = Date.now()
    await (await post(llm.baseURL)).text()
    // 9 pauses of 20 ms between 10 pieces: at least 180 ms (timers do not fire early).
    expect(Date.now() - started).toBeGreaterThanOrEqual(170)
  })

  test("a client that closes the stream stops the writing; the request records the pieces sent until then", async () => {
    const llm = await serve([{ reasoning: "loop! ".repeat(400), chunk: 6, delayMs: 5 }])
    const abort = new AbortController()
    const res = await post(llm.baseURL, { signal: abort.signal })
    const reader = res.body!.getReader()
    const dec = new TextDecoder()
    let seen = ""
    while ((seen.match(/reasoning_content/g) ?? []).length < 10) seen += dec.decode((await reader.read()).value)
    abort.abort()
    const fake = await replyEnded(llm.requests[0])
    expect(fake.closedEarly).toBe(true)
    expect(fake.chunksTotal).toBe(400)
    // Closed after the 10th piece read: a few more may have been in flight, nowhere near the 400.
    expect(fake.chunksSent).toBeGreaterThanOrEqual(10)
    expect(fake.chunksSent).toBeLessThan(40)
    // The writing really stopped: the count does not move afterwards.
    const sent = fake.chunksSent
    await new Promise((r) => setTimeout(r, 100))
    expect(llm.requests[0]._fake.chunksSent).toBe(sent)
  })

  test("a plain {text} step is still one content chunk, and a tool step none", async () => {
    const llm = await serve([{ text: "plain" }, { tool: "read", args: { filePath: "x" } }])
    const deltas = deltasOf(await (await post(llm.baseURL)).text())
    expect(deltas.filter((d) => d.content).map((d) => d.content)).toEqual(["plain"])
    expect(llm.requests[0]._fake).toMatchObject({ chunksTotal: 1, chunksSent: 1, closedEarly: false })
  })

  test("the non-streaming form joins the pieces", async () => {
    const llm = await serve([{ reasoning: ["a", "b"], text: ["c", "d"] }])
    const reply: any = await (await post(llm.baseURL, { stream: false })).json()
    expect(reply.choices[0].message).toMatchObject({ content: "cd", reasoning_content: "ab" })
  })

  test.each([
    ["no text and no reasoning", { chunk: 4 }],
    ["a chunk of 0", { text: "x", chunk: 0 }],
    ["a negative delay", { text: "x", delayMs: -1 }],
    ["a reasoning that is not text", { reasoning: 5 }],
  ])("a bad streamed step is refused with what it must be: %s", async (_name, step) => {
    await expect(startFakeLLM({ script: [step] })).rejects.toThrow(/script\[0\] must be .*text\?, reasoning\?/)
  })
})

// A scripted, OpenAI-compatible model server for driving a real opencode offline (plain Node, no dependencies).
//
// Why: the doctor (`install.sh --check`, check.mjs) and the end-to-end suite (test/e2e) must prove what the model
// *sees* in a real opencode (a blocked call's message arrives as that tool's result in the next request) without any
// network. opencode talks to this server through its bundled
// "@ai-sdk/openai-compatible" provider, with `options.baseURL` pointing here.
//
// How: `POST .../chat/completions` answers with streaming SSE. The reply is chosen by the number of `assistant`
// messages already in the request's `messages` (step i = i previous model turns in this session; opencode 1.18.33
// sends no message back for a turn aborted in its reasoning, so such a turn does not count), so one script serves
// every session of an `opencode serve` process. A script step is one of
//   { tool: "read", args: {...} }                      one tool call
//   { tools: [{ tool, args }, ...] }                   parallel calls in one step
//   { text: "..." }                                    a plain answer, ending the agent loop
//   { reasoning: "...", text: "...", chunk: 40, delayMs: 5 }
//                                                      a streamed answer: the reasoning first, as
//                                                      `delta.reasoning_content` pieces, then the text as
//                                                      `delta.content` pieces, `delayMs` between two pieces
// Streaming: `reasoning` and `text` are each optional (one of them is needed) and each a string or an array of
// strings. A string is cut into pieces of `chunk` characters (code points; no `chunk`: one piece); an array is sent
// piece by piece as given. `delayMs` (default 0: no pause) is waited before every piece but the first, so a client
// can close the stream between two pieces; the server then stops writing. The bundled
// "@ai-sdk/openai-compatible" provider turns `reasoning_content` into a reasoning part of the message.
// Past the end of the script the server answers a short text and stops. Requests with no `tools` array are
// opencode's title requests: they get a short title and are marked `_fake.title = true`. Every parsed request body
// is kept (in order) with an added `_fake: { title, step }` field, and appended as one JSON line to `logFile`.
// For each streamed reply, `_fake` also records what was sent, updated as the reply goes (in `requests`, not in
// `logFile`, which is written on arrival): `chunksTotal` (reasoning and text pieces of the step), `chunksSent`
// (pieces written before the client closed the stream or the reply ended), `closedEarly` (true when the client
// closed the stream before its end: opencode aborted the run) and `finished` (true once the reply ended either way).
//
// Module use:  const llm = await startFakeLLM({ script, logFile });  llm.baseURL, llm.port, llm.requests, llm.close()
//              Optional `beforeReply(body)`: awaited before answering a request (e.g. a barrier that makes two
//              sessions alternate deterministically); `body._fake` is already set.
//              Optional `pickStep(body, stepNo)`: returns a step to answer with instead of `script[stepNo]`, or
//              undefined to keep the script's (e.g. to answer by the text of the last user message).
//              A step may carry `usage: { prompt_tokens }` to report (e.g. a large count that makes opencode
//              compact the session); the default is 10.
// CLI use:     node doctor/fake-llm.mjs <script.json> [requests.jsonl]
//              prints exactly one first line `FAKE_LLM_BASE_URL=http://127.0.0.1:<port>/v1`, serves until SIGTERM.

import http from "node:http"
import fs from "node:fs"
import { pathToFileURL } from "node:url"

export const END_OF_SCRIPT_TEXT = "Done."
const TITLE_TEXT = "Scripted session"

/** Counts the model turns already in the conversation: the index of the script step to answer with. */
export function stepIndex(body) {
  const messages = Array.isArray(body?.messages) ? body.messages : []
  return messages.filter((m) => m && m.role === "assistant").length
}

/** Title (and other helper) requests carry no tools: they are not part of the agent loop. */
export function isTitleRequest(body) {
  return !Array.isArray(body?.tools) || body.tools.length === 0
}

/** Turns a script step into the list of tool calls it makes, or null for a text step. */
function toolCallsOf(step, stepNo) {
  const calls = step.tools ?? (step.tool ? [{ tool: step.tool, args: step.args }] : null)
  if (!calls) return null
  return calls.map((c, i) => ({
    index: i,
    id: `call_s${stepNo}_${i}_${Math.random().toString(36).slice(2, 8)}`,
    type: "function",
    function: { name: c.tool, arguments: JSON.stringify(c.args ?? {}) },
  }))
}

/** A streamed field: absent, a string, or an array of strings. */
const isStreamable = (v) => typeof v === "string" || (Array.isArray(v) && v.every((p) => typeof p === "string"))

/** A text step: `text` and/or `reasoning`, each streamable, with a positive `chunk` and a `delayMs` >= 0 if given. */
function isTextStep(step) {
  const fields = [step.reasoning, step.text].filter((v) => v !== undefined)
  return (
    fields.length > 0 &&
    fields.every(isStreamable) &&
    (step.chunk === undefined || (Number.isInteger(step.chunk) && step.chunk > 0)) &&
    (step.delayMs === undefined || (Number.isFinite(step.delayMs) && step.delayMs >= 0))
  )
}

function validateScript(script) {
  if (!Array.isArray(script)) throw new Error("fake-llm: script must be an array of steps")
  script.forEach((step, i) => {
    const ok =
      step &&
      (typeof step.tool === "string" ||
        (Array.isArray(step.tools) && step.tools.length > 0 && step.tools.every((c) => typeof c?.tool === "string")) ||
        isTextStep(step))
    if (!ok)
      throw new Error(
        `fake-llm: script[${i}] must be {tool,args}, {tools:[{tool,args}]} or {text?, reasoning?, chunk?, delayMs?} ` +
          "(text and reasoning: a string or an array of strings; chunk: a positive integer; delayMs: >= 0)",
      )
  })
}

/** The pieces a streamed field is sent in: an array as given, a string cut every `chunk` code points. */
export function piecesOf(value, chunk) {
  if (value === undefined) return []
  if (Array.isArray(value)) return value
  if (!chunk) return [value]
  const points = Array.from(value)
  const pieces = []
  for (let i = 0; i < points.length; i += chunk) pieces.push(points.slice(i, i + chunk).join(""))
  return pieces
}

/** The deltas of a text step, in order: reasoning pieces, then text pieces (the end-of-script text if it has none). */
function textDeltas(step) {
  const reasoning = piecesOf(step?.reasoning, step?.chunk).map((p) => ({ reasoning_content: p }))
  const hasText = step?.text !== undefined || step?.reasoning === undefined
  const text = hasText ? piecesOf(step?.text ?? END_OF_SCRIPT_TEXT, step?.chunk).map((p) => ({ content: p })) : []
  return [...reasoning, ...text]
}

const joined = (value) => (Array.isArray(value) ? value.join("") : value)

/**
 * The SSE chunks (already JSON objects) of one streamed reply: `head` (the role), `pieces` (one chunk per reasoning
 * or text piece: what `delayMs` spaces out and `chunksSent` counts), `tail` (finish and usage).
 */
function replyChunks(body, step, stepNo) {
  const base = {
    id: `chatcmpl-${stepNo}-${Date.now()}`,
    object: "chat.completion.chunk",
    created: Math.floor(Date.now() / 1000),
    model: body?.model ?? "fake-model",
  }
  const chunk = (delta, finish_reason = null) => ({ ...base, choices: [{ index: 0, delta, finish_reason }] })
  const usage = { ...base, choices: [], usage: usageOf(step) }
  const calls = step ? toolCallsOf(step, stepNo) : null
  if (calls)
    return {
      head: [chunk({ role: "assistant", content: null, tool_calls: calls })],
      pieces: [],
      tail: [chunk({}, "tool_calls"), usage],
    }
  return {
    head: [chunk({ role: "assistant", content: "" })],
    pieces: textDeltas(step).map((delta) => chunk(delta)),
    tail: [chunk({}, "stop"), usage],
  }
}

/**
 * Writes a reply's chunks as SSE, pausing `delayMs` before every piece but the first, and stops as soon as the client
 * has closed the stream. Records in `fake` (the request's `_fake`) how many pieces were written and how it ended.
 */
async function streamReply(res, chunks, delayMs, fake) {
  fake.chunksTotal = chunks.pieces.length
  fake.chunksSent = 0
  fake.closedEarly = false
  fake.finished = false
  let closed = false
  // The response's "close" comes at its end too: only a close before `end()` finished is the client's doing.
  res.on("finish", () => (fake.finished = true))
  res.on("close", () => {
    closed = true
    if (!res.writableFinished) fake.closedEarly = true
    fake.finished = true
  })
  const send = (c) => res.write(`data: ${JSON.stringify(c)}\n\n`)
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" })
  chunks.head.forEach(send)
  for (const [i, piece] of chunks.pieces.entries()) {
    if (i > 0 && delayMs > 0) await new Promise((r) => setTimeout(r, delayMs))
    if (closed || res.destroyed) return
    send(piece)
    fake.chunksSent += 1
  }
  if (closed) return
  chunks.tail.forEach(send)
  res.end("data: [DONE]\n\n")
}

/** The usage a reply reports: the step's own `usage.prompt_tokens` when it has one. */
function usageOf(step) {
  const prompt = Number.isFinite(step?.usage?.prompt_tokens) ? step.usage.prompt_tokens : 10
  return { prompt_tokens: prompt, completion_tokens: 5, total_tokens: prompt + 5 }
}

/** The non-streaming form, in case a client asks for it. */
function replyCompletion(body, step, stepNo) {
  const calls = step ? toolCallsOf(step, stepNo) : null
  const message = calls
    ? { role: "assistant", content: null, tool_calls: calls.map(({ index, ...c }) => c) }
    : {
        role: "assistant",
        content:
          step?.text === undefined && step?.reasoning !== undefined ? "" : (joined(step?.text) ?? END_OF_SCRIPT_TEXT),
        ...(step?.reasoning === undefined ? {} : { reasoning_content: joined(step.reasoning) }),
      }
  return {
    id: `chatcmpl-${stepNo}`,
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model: body?.model ?? "fake-model",
    choices: [{ index: 0, message, finish_reason: calls ? "tool_calls" : "stop" }],
    usage: usageOf(step),
  }
}

/**
 * Starts the server on 127.0.0.1 (a free port) and resolves once it listens.
 * @param {{ script?: any[], logFile?: string, beforeReply?: (body: any) => unknown, pickStep?: (body: any, stepNo: number) => any }} [options]
 */
export async function startFakeLLM({ script = [], logFile, beforeReply, pickStep } = {}) {
  validateScript(script)
  const requests = []
  const server = http.createServer((req, res) => {
    let raw = ""
    req.setEncoding("utf8")
    req.on("data", (d) => (raw += d))
    req.on("end", async () => {
      if (req.method !== "POST" || !/\/chat\/completions$/.test(req.url ?? "")) {
        res.writeHead(404, { "content-type": "application/json" })
        res.end(JSON.stringify({ error: { message: `fake-llm: no route ${req.method} ${req.url}` } }))
        return
      }
      let body
      try {
        body = JSON.parse(raw)
      } catch {
        res.writeHead(400, { "content-type": "application/json" })
        res.end(JSON.stringify({ error: { message: "fake-llm: body is not JSON" } }))
        return
      }
      const title = isTitleRequest(body)
      const stepNo = stepIndex(body)
      const picked = title || !pickStep ? undefined : pickStep(body, stepNo)
      const step = title ? { text: TITLE_TEXT } : (picked ?? script[stepNo])
      body._fake = { title, step: title ? null : stepNo }
      requests.push(body)
      if (logFile) fs.appendFileSync(logFile, JSON.stringify(body) + "\n")
      if (beforeReply) {
        try {
          await beforeReply(body)
        } catch (error) {
          res.writeHead(500, { "content-type": "application/json" })
          res.end(JSON.stringify({ error: { message: `fake-llm: beforeReply failed: ${error}` } }))
          return
        }
      }

      if (body.stream === false) {
        res.writeHead(200, { "content-type": "application/json" })
        res.end(JSON.stringify(replyCompletion(body, step, stepNo)))
        return
      }
      await streamReply(res, replyChunks(body, step, stepNo), step?.delayMs ?? 0, body._fake)
    })
  })
  server.keepAliveTimeout = 1000
  await new Promise((resolve, reject) => {
    server.once("error", reject)
    server.listen(0, "127.0.0.1", resolve)
  })
  const port = server.address().port
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    port,
    requests,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections?.()
      }),
  }
}

// CLI entry: only when run directly, never on import.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [scriptFile, logFile] = process.argv.slice(2)
  if (!scriptFile) {
    process.stderr.write("usage: node fake-llm.mjs <script.json> [requests.jsonl]\n")
    process.exit(2)
  }
  const script = JSON.parse(fs.readFileSync(scriptFile, "utf8"))
  const llm = await startFakeLLM({ script, logFile })
  process.stdout.write(`FAKE_LLM_BASE_URL=${llm.baseURL}\n`)
  const stop = () => llm.close().then(() => process.exit(0))
  process.on("SIGTERM", stop)
  process.on("SIGINT", stop)
}

// A scripted, OpenAI-compatible model server for driving a real opencode offline (plain Node, no dependencies).
//
// Why: the doctor (`install.sh --check`, check.mjs) and the end-to-end suite (test/e2e) must prove what the model
// *sees* in a real opencode (a blocked call's message arrives as that tool's result in the next request) without any
// network. opencode talks to this server through its bundled
// "@ai-sdk/openai-compatible" provider, with `options.baseURL` pointing here.
//
// How: `POST .../chat/completions` answers with streaming SSE. The reply is chosen by the number of `assistant`
// messages already in the request's `messages` (step i = i previous model turns in this session), so one script
// serves every session of an `opencode serve` process. A script step is one of
//   { tool: "read", args: {...} }                      one tool call
//   { tools: [{ tool, args }, ...] }                   parallel calls in one step
//   { text: "..." }                                    a plain answer, ending the agent loop
// Past the end of the script the server answers a short text and stops. Requests with no `tools` array are
// opencode's title requests: they get a short title and are marked `_fake.title = true`. Every parsed request body
// is kept (in order) with an added `_fake: { title, step }` field, and appended as one JSON line to `logFile`.
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

function validateScript(script) {
  if (!Array.isArray(script)) throw new Error("fake-llm: script must be an array of steps")
  script.forEach((step, i) => {
    const ok =
      step &&
      (typeof step.text === "string" ||
        typeof step.tool === "string" ||
        (Array.isArray(step.tools) && step.tools.length > 0 && step.tools.every((c) => typeof c?.tool === "string")))
    if (!ok) throw new Error(`fake-llm: script[${i}] must be {tool,args}, {tools:[{tool,args}]} or {text}`)
  })
}

/** The SSE chunks (already JSON objects) of one streamed reply. */
function replyChunks(body, step, stepNo) {
  const base = {
    id: `chatcmpl-${stepNo}-${Date.now()}`,
    object: "chat.completion.chunk",
    created: Math.floor(Date.now() / 1000),
    model: body?.model ?? "fake-model",
  }
  const chunk = (delta, finish_reason = null) => ({ ...base, choices: [{ index: 0, delta, finish_reason }] })
  const calls = step ? toolCallsOf(step, stepNo) : null
  const out = []
  if (calls) {
    out.push(chunk({ role: "assistant", content: null, tool_calls: calls }))
    out.push(chunk({}, "tool_calls"))
  } else {
    out.push(chunk({ role: "assistant", content: "" }))
    out.push(chunk({ content: step?.text ?? END_OF_SCRIPT_TEXT }))
    out.push(chunk({}, "stop"))
  }
  out.push({ ...base, choices: [], usage: usageOf(step) })
  return out
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
    : { role: "assistant", content: step?.text ?? END_OF_SCRIPT_TEXT }
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
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" })
      for (const c of replyChunks(body, step, stepNo)) res.write(`data: ${JSON.stringify(c)}\n\n`)
      res.end("data: [DONE]\n\n")
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

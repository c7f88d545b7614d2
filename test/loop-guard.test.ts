// loop-guard through the interface opencode uses: `server(input)`, then the `tool.execute.before` and `event` hooks.
import { describe, expect, test } from "bun:test"
import { startLoopGuard } from "./lib/loop-guard.ts"
import plugin, {
  IGNORED_KEYS,
  LEAF_DIGEST_MIN,
  MAX_SESSIONS,
  Sessions,
  canonicalize,
  digest,
  duration,
  fallbackDigest,
  historyCapacity,
  isReadOnlyCommand,
  newCall,
  newSessionState,
  maskVolatile,
  record,
  settleWait,
  signature,
  sleepSeconds,
} from "../loop-guard.ts"

/** Starts the plugin as opencode does (test/lib/loop-guard.ts), with the given environment, and drives its hooks. */
async function start(env: Record<string, string> = {}) {
  const started = await startLoopGuard(env)
  return { ...started, ...driver(started.hooks) }
}

let callNumber = 0
function driver(hooks: any) {
  let lastCallID = ""
  /** One tool call; resolves to the block message, or null when the call may run. */
  async function call(sessionID: string, tool: string, args: unknown): Promise<string | null> {
    if (!hooks["tool.execute.before"]) return null
    lastCallID = `c${++callNumber}`
    try {
      await hooks["tool.execute.before"]({ tool, sessionID, callID: lastCallID }, { args })
      return null
    } catch (error) {
      expect(error).toBeInstanceOf(Error)
      return (error as Error).message
    }
  }
  async function emit(type: string, properties: unknown) {
    await hooks.event?.({ event: { type, properties } })
  }
  /** The host's report of a call that ran: tool.execute.after with its output; returns what the model reads. */
  async function succeed(sessionID: string, tool: string, output: string, callID = lastCallID): Promise<string> {
    const result = { title: "", output, metadata: {} }
    await hooks["tool.execute.after"]?.({ tool, sessionID, callID, args: {} }, result)
    return result.output
  }
  /** The host's report of a call that failed: a message.part.updated event with state.status "error". */
  async function fail(sessionID: string, tool: string, error: string, callID = lastCallID) {
    await emit("message.part.updated", {
      sessionID,
      part: { type: "tool", tool, callID, sessionID, state: { status: "error", error, input: {} } },
    })
  }
  /**
   * Runs a trace in one session; returns "." for a call that ran and "X" for a block. The trace is letters (see
   * CALLS), each optionally followed by its result: `=x` the call returned output x, `!e` it failed with error e
   * (one character each), nothing: no result seen. Spaces are ignored.
   */
  async function trace(steps: string, sessionID = "s1"): Promise<string> {
    let outcome = ""
    const tokens = steps.replace(/ /g, "").match(/[^=!]([=!].)?/g) ?? []
    for (const token of tokens) {
      const [tool, args] = CALLS[token[0]]
      const blocked = (await call(sessionID, tool, args)) !== null
      outcome += blocked ? "X" : "."
      if (blocked)
        await fail(sessionID, tool, "loop-guard blocked this call") // as the host reports a block
      else if (token[1] === "=") await succeed(sessionID, tool, `output ${token[2]}`)
      else if (token[1] === "!") await fail(sessionID, tool, `error ${token[2]}`)
    }
    return outcome
  }
  return { call, emit, succeed, fail, trace }
}

const CALLS: Record<string, [string, unknown]> = {
  A: ["read", { filePath: "src/a.ts" }],
  B: ["bash", { command: "npm test", description: "run tests" }],
  C: ["grep", { pattern: "TODO", path: "src" }],
  D: ["glob", { pattern: "**/*.ts" }],
  E: ["read", { filePath: "src/e.ts" }],
  F: ["edit", { filePath: "src/a.ts", oldString: "x", newString: "y" }],
  I: ["edit", { filePath: "src/a.ts", oldString: "x ", newString: "y" }],
  J: ["edit", { filePath: "src/b.ts", oldString: "q", newString: "r" }],
  W: ["write", { filePath: "src/w.ts", content: "w" }],
  P: ["bashoutput", { bash_id: "job1" }],
  Q: ["bash", { command: "sleep 1", description: "a short pause, no wait" }],
  R: ["bash", { command: "gh run view 123 --json status", description: "Check the CI run" }],
  Z: ["bash", { command: "sleep 60", description: "Wait a minute" }],
  V: ["bash", { command: "sleep 5", description: "Wait" }],
  Y: ["bash", { command: "sleep 30 && gh run view 123 --json status" }],
  U: ["bash", { command: "sleep 10m", description: "Wait ten minutes" }],
  S: ["bash", { command: "sleep 20m", description: "Wait twenty minutes" }],
  K: ["bash", { command: "npm test", description: "Run the tests again" }],
  L: ["bash", { command: "npm  test", description: "run tests" }],
  M: ["task", { description: "look around", prompt: "find the config", subagent_type: "general" }],
  N: ["task", { description: "search again", prompt: "find the config", subagent_type: "general" }],
  O: ["read", { filePath: "src/a.ts", description: "x" }],
  G: ["edit", { filePath: "src/a.ts", oldString: "y", newString: "z" }],
  H: ["edit", { filePath: "src/a.ts", oldString: "z", newString: "w" }],
  T: ["bash", { command: "npm test" }],
  1: ["read", { filePath: "src/1.ts" }],
  2: ["read", { filePath: "src/2.ts" }],
  3: ["read", { filePath: "src/3.ts" }],
  4: ["read", { filePath: "src/4.ts" }],
  5: ["read", { filePath: "src/5.ts" }],
  6: ["read", { filePath: "src/6.ts" }],
  7: ["read", { filePath: "src/7.ts" }],
  8: ["read", { filePath: "src/8.ts" }],
  9: ["read", { filePath: "src/9.ts" }],
  g: ["bash", { command: "git status && git diff | head -50", description: "Look at the changes" }],
  w: ["websearch", { query: "opencode plugin hooks" }],
  m: ["mcp_db_insert", { row: 1 }],
}

/** `lap` repeated `n` times (a trace of a waiting cycle). */
const laps = (lap: string, n: number) => Array(n).fill(lap).join(" ")

/**
 * Runs steps of parallel calls through the hooks as opencode does: every call of a step reaches
 * tool.execute.before before any result, then each call that ran reports its result (`=x`, `!e` or nothing, as in
 * `trace`). Steps are separated by `|`, calls by spaces. With `announce`, each call's tool part is first announced
 * with its step's messageID (message.part.updated, pending) and each result comes right after its call instead.
 * Returns the outcome per step: "." ran, "X" blocked.
 */
async function runSteps(hooks: any, text: string, announce = false, sessionID = "p1"): Promise<string> {
  const outcome: string[] = []
  let message = 0
  for (const step of text.split("|")) {
    message++
    const ran: { tool: string; callID: string; token: string }[] = []
    let marks = ""
    for (const token of step.trim().split(/ +/)) {
      const [tool, args] = CALLS[token[0]]
      const callID = `p${++callNumber}`
      if (announce) {
        const part = { type: "tool", tool, callID, sessionID, messageID: `msg${message}`, state: { status: "pending" } }
        await hooks.event({ event: { type: "message.part.updated", properties: { sessionID, part } } })
      }
      let blocked = false
      try {
        await hooks["tool.execute.before"]({ tool, sessionID, callID }, { args })
      } catch {
        blocked = true
      }
      marks += blocked ? "X" : "."
      if (!blocked) ran.push({ tool, callID, token })
      if (announce) await reportStep(hooks, sessionID, ran.splice(0))
    }
    await reportStep(hooks, sessionID, ran)
    outcome.push(marks)
  }
  return outcome.join("|")
}

async function reportStep(hooks: any, sessionID: string, ran: { tool: string; callID: string; token: string }[]) {
  for (const { tool, callID, token } of ran) {
    if (token[1] === "=")
      await hooks["tool.execute.after"](
        { tool, sessionID, callID, args: {} },
        { title: "", output: `output ${token[2]}` },
      )
    if (token[1] === "!") {
      const part = { type: "tool", tool, callID, sessionID, state: { status: "error", error: `error ${token[2]}` } }
      await hooks.event({ event: { type: "message.part.updated", properties: { sessionID, part } } })
    }
  }
}

const LONG = "x".repeat(LEAF_DIGEST_MIN)

describe("signatures: what counts as the same call", () => {
  // Alternating two calls P, Q, P, Q: the 4th is blocked only if P and Q have one signature (else it is A-B x2).
  const proto = JSON.parse('{"__proto__": {"x": 1}}')
  const table: [string, [string, unknown], [string, unknown], boolean][] = [
    ["top-level key order", ["read", { a: 1, b: 2 }], ["read", { b: 2, a: 1 }], true],
    [
      "nested key order",
      ["edit", { x: { a: 1, b: [{ c: 1, d: 2 }] } }],
      ["edit", { x: { b: [{ d: 2, c: 1 }], a: 1 } }],
      true,
    ],
    ["array order", ["bash", { l: [1, 2] }], ["bash", { l: [2, 1] }], false],
    ["a doubled space", ["bash", { command: "ls -la" }], ["bash", { command: "ls  -la" }], false],
    ["tab vs space", ["bash", { command: "ls -la" }], ["bash", { command: "ls\t-la" }], false],
    ["trailing whitespace", ["bash", { command: "ls" }], ["bash", { command: "ls " }], false],
    ["letter case", ["read", { filePath: "A.ts" }], ["read", { filePath: "a.ts" }], false],
    ["Unicode NFC vs NFD", ["read", { filePath: "caf\u00e9" }], ["read", { filePath: "cafe\u0301" }], false],
    ["number vs string", ["read", { limit: 1 }], ["read", { limit: "1" }], false],
    ["null vs absent key", ["read", { a: 1, offset: null }], ["read", { a: 1 }], false],
    ['true vs "true"', ["x", { f: true }], ["x", { f: "true" }], false],
    ["empty object vs empty array", ["x", { v: {} }], ["x", { v: [] }], false],
    ["NaN vs null", ["x", { v: NaN }], ["x", { v: null }], false],
    ["__proto__ is an ordinary key", ["x", proto], ["x", {}], false],
    ["__proto__ with another value", ["x", proto], ["x", JSON.parse('{"__proto__": {"x": 2}}')], false],
    ["constructor is an ordinary key", ["x", { constructor: "a" }], ["x", {}], false],
    ["toString is an ordinary key", ["x", { toString: "a" }], ["x", { toString: "b" }], false],
    ["two tools with equal arguments", ["read", { filePath: "a" }], ["write", { filePath: "a" }], false],
    ["no arguments vs empty object", ["x", undefined], ["x", {}], false],
    ["keys that look like JSON", ["x", { 'a":1,"b': 2 }], ["x", { a: 1, b: 2 }], false],
    // Strings of LEAF_DIGEST_MIN characters or more are hashed where they stand: equality stays exact.
    ["a long string, equal", ["write", { content: LONG + "a" }], ["write", { content: LONG + "a" }], true],
    [
      "long strings differing in the last character",
      ["write", { content: LONG + "a" }],
      ["write", { content: LONG + "b" }],
      false,
    ],
    ["long strings differing in length only", ["write", { content: LONG }], ["write", { content: LONG + "x" }], false],
    [
      "long strings differing only in a lone surrogate",
      ["write", { c: LONG + "\ud800" }],
      ["write", { c: LONG + "\udc00" }],
      false,
    ],
    ["a long string vs its digest marker", ["write", { c: LONG }], ["write", { c: "\u0000" + digest(LONG) }], false],
    ["a NUL-prefixed short string vs the same without", ["x", { c: "\u0000a" }], ["x", { c: "a" }], false],
    [
      "a long string inside a Date-carrying value (general writer)",
      ["x", { d: new Date(0), c: LONG + "a" }],
      ["x", { c: LONG + "a", d: new Date(0) }],
      true,
    ],
    ["... differing there", ["x", { d: new Date(0), c: LONG + "a" }], ["x", { d: new Date(0), c: LONG + "b" }], false],
  ]
  test.each(table)("%s", async (_name, [toolP, argsP], [toolQ, argsQ], same) => {
    const { call } = await start()
    const outcomes = []
    for (const [tool, args] of [
      [toolP, argsP],
      [toolQ, argsQ],
      [toolP, argsP],
      [toolQ, argsQ],
    ] as const) {
      outcomes.push((await call("s1", tool, args)) === null ? "." : "X")
    }
    expect(outcomes.join("")).toBe(same ? "...X" : "....")
  })

  test("a remembered call does not grow with its arguments (1 MB write)", () => {
    const big = signature("write", { filePath: "a", content: "x".repeat(1_000_000) })
    expect(big.signature.length).toBeLessThan(40)
    expect(JSON.stringify(big).length).toBeLessThan(80)
    expect(signature("write", { filePath: "a", content: "x".repeat(999_999) + "y" }).signature).not.toBe(big.signature)
  })

  test("canonical text sorts keys and keeps types; long strings are written as their digest", () => {
    expect(canonicalize({ b: [2, "2", null], a: { d: 1, c: true } })).toBe('{"a":{"c":true,"d":1},"b":[2,"2",null]}')
    expect(canonicalize({ c: LONG }).length).toBeLessThan(60)
    expect(canonicalize({ c: LONG }, Infinity)).toBe(JSON.stringify({ c: LONG }))
  })

  test("odd values are written without throwing", () => {
    const circular: any = { a: 1 }
    circular.self = circular
    const odd = {
      d: new Date(0),
      u8: new Uint8Array([1, 2]),
      big: 10n,
      f: () => 1,
      s: Symbol("s"),
      u: undefined,
      circular,
    }
    expect(() => canonicalize(odd)).not.toThrow()
    expect(canonicalize({ d: new Date(0) })).not.toBe(canonicalize({ d: new Date(1) }))
  })

  test("both digests tell different texts apart and agree with themselves", () => {
    const texts = ["", "a", "b", "ab", "ba", "x".repeat(1000), "x".repeat(999) + "y", "caf\u00e9", "cafe\u0301"]
    expect(new Set(texts.map(digest)).size).toBe(texts.length)
    expect(new Set(texts.map(fallbackDigest)).size).toBe(texts.length)
    expect(digest("same")).toBe(digest("same"))
    expect(fallbackDigest("same")).toBe(fallbackDigest("same"))
  })
})

describe("signatures: free-text arguments are not identity", () => {
  const table: [string, string, string][] = [
    ["bash: the same command with a reworded description is still blocked", "BKBK", "...X"],
    ["bash: with and without a description", "TBTB", "...X"],
    ["bash: a changed command is a new call", "BLBL", "...."],
    ["task: a reworded description, the same prompt", "MNMN", "...X"],
    ["read: a key named description still counts", "AOAO", "...."],
  ]
  test.each(table)("%s", async (_name, steps, expected) => {
    const { trace } = await start()
    expect(await trace(steps)).toBe(expected)
  })

  test("the ignored keys are one list, and leaving one out does not touch the caller's arguments", () => {
    expect(IGNORED_KEYS).toEqual({ bash: ["description"], task: ["description"] })
    const args = { command: "ls", description: "list" }
    expect(signature("bash", args).signature).toBe(signature("bash", { command: "ls" }).signature)
    expect(args).toEqual({ command: "ls", description: "list" })
    const proto = JSON.parse('{"__proto__": {"x": 1}, "description": "d"}')
    expect(signature("bash", proto).signature).not.toBe(signature("bash", {}).signature)
  })
})

// OPENCODE_LOOP_GUARD_IGNORE_KEYS leaves named argument keys of named tools out of the signature.
describe("signatures: ignored keys per tool (OPENCODE_LOOP_GUARD_IGNORE_KEYS)", () => {
  const lookup = (id: number, q = "x") => ["mcp_search_lookup", { query: q, request_id: id }] as [string, unknown]
  // setting, the calls (repeated in turn for 4 calls), outcome: "." ran, "X" blocked
  const table: [string, string, [string, unknown][], string][] = [
    ["no setting: a fresh nonce makes every call new", "", [lookup(1), lookup(2), lookup(3), lookup(4)], "...."],
    [
      "the named key of the named tool is left out",
      "mcp_search_lookup:request_id",
      [lookup(1), lookup(2), lookup(3), lookup(4)],
      "...X",
    ],
    ["a tool-name glob", "mcp_*:request_id", [lookup(1), lookup(2), lookup(3), lookup(4)], "...X"],
    ["a ? glob", "mcp_search_looku?:request_id", [lookup(1), lookup(2), lookup(3), lookup(4)], "...X"],
    ["another tool keeps the key", "mcp_other:request_id", [lookup(1), lookup(2), lookup(3), lookup(4)], "...."],
    [
      "another key of the tool still counts",
      "mcp_search_lookup:request_id",
      [lookup(1, "a"), lookup(2, "b"), lookup(3, "a"), lookup(4, "b")],
      "....",
    ],
    [
      "several entries, spaces trimmed",
      " read:nonce , mcp_search_lookup:request_id ",
      [lookup(1), lookup(2), lookup(3), lookup(4)],
      "...X",
    ],
    [
      "a tool name with a colon: the key follows the last one",
      "srv:lookup:request_id",
      [
        ["srv:lookup", { q: 1, request_id: 1 }],
        ["srv:lookup", { q: 1, request_id: 2 }],
      ],
      "...X",
    ],
    [
      "only top-level keys: a nested key of that name still counts",
      "mcp_search_lookup:request_id",
      [
        ["mcp_search_lookup", { meta: { request_id: 1 } }],
        ["mcp_search_lookup", { meta: { request_id: 2 } }],
      ],
      "....",
    ],
    [
      "the built-in keys stay left out beside the setting",
      "mcp_*:request_id",
      [
        ["bash", { command: "ls", description: "a" }],
        ["bash", { command: "ls", description: "b" }],
      ],
      "...X",
    ],
    [
      "a bash key named in the setting",
      "bash:timeout",
      [
        ["bash", { command: "ls", timeout: 1 }],
        ["bash", { command: "ls", timeout: 2 }],
      ],
      "...X",
    ],
  ]
  test.each(table)("%s", async (_name, setting, calls, expected) => {
    const { call, logs } = await start(setting ? { OPENCODE_LOOP_GUARD_IGNORE_KEYS: setting } : {})
    let outcome = ""
    for (let i = 0; i < 4; i++) outcome += (await call("s1", ...calls[i % calls.length])) === null ? "." : "X"
    expect(outcome).toBe(expected)
    expect(logs.filter((log) => log.message.includes("OPENCODE_LOOP_GUARD_IGNORE_KEYS"))).toEqual([])
  })

  // invalid entries: each logged with the variable's name and the entry, ignored; the valid entries still apply
  const invalid: [string, string][] = [
    ["no colon", "request_id"],
    ["no tool", ":request_id"],
    ["no key", "mcp_search_lookup:"],
    ["a glob with a bracket", "mcp_[ab]:request_id"],
    ["a key with a space", "mcp_search_lookup:request id"],
    ["a key path", "mcp_search_lookup:meta.request_id"],
  ]
  test.each(invalid)("invalid, logged and ignored: %s", async (_name, entry) => {
    const { call, logs } = await start({ OPENCODE_LOOP_GUARD_IGNORE_KEYS: `${entry},mcp_search_lookup:request_id` })
    let outcome = ""
    for (let i = 1; i <= 4; i++) outcome += (await call("s1", ...lookup(i))) === null ? "." : "X"
    expect(outcome).toBe("...X")
    const problems = logs.filter((log) => log.message.includes("OPENCODE_LOOP_GUARD_IGNORE_KEYS"))
    expect(problems.length).toBe(1)
    expect(problems[0].level).toBe("warn")
    expect(problems[0].message).toContain(JSON.stringify(entry))
    expect(problems[0].message).toContain("is not tool:key")
    expect(problems[0].message).toContain("e.g. mcp_search_lookup:request_id")
  })

  test("the setting does not change the caller's arguments, nor leak into the next start", async () => {
    const { call } = await start({ OPENCODE_LOOP_GUARD_IGNORE_KEYS: "mcp_*:request_id" })
    const args = { query: "x", request_id: 7 }
    await call("s1", "mcp_search_lookup", args)
    expect(args).toEqual({ query: "x", request_id: 7 })
    const { call: next } = await start()
    let outcome = ""
    for (let i = 1; i <= 4; i++) outcome += (await next("s1", ...lookup(i))) === null ? "." : "X"
    expect(outcome).toBe("....")
  })
})

describe("results: what is kept of a call's result, and when it counts", () => {
  test.each([
    ["outputs differing only in a lone surrogate are a change", ["a\ud800", "a\udc00", "a\ud800"], "...."],
    ["the same output with a lone surrogate is unchanged", ["a\ud800", "a\ud800", "a\ud800"], "...X"],
  ])("%s", async (_name, outputs, expected) => {
    const { call, succeed } = await start()
    let outcome = ""
    for (const output of outputs) {
      outcome += (await call("s1", "bashoutput", { bash_id: "j" })) === null ? "." : "X"
      await succeed("s1", "bashoutput", output)
    }
    outcome += (await call("s1", "bashoutput", { bash_id: "j" })) === null ? "." : "X"
    expect(outcome).toBe(expected)
  })

  test("a result is remembered as a digest only: a 1 MB output does not grow the history", async () => {
    const { hooks, call, succeed, logs } = await start()
    await call("s1", "read", { filePath: "a" })
    const big = "x".repeat(1_000_000)
    expect(await succeed("s1", "read", big)).toBe(big) // the output itself is left as it was
    expect(JSON.stringify(logs)).not.toContain("xxxx")
    expect(hooks).toBeDefined()
  })

  test("results of parallel calls arrive late: a call decided before its siblings' results sees 'none'", async () => {
    const { call, succeed } = await start()
    // three calls of one step, decided before any result: all run; their results arrive afterwards
    const ids: string[] = []
    for (let i = 0; i < 3; i++) {
      expect(await call("s1", "read", { filePath: "a" })).toBeNull()
      ids.push(`c${callNumber}`)
    }
    for (const id of ids) await succeed("s1", "read", "same", id)
    expect(await call("s1", "read", { filePath: "a" })).not.toBeNull() // same, same, same: blocked
  })

  test("the host's error event for a call loop-guard blocked is not taken as that tool's failure", async () => {
    const { trace } = await start()
    // trace() reports each block as the host does (a message.part.updated error for the blocked callID)
    expect(await trace("A=x A=x A=x A A A")).toBe("...XXX")
    expect(await trace("F=k")).toBe(".") // no edit failure was recorded: nothing to stream
  })
})

// Volatile parts of a result (clock times, dates, durations, timing keys) are not progress.
describe("results: volatile parts of a result are not progress", () => {
  /** Polls returning a, b, a, then a 4th poll: blocked exactly when a and b read as the same result. */
  async function samePoll(a: string, b: string, fail = false): Promise<boolean> {
    const { call, succeed, fail: failed } = await start()
    for (const output of [a, b, a]) {
      expect(await call("s1", "bashoutput", { bash_id: "j" })).toBeNull()
      if (fail) await failed("s1", "bashoutput", output)
      else await succeed("s1", "bashoutput", output)
    }
    return (await call("s1", "bashoutput", { bash_id: "j" })) !== null
  }

  const masked: [string, string, string][] = [
    [
      "an ISO timestamp (Claude Code's bashoutput, E1-E5)",
      "<status>running</status> <timestamp>2025-12-01T04:48:27.620Z</timestamp>",
      "<status>running</status> <timestamp>2025-12-01T04:48:30.481Z</timestamp>",
    ],
    ["a date", "report of 2025-12-01", "report of 2025-12-02"],
    ["a date with a time and an offset", "at 2025-12-01 04:48:27+01:00 ok", "at 2025-12-01 05:01:00+01:00 ok"],
    ["a slashed date", "built 2025/12/01", "built 2025/12/02"],
    ["a written date (date, HTTP)", "Date: Mon, 01 Dec 2025 10:00:00 GMT", "Date: Tue, 02 Dec 2025 10:00:05 GMT"],
    ["ls -l's time", "-rw-r--r-- 1 u g 1024 Dec  1 04:48 out.log", "-rw-r--r-- 1 u g 1024 Dec  1 04:52 out.log"],
    ["a clock time with seconds", "[04:48:27] waiting", "[04:49:01] waiting"],
    ["a clock time with a fraction", "04:48:27.123 waiting", "04:48:29.999 waiting"],
    ["a clock time with AM/PM", "checked at 4:48 PM", "checked at 4:51 PM"],
    ["an elapsed counter", "Elapsed: 00:01:23, still running", "Elapsed: 00:01:29, still running"],
    ["a duration in seconds", "3 passed in 0.12s", "3 passed in 0.19s"],
    ["a duration in ms", "took 120ms", "took 98ms"],
    ["a compound duration", "uptime 1m20s", "uptime 1m26s"],
    ["a spaced duration", "waited 12.5 s", "waited 15 s"],
    ["a duration in words", "updated 3 seconds ago", "updated 5 seconds ago"],
    ["minutes in words", "running for 5 minutes", "running for 6 minutes"],
    [
      "hermes' timing keys",
      '{"status": "running", "duration_seconds": 12.5}',
      '{"status": "running", "duration_seconds": 30}',
    ],
    ["an execution count", '{"out": "", "execution_count": 7}', '{"out": "", "execution_count": 8}'],
    [
      "a createdAt epoch",
      '{"state": "queued", "createdAt": 1733028507}',
      '{"state": "queued", "createdAt": 1733028599}',
    ],
    ["elapsed= in a log line", "job 7 state=running elapsed=3", "job 7 state=running elapsed=9"],
    ["a timing key with a unit", "step done elapsed_ms=40", "step done elapsed_ms=52"],
    ["a measured time (a fraction)", "Best time: 0.2348831300623715", "Best time: 0.2051791639532894"],
    ["a time with its unit key", '{"evaluation_time": 45.2341}', '{"evaluation_time": 0.4241940975189209}'],
    ["a failure's timestamp (errors are masked too)", "timeout at 04:48:27", "timeout at 04:48:57"],
  ]
  test.each(masked)("masked: %s", async (name, a, b) => {
    expect(await samePoll(a, b, name.startsWith("a failure"))).toBe(true)
  })

  const different: [string, string, string][] = [
    ["a line count", "Processed 10 files", "Processed 11 files"],
    ["a percentage", "progress 45%", "progress 46%"],
    ["a new log line, timestamped", "04:48:27 start", "04:48:27 start\n04:48:30 step 2"],
    [
      "a different status word",
      "<status>running</status> <timestamp>x</timestamp>",
      "<status>completed</status> <timestamp>x</timestamp>",
    ],
    ["the status word under a changing timestamp", "running 2025-12-01T04:48:27Z", "completed 2025-12-01T04:48:30Z"],
    ["a count next to a duration", "3 passed in 0.12s", "4 passed in 0.12s"],
    ["a path's line:column", "src/a.ts:12:30: error", "src/a.ts:12:31: error"],
    ["HH:MM alone (reads as line:column or a ratio)", "score 12:30", "score 12:31"],
    ["a version", "version 1.2.3", "version 1.2.4"],
    ["a size", "1024 bytes", "2048 bytes"],
    ["an epoch-like number with no timing key (a byte count)", "size 1733028507", "size 1733028599"],
    ["a hash", "HEAD is abc1234", "HEAD is abc1299"],
    ["a colour code is no duration (ESC[32m)", "\u001b[32mPASS\u001b[0m", "\u001b[31mPASS\u001b[0m"],
    ["a colour code with attributes (ESC[1;31m)", "\u001b[1;32mok", "\u001b[1;31mok"],
    ["a word that starts like a month", "Decimal 5", "Decimal 6"],
    ["an address and port", "listening on 127.0.0.1:8080", "listening on 127.0.0.1:8081"],
    ["a number under a key that only contains 'time'", '{"timeout": 30}', '{"timeout": 60}'],
    ["a whole number under `time` (an xarray dimension)", "Dimensions: (time: 24)", "Dimensions: (time: 25)"],
    ["a key that starts with time_ and a word", '{"time_perception": 5}', '{"time_perception": 6}'],
    ["a duration key with a word after it", '{"duration_rank": 5}', '{"duration_rank": 6}'],
    ["a changed value beside a masked one", '{"duration_seconds": 1, "rows": 5}', '{"duration_seconds": 2, "rows": 6}'],
  ]
  test.each(different)("still progress: %s", async (_name, a, b) => {
    expect(await samePoll(a, b)).toBe(false)
  })

  test("a result longer than the masking bound is compared whole", async () => {
    const tail = "x".repeat(16_384 - 9) // 16,384 characters with the clock time and its blank: still masked
    expect(await samePoll(`04:48:27 ${tail}`, `04:48:30 ${tail}`)).toBe(true)
    expect(await samePoll(`04:48:27 ${tail}x`, `04:48:30 ${tail}x`)).toBe(false)
  })

  test("what the masks write: each part by its name, a timing key keeps its key; non-strings as they are", () => {
    expect(maskVolatile("at 2025-12-01T04:48:27Z, 04:48:27, took 3.2s; elapsed=3")).toBe(
      "at <date>, <time>, took <duration>; elapsed=<timing>",
    )
    const object = { t: "04:48:27" }
    expect(maskVolatile(object)).toBe(object)
    expect(maskVolatile(null)).toBeNull()
  })

  test("the output the model reads is left as it was", async () => {
    const { call, succeed } = await start()
    await call("s1", "bashoutput", { bash_id: "j" })
    expect(await succeed("s1", "bashoutput", "at 04:48:27 took 3s")).toBe("at 04:48:27 took 3s")
  })
})

describe("results: calls opencode's permission rules refused (in a failure streak)", () => {
  // The texts opencode 1.18.33 gives a refused call (PermissionDeniedError, PermissionRejectedError,
  // PermissionCorrectedError); the rules JSON after the denial is the agent's ruleset for that permission.
  const DENIED =
    'The user has specified a rule which prevents you from using this specific tool call. Here are some of the relevant rules [{"permission":"edit","pattern":"*","action":"deny"}]'
  const REJECTED = "The user rejected permission to use this specific tool call."
  const CORRECTED = "The user rejected permission to use this specific tool call with the following feedback: not now"
  const table: [string, string, boolean][] = [
    ["a rule denies the call (also the plan agent's edit rules)", DENIED, true],
    ["the human rejected it", REJECTED, true],
    ["the human rejected it with feedback", CORRECTED, true],
    ["an ordinary failure", "Could not find oldString in the file", false],
  ]
  test.each(table)("%s", async (_name, error, refused) => {
    const { call, fail, toasts, logs } = await start()
    for (const old of ["a", "b", "c"]) {
      await call("s1", "edit", { filePath: "/home/alice/x.ts", oldString: old, newString: "z" })
      await fail("s1", "edit", error)
    }
    const message = await call("s1", "edit", { filePath: "/home/alice/y.ts", oldString: "d", newString: "z" })
    expect(message).toStartWith("loop-guard blocked this edit call: it was not run.")
    if (refused) {
      expect(message).toContain("opencode refused each of them: the user's permission rules forbid them")
      expect(message).toContain("Do not try to do the same thing another way")
      expect(message).toContain("ask them to allow it or to choose another way")
      expect(message).not.toContain("read the file again")
      expect(message).not.toContain("materially different action")
      expect(toasts.at(-1)).toEqual({
        message:
          "loop-guard: blocked edit after 3 calls the user's permission rules refused; the agent was told to stop and ask the user",
        variant: "warning",
      })
    } else {
      expect(message).toContain("for edit: read the file again")
      expect(toasts.at(-1)?.message).toContain("the agent was told to re-read and change approach")
    }
    expect(logs.find((l) => l.message.includes("blocked"))?.extra).toMatchObject({ reason: "failures", refused })
    const seen = message + JSON.stringify(toasts) + JSON.stringify(logs)
    for (const leak of ["alice", "relevant rules", '"deny"', "not now", "oldString"]) expect(seen).not.toContain(leak)
  })

  test("refusals of bash are left alone as every bash failure is", async () => {
    const { call, fail } = await start()
    for (const command of ["rm -rf a", "rm -r a", "find a -delete"]) {
      await call("s1", "bash", { command })
      await fail("s1", "bash", REJECTED)
    }
    expect(await call("s1", "bash", { command: "ls" })).toBeNull()
  })
})

describe("results: which bash commands read only (a changing one ends a per-call streak; the reader semantic-anchors uses)", () => {
  const table: [string, boolean][] = [
    ["cat src/a.ts", true],
    ["ls -la && git status", true],
    ["grep -rn TODO src | head -20 | wc -l", true],
    ["git log --oneline -5; git diff HEAD~1", true],
    ["find . -name '*.ts'", true],
    ["cd src && rg foo", true],
    ["git branch", true],
    ["git remote -v", true],
    ["git", true], // prints its usage
    ["grep -n 'a|b > c' f", true], // quoted: a pattern, not a pipe or a redirect
    ["npm test", false],
    ["rm -rf build", false],
    ["ls > files.txt", false],
    ["cat $(which node)", false],
    ["echo `date`", false],
    ["git commit -am x", false],
    ["", false], // an empty command: the reader cannot tell, so it counts as a change
    ["git branch -D x", false],
    ["git branch -d x", false],
    ["git branch --delete x", false],
    ["find . -name '*.tmp' -delete", false],
    ["find . -exec rm {} ;", false],
    ["sed -i s/a/b/ f", false],
    ["cat a | tee b", false],
    ["python -c 'print(1)'", false],
  ]
  test.each(table)("%p read-only: %p", (command, readOnly) => {
    expect(isReadOnlyCommand(command)).toBe(readOnly)
  })
})

describe("the cycle check: repeated calls and cycles (default: 3 repetitions)", () => {
  // trace -> outcome: "." ran, "X" blocked. A blocked call is not recorded.
  const table: [string, string, string][] = [
    ["4 identical calls: the 4th is blocked", "AAAA", "...X"],
    ["3 identical calls run", "AAA", "..."],
    ["A-B x3: the 6th call is blocked", "ABABAB", ".....X"],
    ["A-B-C x3: the 9th", "ABCABCABC", "........X"],
    ["A-B-C-D x3: the 12th", "ABCDABCDABCD", "...........X"],
    ["A-A-B x3: repeated members count", "AABAABAAB", "........X"],
    ["A-B-A-C x3", "ABACABACABAC", "...........X"],
    ["a cycle of length 9 is never blocked", "123456789".repeat(4), ".".repeat(36)],
    ["same tool, changing arguments", "12345678", "........"],
    ["edits that change between test reruns", "FTGTHTFT", "........"],
    ["the same edit between test reruns: ping-pong", "FTFTFT", ".....X"],
    ["retrying a blocked call is blocked again", "AAAAAA", "...XXX"],
    ["a different call breaks the pattern", "AAAAB", "...X."],
    ["after a break the count starts over", "AAAABAAAA", "...X....X"],
    ["A-B-A-B then a third call", "ABABC", "....."],
    ["the smallest cycle is found first (A x4 inside A-B)", "BAAAA", "....X"],
  ]
  test.each(table)("%s", async (_name, letters, expected) => {
    const { trace } = await start()
    expect(await trace(letters)).toBe(expected)
  })

  test("parallel calls of one step see each other (the 4th of 4 identical is blocked)", async () => {
    const { call } = await start()
    const results = await Promise.all([1, 2, 3, 4].map(() => call("s1", "read", { filePath: "a" })))
    expect(results.map((r) => (r === null ? "." : "X")).join("")).toBe("...X")
  })
})

describe("the cycle check: cycles up to length 8", () => {
  const table: [string, string, string][] = [
    ["five reads repeated: the 15th call", "1=1 2=2 3=3 4=4 5=5 ".repeat(3), ".".repeat(14) + "X"],
    [
      "edit, test, revert, lint... six calls repeated: the 18th",
      "F=f T=t J=j 1=1 W=w 2=2 ".repeat(3),
      ".".repeat(17) + "X",
    ],
    ["seven calls: the 21st", "1=1 2=2 3=3 4=4 5=5 6=6 7=7 ".repeat(3), ".".repeat(20) + "X"],
    ["eight calls: the 24th", "1=1 2=2 3=3 4=4 5=5 6=6 7=7 8=8 ".repeat(3), ".".repeat(23) + "X"],
    ["a 6-cycle of two 3-cycles is the 3-cycle: the 9th", "1=1 2=2 3=3 ".repeat(3), ".".repeat(8) + "X"],
    ["nine calls: never", "1=1 2=2 3=3 4=4 5=5 6=6 7=7 8=8 9=9 ".repeat(4), ".".repeat(36)],
    [
      "five calls whose results change: the backstop, the 45th",
      Array.from({ length: 45 }, (_, i) => `${(i % 5) + 1}=${i % 10}`).join(" "),
      ".".repeat(44) + "X",
    ],
    [
      "five calls, one changed in the 3rd turn: runs",
      "1=1 2=2 3=3 4=4 5=5 1=1 2=2 3=3 4=4 5=5 1=1 2=2 3=3 4=4 6",
      ".".repeat(15),
    ],
  ]
  test.each(table)("%s", async (_name, steps, expected) => {
    const { trace } = await start()
    expect(await trace(steps)).toBe(expected)
  })

  test("the longest backstop fits the history: eight calls whose results change, blocked at the 72nd", async () => {
    const { trace } = await start()
    const steps = Array.from({ length: 72 }, (_, i) => `${(i % 8) + 1}=${i % 10}`).join(" ")
    expect(await trace(steps)).toBe(".".repeat(71) + "X")
    expect(historyCapacity(3)).toBe(71) // the 71 calls before the 72nd: exactly what is kept
  })

  test("the message of a long cycle names its calls in order and its length", async () => {
    const { trace, call, logs } = await start()
    await trace("1=1 2=2 3=3 4=4 5=5 ".repeat(2) + "1=1 2=2 3=3 4=4")
    const message = await call("s1", "read", { filePath: "src/5.ts" })
    expect(message).toContain(
      "repeat the same cycle 3 times with identical arguments: read -> read -> read -> read -> read (cycle length 5)",
    )
    expect(logs.at(-1)?.extra).toMatchObject({ reason: "cycle", k: 5 })
  })
})

describe("the cycle check: progress is not a loop, results decide between the cycle and the backstop", () => {
  // "=x": the call returned output x, "!e": it failed with error e, no suffix: no result seen ("none").
  const table: [string, string, string][] = [
    ["an unchanged poll is blocked at the 4th", "P=r P=r P=r P", "...X"],
    [
      "a poll whose result changes runs 9 times, the 10th is the backstop",
      "P=1 P=2 P=3 P=4 P=5 P=6 P=7 P=8 P=9 P",
      ".........X",
    ],
    ["a changing poll, 7 calls: all run", "P=1 P=2 P=3 P=4 P=5 P=6 P=7", "......."],
    ["results that changed once in the window", "P=x P=y P=y P", "...."],
    ["then three unchanged results in a row catch it", "P=x P=y P=y P=y P", "....X"],
    ["no result seen counts as 'none' (equal to 'none')", "AAAA", "...X"],
    ["'none' next to a result is a change", "A=x A A=x A", "...."],
    ["the same failure each time is an unchanged result", "A!e A!e A!e A", "...X"],
    ["an error and an output of the same text differ", "A!e A=e A!e A", "...."],
    ["k = 2 with unchanged results: the 6th", "A=x Q=s A=x Q=s A=x Q", ".....X"],
    [
      "k = 2, a 1-second sleep (no wait) between polls, the poll's result changes: the 18th (backstop)",
      "Q=s P=1 Q=s P=2 Q=s P=3 Q=s P=4 Q=s P=5 Q=s P=6 Q=s P=7 Q=s P=8 Q=s P",
      ".................X",
    ],
    ["a retry at the backstop is blocked again", "P=1 P=2 P=3 P=4 P=5 P=6 P=7 P=8 P=9 P P", ".........XX"],
    [
      "a different call after the backstop starts the count over",
      "P=1 P=2 P=3 P=4 P=5 P=6 P=7 P=8 P=9 P Q=s P=a P=b P=c P",
      ".........X.....",
    ],
  ]
  test.each(table)("%s", async (_name, steps, expected) => {
    const { trace } = await start()
    expect(await trace(steps)).toBe(expected)
  })

  test.each([
    ["2", "P=1 P=2 P=3 P=4 P=5 P=6 P", "......X"], // max(3*2*1, 3*2+1) = 7
    ["4", "P=1 P=2 P=3 P=4 P=5 P=6 P=7 P=8 P=9 P=a P=b P=c P", "............X"], // 13
  ])("OPENCODE_LOOP_GUARD_REPETITIONS=%s moves the backstop: %s", async (r, steps, expected) => {
    const { trace } = await start({ OPENCODE_LOOP_GUARD_REPETITIONS: r })
    expect(await trace(steps)).toBe(expected)
  })

  test("a k = 1 block tells a polling agent to wait or read the log; the backstop says the results changed", async () => {
    const { call, succeed } = await start()
    for (let i = 0; i < 3; i++)
      (await call("s1", "bashoutput", { bash_id: "j" }), await succeed("s1", "bashoutput", "same"))
    const stuck = await call("s1", "bashoutput", { bash_id: "j" })
    expect(stuck).toContain("wait first (for example with sleep) or read its log before asking again")
    expect(stuck).toContain("returned the same results")
    const b = await start()
    for (let i = 0; i < 9; i++)
      (await b.call("s1", "bashoutput", { bash_id: "j" }), await b.succeed("s1", "bashoutput", `${i}`))
    const backstop = await b.call("s1", "bashoutput", { bash_id: "j" })
    expect(backstop).toContain("Your last 10 tool calls")
    expect(backstop).toContain("Their results changed")
    expect(backstop).toContain("wait first (for example with sleep)")
    expect(b.logs.find((l) => l.message.includes("blocked"))?.extra).toMatchObject({ reason: "backstop", k: 1 })
  })
})

// With volatile parts masked, a poll that moved and then pauses must not be caught at the window.
describe("the cycle check: a cycle seen advancing runs on to the backstop", () => {
  const table: [string, string, string][] = [
    ["a poll that never moved: the 4th", "P=r P=r P=r P", "...X"],
    ["one change before the window (the job starting) is not enough", "P=x P=y P=y P=y P", "....X"],
    ["two changes before the window: a job advancing, then pausing, runs", "P=x P=y P=z P=z P=z P", "......"],
    ["... until the backstop (the 10th)", "P=w P=x P=y P=z P=z P=z P=z P=z P=z P", ".........X"],
    ["changes the cycle did not make (another call) do not count", "A=x A=y P=z P=z P=z P", ".....X"],
    ["changes before a break in the cycle do not count", "P=w P=x P=y Q=s P=z P=z P=z P", ".......X"],
    [
      "k = 2: a check seen advancing, then the same 3 times (the window) runs",
      "A=1 Q=s A=2 Q=s A=3 Q=s A=3 Q=s A=3 Q",
      "..........",
    ],
  ]
  test.each(table)("%s", async (_name, steps, expected) => {
    const { trace } = await start()
    expect(await trace(steps)).toBe(expected)
  })
})

describe("waits: reading the sleep of a bash command", () => {
  // command -> seconds it sleeps before anything else (waitSeconds then needs 5 or more)
  const table: [string, number][] = [
    ["sleep 60", 60],
    ["sleep 30 && gh run view 1", 30],
    ["sleep 1m; gh run view 1", 60],
    ["sleep 1.5m", 90],
    ["sleep .5", 0.5],
    ["sleep 2h", 7200],
    ["sleep 1d", 86400],
    ["sleep 1m 30s", 90], // operands add up
    ["sleep 10 || true", 10],
    ["sleep 20\ngh run view 1", 20],
    ["  sleep 45  ", 45],
    ["sleep 1 && sleep 10 && gh run view 1", 11], // sleeps in a row add up
    ["sleep 30 && sleep 30 &", 30], // the background one does not wait
    ["cd ci && sleep 30 && make status", 30], // cd takes no time
    ["cd && sleep 8", 8],
    ["sleep 60 # until CI is done", 60],
    ["echo sleep 60", 0], // sleep is not the command
    ["gh run view 1 && sleep 60", 0], // something else first
    ["sleep 60 & gh run view 1", 0], // in the background
    ["sleep 60 | cat", 0],
    ["sleep 60 > /dev/null", 0],
    ["sleep $DELAY", 0],
    ['sleep "60"', 0],
    ["sleep infinity", 0],
    ["sleep --help", 0],
    ["sleep", 0],
    ["sleep 1x", 0],
    ["timeout 60 make", 0],
    ['cd "my dir" && sleep 60', 0], // a quoted word ends the reading
    ["cd a b && sleep 60", 0],
    ["(sleep 60; ls)", 0],
    ["sleeping 60", 0],
    ["; sleep 7", 7],
    ["", 0],
  ]
  test.each(table)("%s -> %d s", (command, seconds) => {
    expect(sleepSeconds(command)).toBe(seconds)
  })

  test("a long command is read only as far as its first command", () => {
    expect(sleepSeconds(`sleep 10 && ${"x".repeat(1_000_000)}`)).toBe(10)
    expect(sleepSeconds(`${"x".repeat(1_000_000)} && sleep 10`)).toBe(0)
    expect(sleepSeconds(`sleep 10 ${"1".repeat(1_000)}`)).toBe(0) // no sleep command is that long
  })

  test("durations read as the human reads them", () => {
    expect([15, 90, 1800, 3600, 3605, 5400, 0.4].map(duration)).toEqual([
      "15s",
      "1m30s",
      "30m",
      "1h",
      "1h0m5s",
      "1h30m",
      "0s",
    ])
  })
})

// A call that itself ran 5 s or more (tool.execute.before to its result) is a wait, like a sleep.
describe("waits: a call that waits counts as a wait (measured with the adapter's clock)", () => {
  const TIMED_CALLS: Record<string, [string, unknown]> = {
    W: ["process", { action: "wait", session: "job1", timeout: 30 }], // blocks until the job ends or 30 s pass
    K: ["process", { action: "poll", session: "job1" }], // answers at once
    Z: ["bash", { command: "sleep 60", description: "Wait a minute" }],
    A: ["read", { filePath: "src/a.ts" }],
    B: ["read", { filePath: "src/b.ts" }],
    F: ["edit", { filePath: "src/a.ts", oldString: "x", newString: "y" }],
    G: ["edit", { filePath: "src/a.ts", oldString: "y", newString: "x" }],
    T: ["bash", { command: "npm test" }],
  }

  /** Starts the plugin with a clock the test moves (options.clock, as server(input, options) receives it). */
  async function startTimed(env: Record<string, string> = {}) {
    const clock = { now: 1_700_000_000_000 }
    const started = await startLoopGuard(env, { clock: () => clock.now })
    return { ...started, ...driver(started.hooks), clock }
  }

  /**
   * Runs a timed trace: each word a call (TIMED_CALLS), then `~s` the seconds it ran (default 0), then its result
   * (`=x` output, `!e` error, none: no result seen); a word `+s` is time outside any call (the model answering).
   * Returns "." for a call that ran, "X" for a block.
   */
  async function timedTrace(t: Awaited<ReturnType<typeof startTimed>>, steps: string): Promise<string> {
    let outcome = ""
    for (const word of steps.split(" ").filter(Boolean)) {
      const pause = /^\+([\d.]+)$/.exec(word)
      if (pause) {
        t.clock.now += Number(pause[1]) * 1000
        continue
      }
      const [, letter, seconds, kind, value] = /^(.)(?:~([\d.]+))?(?:([=!])(.+))?$/.exec(word)!
      const [tool, args] = TIMED_CALLS[letter]
      const blocked = (await t.call("s1", tool, args)) !== null
      outcome += blocked ? "X" : "."
      if (blocked) {
        await t.fail("s1", tool, "loop-guard blocked this call")
        continue
      }
      t.clock.now += Number(seconds ?? 0) * 1000
      if (kind === "=") await t.succeed("s1", tool, value)
      if (kind === "!") await t.fail("s1", tool, value)
    }
    return outcome
  }
  const laps = (lap: string, n: number) => Array(n).fill(lap).join(" ")

  const table: [string, string, Record<string, string>, string][] = [
    ["[wait 30 s, check], same answers: a wait, 12 calls run", laps("W~30=r K=s", 6), {}, ".".repeat(12)],
    [
      "... timed to the budget: the first slow run is not yet a wait, then 60 waits of 30 s; the next is blocked",
      laps("W~30=r K=s", 62),
      {},
      ".".repeat(122) + "X.",
    ],
    [
      "one slow run is no wait: an echo that once took 6 s, the cycle is still blocked at the 6th",
      "K~6=s A=y K=s A=y K=s A",
      {},
      ".....X",
    ],
    ["... nor in the cycle's last lap (a loaded machine)", "K=s A=y K=s A=y K~6=s A", {}, ".....X"],
    ["the same cycle whose wait tool answers in 1 s is a loop: the 6th", laps("W~1=r K=s", 3), {}, ".....X"],
    ["a fast poll with the same answer is a loop at its 4th", laps("K~0.5=s", 4), {}, "...X"],
    ["a slow poll alone (30 s each, k = 1) is a wait", laps("K~30=s", 8), {}, "........"],
    ["5 s is a wait", laps("K~5=s", 6), {}, "......"],
    ["4.9 s is not", laps("K~4.9=s", 4), {}, "...X"],
    ["the model's time between calls is not the call's", laps("K~1=s +60", 4), {}, "...X"],
    ["a failed call is timed by its error event", laps("W~30!timeout K=s", 6), {}, ".".repeat(12)],
    ["a call whose result never came is no wait", laps("W~30 K=s", 3), {}, ".....X"],
    [
      "budget 2m: 4 waits of 30 s after the first slow run, the 5th is blocked",
      laps("K~30=s", 6),
      { OPENCODE_LOOP_GUARD_WAIT_BUDGET: "2m" },
      ".....X",
    ],
    [
      "lap cap 3: after the first slow run, the 4th wait is blocked, the check after it runs",
      laps("W~10=r K=s", 5),
      { OPENCODE_LOOP_GUARD_WAIT_LAPS: "3" },
      "........X.",
    ],
    [
      "a sleep counts what it asked for, not the time around it (ran 90 s, counted 60 s: 2 laps fit 2m)",
      laps("Z~90=z K=s", 2),
      { OPENCODE_LOOP_GUARD_WAIT_BUDGET: "2m" },
      "....",
    ],
    [
      "... and a 3rd sleep of a minute passes it",
      laps("Z~90=z K=s", 3),
      { OPENCODE_LOOP_GUARD_WAIT_BUDGET: "2m" },
      "....X.",
    ],
    [
      "a wait that then answers at once is taken as fast from then on: a loop at the window",
      "K~30=s K~0=s K~0=s K~0=s",
      {},
      "...X",
    ],
    [
      "a slow wait every other call between reads is a wait, not a per-call streak",
      "W~30=r A=a W~30=r B=b W~30=r A=a W~30=r B=b W~30=r",
      {},
      ".........",
    ],
    ["... and a fast one is a streak at its 4th", "W=r A=a W=r B=b W=r A=a W=r", {}, "......X"],
    // a cycle that edits files is work being retried, not a job being waited on: its slow test run is no wait
    ["edit -> test, the same results, tests of 10 s: the cycle's 6th", laps("F=ok T~10=fail", 4), {}, ".....X.."],
    [
      "edit -> test -> revert -> test, tests of 8 s: the cycle's 12th",
      laps("F=ok T~8=fail G=ok T~8=fail", 3),
      {},
      "...........X",
    ],
    [
      "edit -> test, results changing, tests of 5 min: the backstop (18th), never a wait past its budget",
      Array.from({ length: 9 }, (_, i) => `F=ok T~300=f${i}`).join(" "),
      {},
      ".................X",
    ],
    ["a sleep the command asks for is a wait even beside an edit", laps("F=ok Z=z", 5), {}, ".........."],
    ["a slow test run alone, nothing changed between, is a wait", laps("T~60=fail", 8), {}, "........"],
    [
      "no wait budget (0): a slow cycle is a loop like any other",
      laps("W~30=r K=s", 3),
      { OPENCODE_LOOP_GUARD_WAIT_BUDGET: "0" },
      ".....X",
    ],
  ]
  test.each(table)("%s", async (_name, steps, env, expected) => {
    expect(await timedTrace(await startTimed(env), steps)).toBe(expected)
  })

  test("the message counts the time the calls ran, and the first report of a result ends the call", async () => {
    const t = await startTimed({ OPENCODE_LOOP_GUARD_WAIT_BUDGET: "1m" })
    for (let i = 0; i < 3; i++) {
      expect(await t.call("s1", "process", { action: "poll", session: "job1" })).toBeNull()
      t.clock.now += 30_000
      // the part's completed event comes first; tool.execute.after 100 s later must not lengthen the call
      await t.emit("message.part.updated", {
        sessionID: "s1",
        part: { type: "tool", tool: "process", callID: `c${callNumber}`, state: { status: "completed", output: "s" } },
      })
      t.clock.now += 100_000
      await t.succeed("s1", "process", "s")
    }
    const blocked = await t.call("s1", "process", { action: "poll", session: "job1" })
    expect(blocked).toContain("2 waits so far, 1m slept in all")
    expect(blocked).toContain("wait budget of 1m")
  })

  test("a clock in the options that is no function is ignored (opencode's config holds no functions)", async () => {
    const started = await startLoopGuard({}, { clock: 5 })
    const { trace } = driver(started.hooks)
    expect(await trace("AAAA")).toBe("...X")
  })

  test("settling a call's measured wait: confirmed by its previous run, the timed cycle's count corrected", () => {
    const state = newSessionState()
    const capacity = historyCapacity(3, 3)
    const poll = signature("process", { action: "poll" })
    const run = (callID: string, expected: number, ran: number, asked = 0, identity = poll) => {
      const call = newCall(identity, callID, expected, asked)
      record(state, call, capacity)
      settleWait(state, call, ran)
      return call
    }
    expect(run("c1", 0, 30).wait).toBe(0) // one slow run is no wait
    expect(run("c2", 0, 31).wait).toBe(31) // a second one in a row is
    state.waiting = { members: [poll.signature], tools: ["process"], slept: 31, laps: 1 }
    const third = newCall(poll, "c3", 31, 0) // expected to wait 31 s, as the last run did
    record(state, third, capacity)
    expect(state.waiting).toMatchObject({ slept: 62, laps: 2 })
    settleWait(state, third, 0.2) // it answered at once: no wait
    expect(state.waiting).toMatchObject({ slept: 31, laps: 1 })
    expect(third.wait).toBe(0)
    settleWait(state, third, 50) // a later report of the same call changes nothing
    expect(state.waiting).toMatchObject({ slept: 31, laps: 1 })
    expect(run("c4", 0, 45).wait).toBe(0) // slow after a fast run: not yet
    expect(state.waiting).toMatchObject({ slept: 31, laps: 1 })
    expect(run("c5", 0, 40).wait).toBe(40) // slow after a slow run: a wait, counted
    expect(state.waiting).toMatchObject({ slept: 71, laps: 2 })
    // a sleep counts what it asked for, whatever it took
    expect(run("c6", 60, 90, 60, signature("bash", { command: "sleep 60" })).wait).toBe(60)
  })
})

describe("steps as sets: the same parallel calls in another order are the same step", () => {
  const table: [string, string, string, boolean?][] = [
    [
      "a fan-out re-emitted in another order: the 3rd step's last call",
      "A=a 1=1 2=2 | 2=2 A=a 1=1 | 1=1 2=2 A",
      "...|...|..X",
    ],
    ["the same with the steps announced by messageID", "A=a 1=1 2=2 | 2=2 A=a 1=1 | 1=1 2=2 A", "...|...|..X", true],
    ["two calls a step", "A=a 1=1 | 1=1 A=a | A=a 1", "..|..|.X"],
    [
      "eight calls a step",
      "1=1 2=2 3=3 4=4 5=5 6=6 7=7 8=8 | 8=8 7=7 6=6 5=5 4=4 3=3 2=2 1=1 | 2=2 1=1 4=4 3=3 6=6 5=5 8=8 7",
      "........|........|.......X",
    ],
    ["a retry in the same step is blocked again", "A=a 1=1 | 1=1 A=a | A=a 1 1", "..|..|.XX"],
    // look-alikes that must run
    ["two steps only", "A=a 1=1 2=2 | 2=2 A=a 1=1", "...|..."],
    ["one call changed in the 3rd step", "A=a 1=1 2=2 | 2=2 A=a 1=1 | 1=1 2=2 3", "...|...|..."],
    ["a result changed", "A=a 1=1 2=2 | 2=2 A=b 1=1 | 1=1 2=2 A", "...|...|..."],
    [
      "nine calls a step are not compared as a set",
      "1=1 2=2 3=3 4=4 5=5 6=6 7=7 8=8 9=9 | 9=9 8=8 7=7 6=6 5=5 4=4 3=3 2=2 1=1 | 2=2 1=1 4=4 3=3 6=6 5=5 8=8 7=7 9",
      ".........|.........|.........",
    ],
    [
      "the same calls one by one in another order (no step)",
      "A=a | 1=1 | 2=2 | 2=2 | A=a | 1=1 | 1=1 | 2=2 | A",
      ".|.|.|.|.|.|.|.|.",
    ],
    ["a new call before the repeated ones makes another step", "A=a 1=1 | 1=1 A=a | 3=3 A=a 1", "..|..|..."],
    ["a step with a wait is the wait rule's (within its budget)", "Z=z R=r | R=r Z=z | Z=z R", "..|..|.."],
  ]
  test.each(table)("%s", async (_name, steps, expected, announce) => {
    const { hooks } = await start()
    expect(await runSteps(hooks, steps, announce ?? false)).toBe(expected)
  })

  test("results that keep changing: the 9th step (3r) is the backstop", async () => {
    const { hooks } = await start()
    const steps = Array.from({ length: 9 }, (_, i) => (i % 2 ? `1=${i} A=${i}` : `A=${i} 1=${i}`)).join(" | ")
    expect(await runSteps(hooks, steps.replace(/ 1=8$/, " 1"))).toBe("..|..|..|..|..|..|..|..|.X")
  })

  test("the longest step backstop fits the history: 9 steps of 8 calls whose results change, the last call", async () => {
    const { hooks } = await start()
    // every other step in reverse order; each call's result changes at every step
    const order = (n: number) => (n % 2 ? [8, 7, 6, 5, 4, 3, 2, 1] : [1, 2, 3, 4, 5, 6, 7, 8])
    const step = (n: number) =>
      order(n)
        .map((c) => `${c}=${(c + n) % 10}`)
        .join(" ")
    const steps = Array.from({ length: 9 }, (_, n) => step(n)).join(" | ")
    const outcome = await runSteps(hooks, steps.replace(/=\d$/, ""))
    expect(outcome).toBe([...Array(8).fill("........"), ".......X"].join("|"))
  })

  test("the message names the step's tools, the count and that the results are in context", async () => {
    const { hooks, toasts, logs, call } = await start()
    expect(await runSteps(hooks, "A=a 1=1 | 1=1 A=a", false, "m1")).toBe("..|..")
    expect(await call("m1", ...CALLS["1"])).toBeNull() // the 3rd step, its calls made at once: no result between
    const message = (await call("m1", ...CALLS["A"])) ?? ""
    expect(message).toStartWith("loop-guard blocked this read call: it was not run.\n")
    expect(message).toContain("Your last 3 steps each made the same 2 tool calls at once, in some order")
    expect(message).toContain("already in your context")
    expect(message).not.toContain("src/")
    expect(toasts.at(-1)?.message).toBe(
      "loop-guard: blocked a step of 2 calls (read, read) made 3 times in any order; the agent was told to change course",
    )
    expect(logs.at(-1)?.extra).toMatchObject({ reason: "step", k: 2, repetitions: 3, changing: false })
  })
})

describe("the per-call streak: one call repeated among other calls", () => {
  // trace -> outcome, as in the cycle check; every call reports its result, so each call is its own step.
  const table: [string, string, string, Record<string, string>?][] = [
    ["a web search re-issued every other call while the reads between change", "w=s 1=1 w=s 2=2 w=s 3=3 w", "......X"],
    ["a re-read every other call: blocked at its 4th occurrence", "A=a 1=1 A=a 2=2 A=a 3=3 A", "......X"],
    ["its 3rd occurrence runs", "A=a 1=1 A=a 2=2 A", "....."],
    ["back to back in places (no gap is no gap too)", "A=a A=a 1=1 A=a 2=2 A", ".....X"],
    ["a read-only command between does not reset it", "A=a g=g A=a 1=1 A=a 2=2 A", "......X"],
    ["a failed edit between does not reset it", "A=a 1=1 A=a F!e A=a 2=2 A", "......X"],
    ["a grep and a glob between do not reset it", "A=a C=c A=a D=d A=a 2=2 A", "......X"],
    ["r = 2: blocked at its 3rd occurrence", "A=a 1=1 A=a 2=2 A", "....X", { OPENCODE_LOOP_GUARD_REPETITIONS: "2" }],
    ["a retry of the blocked call is blocked again", "A=a 1=1 A=a 2=2 A=a 3=3 A A", "......XX"],
    // look-alikes that must run
    [
      "exploring: [a], [a,b], [a,b,c], [a,b,c,d] (every round adds work)",
      "A=a A=a 1=1 A=a 1=1 2=2 A=a 1=1 2=2 3=3",
      "..........",
    ],
    ["re-reads two calls apart", "A=a 1=1 2=2 A=a 3=3 4=4 A=a 5=5 6=6 A=a", ".........."],
    ["its result changed", "A=a 1=1 A=b 2=2 A=a 3=3 A", "......."],
    ["an edit between (the re-read checks a change)", "A=a 1=1 A=a F=f A=a 2=2 A", "......."],
    ["a write between", "A=a 1=1 A=a W=w A=a 2=2 A", "......."],
    [
      "a tool loop-guard does not know (an MCP tool) between may have changed something",
      "A=a 1=1 A=a m=m A=a 2=2 A",
      ".......",
    ],
    ["a subagent (task) between", "A=a 1=1 A=a M=t A=a 2=2 A", "......."],
    ["a command that is not read-only between (npm test)", "A=a 1=1 A=a T=t A=a 2=2 A", "......."],
    ["the same partner every time is a cycle, the cycle rule's: its 6th", "A=a 1=1 A=a 1=1 A=a 1=1", ".....X"],
    [
      "the same partner, results changing: the cycle's backstop, not a streak",
      "A=a 1=1 A=a 1=2 A=a 1=3 A=a 1=4 A=a 1=5 A=a 1=6 A=a 1=7 A=a 1=8 A=a 1=9",
      ".................X",
    ],
    ["an exempt tool repeats freely", "A=a 1=1 A=a 2=2 A=a 3=3 A", ".......", { OPENCODE_LOOP_GUARD_EXEMPT: "read" }],
    // a wait is the wait rule's (its budget), not a streak: a CI poll that sleeps first, between reads of logs
    ["a sleep-first poll every other call between reads", "Y=r 1=1 Y=r 2=2 Y=r 3=3 Y=r 4=4 Y=r", "........."],
    ["a sleep every other call between reads", "Z=z 1=1 Z=z 2=2 Z=z 3=3 Z=z", "......."],
  ]
  test.each(table)("%s", async (_name, steps, expected, env) => {
    const { trace } = await start(env ?? {})
    expect(await trace(steps)).toBe(expected)
  })

  test("the model reads which tool repeated, how often, that its result is in context; no argument value", async () => {
    const { trace, call, toasts, logs } = await start()
    expect(await trace("w=s 1=1 w=s 2=2 w=s 3=3")).toBe("......")
    const message = await call("s1", "websearch", { query: "opencode plugin hooks" })
    expect(message).toStartWith("loop-guard blocked this websearch call: it was not run.\n")
    expect(message).toContain("make this same websearch call 4 times with identical arguments, between other calls")
    expect(message).toContain("that result is already in your context")
    expect(message).not.toContain("opencode plugin hooks")
    expect(toasts.at(-1)).toEqual({
      message: "loop-guard: blocked a 4th identical websearch among other calls; the agent was told to change course",
      variant: "warning",
    })
    expect(logs.at(-1)?.extra).toMatchObject({ reason: "streak", tools: ["websearch"], occurrences: 4, calls: 7 })
  })

  test("warn mode: the 4th runs and its result carries the note", async () => {
    const { trace, call, succeed, toasts } = await start({ OPENCODE_LOOP_GUARD: "warn" })
    expect(await trace("w=s 1=1 w=s 2=2 w=s 3=3")).toBe("......")
    expect(await call("s1", "websearch", { query: "opencode plugin hooks" })).toBeNull()
    const seen = await succeed("s1", "websearch", "results")
    expect(seen).toStartWith(
      "results\n\nloop-guard warning: this websearch call ran, but it repeats what you did before",
    )
    expect(seen).toContain("that result is already in your context")
    expect(toasts.at(-1)?.message).toBe(
      "loop-guard: warned about a 4th identical websearch among other calls; it ran (warn mode) and the agent was told",
    )
  })

  test("parallel steps: a re-read beside a different call in every step, in any position", async () => {
    const { hooks } = await start()
    expect(await runSteps(hooks, "A=a 1=1 | 2=2 A=a | A=a 3=3 | 4=4 A")).toBe("..|..|..|.X")
  })

  test("parallel steps: exploring [a], [a,b], [a,b,c], [a,b,c,d], [a,b,c,d,e] runs", async () => {
    const { hooks } = await start()
    expect(await runSteps(hooks, "A=a | A=a 1=1 | A=a 1=1 2=2 | A=a 1=1 2=2 3=3 | A=a 1=1 2=2 3=3 4=4")).toBe(
      ".|..|...|....|.....",
    )
  })
})

describe("the wait rule: a cycle with a wait runs until its budget", () => {
  // Z: sleep 60, V: sleep 5, Q: sleep 1 (no wait), R: the poll (its result `=p` each time), Y: sleep 30 && poll.
  const table: [string, string, Record<string, string>, string][] = [
    ["sleep 60 + poll, 30 laps (30 minutes): all run", laps("Z R=p", 30), {}, ".".repeat(60)],
    ["the 31st minute of waiting is blocked", laps("Z R=p", 31), {}, ".".repeat(60) + "X."],
    ["sleep 5 + poll: the 61st lap is blocked by the lap cap", laps("V R=p", 61), {}, ".".repeat(120) + "X."],
    ["a wait and a poll in one command (k = 1): 60 runs, the 61st blocked", laps("Y=p", 61), {}, ".".repeat(60) + "X"],
    ["a 1-second sleep is no wait: the 6th call is blocked as a cycle", laps("Q R=p", 3), {}, ".....X"],
    [
      "the same poll back to back inside a wait is caught at the 4th",
      laps("Z R=p", 3) + " R=p R=p R=p",
      {},
      "........X",
    ],
    [
      "a poll whose result changes waits to the budget too",
      "Z R=1 Z R=2 Z R=3 Z R=4 Z R=5 Z R=6 Z R=7 Z R=8 Z R=9 Z R=a Z",
      { OPENCODE_LOOP_GUARD_WAIT_BUDGET: "10m" },
      ".".repeat(20) + "X",
    ],
    [
      "10-minute waits, the poll's result changing: timed from the 2nd lap whatever the results, the 4th blocked",
      "U R=1 U R=2 U R=3 U R=4",
      {},
      "......X.",
    ],
    ["budget 3m: the 4th minute is blocked", laps("Z R=p", 4), { OPENCODE_LOOP_GUARD_WAIT_BUDGET: "3m" }, "......X."],
    // A waiting cycle is timed from its 2nd lap (a wait repeating one of the last calls), before the cycle rule's
    // window: a long sleep that would pass the budget never runs.
    ["sleep 20m + poll: the 2nd sleep (minutes 20-40) is blocked", laps("S R=p", 2), {}, "..X."],
    ["sleep 20m alone, twice: the 2nd is blocked", "S S", {}, ".X"],
    ["budget 1m: the 2nd minute is blocked", laps("Z R=p", 2), { OPENCODE_LOOP_GUARD_WAIT_BUDGET: "1m" }, "..X."],
    [
      "a call outside the cycle starts the count over at the 2nd lap too: 3 more minutes after the read",
      laps("Z R=p", 2) + " A=x " + laps("Z R=p", 4),
      { OPENCODE_LOOP_GUARD_WAIT_BUDGET: "3m" },
      "...." + "." + "......X.",
    ],
    [
      "a call outside the cycle restarts the budget (5 more minutes after the read, not 1)",
      laps("Z R=p", 4) + " A=x " + laps("Z R=p", 6),
      { OPENCODE_LOOP_GUARD_WAIT_BUDGET: "5m" },
      "........" + "." + ".........." + "X.",
    ],
    [
      "without that call the 6th minute is blocked",
      laps("Z R=p", 6),
      { OPENCODE_LOOP_GUARD_WAIT_BUDGET: "5m" },
      ".........." + "X.",
    ],
    [
      "budget 15s with sleep 5 + poll: 3 waits run",
      laps("V R=p", 4),
      { OPENCODE_LOOP_GUARD_WAIT_BUDGET: "15s" },
      "......X.",
    ],
    [
      "budget 0: a cycle with a sleep is a loop like any other",
      laps("Z R=p", 3),
      { OPENCODE_LOOP_GUARD_WAIT_BUDGET: "0" },
      ".....X",
    ],
    [
      "OPENCODE_LOOP_GUARD_WAIT_LAPS=5: the 6th lap is blocked",
      laps("V R=p", 6),
      { OPENCODE_LOOP_GUARD_WAIT_LAPS: "5" },
      ".".repeat(10) + "X.",
    ],
    [
      "a budget in plain seconds (240 = 4 waits of 60)",
      laps("Z R=p", 5),
      { OPENCODE_LOOP_GUARD_WAIT_BUDGET: "240" },
      ".".repeat(8) + "X.",
    ],
    [
      "a budget in hours: 1h is 60 waits of a minute",
      laps("Z R=p", 61),
      { OPENCODE_LOOP_GUARD_WAIT_BUDGET: "1h" },
      ".".repeat(120) + "X.",
    ],
  ]
  test.each(table)("%s", async (_name, steps, env, expected) => {
    const { trace } = await start(env)
    expect(await trace(steps)).toBe(expected)
  })

  test("4 identical polls, then sleep 60 + poll for 20 laps: one block in the whole sequence (the 4th poll); the 31st minute is blocked", async () => {
    const { call, succeed, toasts, logs, aborts } = await start()
    const poll = ["bash", { command: "gh run view 123 --json status", description: "Check the run" }] as const
    const wait = ["bash", { command: "sleep 60", description: "Wait for CI" }] as const
    let outcome = ""
    const run = async ([tool, args]: readonly [string, unknown], output: string) => {
      const blocked = (await call("s1", tool, args)) !== null
      outcome += blocked ? "X" : "."
      if (!blocked) await succeed("s1", tool, output)
    }
    for (let i = 0; i < 4; i++) await run(poll, "in_progress")
    for (let lap = 0; lap < 20; lap++) (await run(wait, ""), await run(poll, "in_progress"))
    expect(outcome).toBe("...X" + ".".repeat(40))
    expect(toasts.length).toBe(1)
    expect(logs.filter((l) => l.message.includes("blocked")).length).toBe(1)
    expect(aborts).toEqual([])
    // 10 more minutes run; the 31st is blocked, its poll still runs
    for (let lap = 0; lap < 11; lap++) (await run(wait, ""), await run(poll, "in_progress"))
    expect(outcome).toBe("...X" + ".".repeat(60) + "X.")
    expect(toasts.at(-1)?.message).toStartWith("loop-guard: blocked a wait past its budget (30m slept in 30 laps")
  })

  test("after the 31st minute is blocked, a poll and then a sleep: the sleep is blocked too", async () => {
    const { trace, toasts, aborts } = await start()
    expect(await trace(laps("Z R=p", 30))).toBe(".".repeat(60))
    expect(await trace("Z R=p Z")).toBe("X.X") // the 31st minute, its poll, still past the budget
    expect(toasts.at(-1)?.message).toBe(
      "loop-guard: blocked a wait past its budget (30m slept in 30 laps of bash -> bash); the agent was told to " +
        "stop and report what it is waiting for",
    )
    expect(await trace("Z Z Z")).toBe("XXX") // the 5th block in the turn stops the run
    expect(aborts).toEqual([{ path: { id: "s1" } }])
  })

  test("a call outside the timed cycle still starts the count over, after a block as before", async () => {
    const { trace } = await start()
    expect(await trace(laps("Z R=p", 30) + " Z")).toBe(".".repeat(60) + "X")
    expect(await trace("A=x Z")).toBe("..")
  })

  test("a wait blocked at its 2nd lap: the message and the toast say 1 wait, 1 lap", async () => {
    const { trace, call, toasts } = await start()
    await trace("S R=p")
    const message = await call("s1", ...CALLS.S)
    expect(message).toContain("1 wait so far, 20m slept in all")
    expect(toasts.at(-1)?.message).toBe(
      "loop-guard: blocked a wait past its budget (20m slept in 1 lap of bash -> bash); the agent was told to stop " +
        "and report what it is waiting for",
    )
  })

  test("the blocked wait tells the agent to stop and report what it waits for; the human gets a toast; no argument", async () => {
    const { trace, call, toasts, logs } = await start()
    await trace(laps("Z R=p", 30))
    const message = await call("s1", ...CALLS.Z)
    expect(message).not.toBeNull()
    const lines = message!.split("\n")
    expect(lines[0]).toBe("loop-guard blocked this bash call: it was not run.")
    expect(lines[1]).toBe(
      "You have been waiting in a cycle: bash -> bash (cycle length 2), 30 waits so far, 30m slept in all. One more " +
        "wait would go past loop-guard's wait budget of 30m (OPENCODE_LOOP_GUARD_WAIT_BUDGET).",
    )
    expect(message).toContain("Stop calling tools now and report to the user what you are waiting for")
    expect(message).not.toContain("materially different action") // the advice to try another way would contradict it
    expect(toasts).toEqual([
      {
        message:
          "loop-guard: blocked a wait past its budget (30m slept in 30 laps of bash -> bash); the agent was told to " +
          "stop and report what it is waiting for",
        variant: "warning",
      },
    ])
    expect(logs.find((l) => l.message.includes("blocked"))?.extra).toMatchObject({
      reason: "wait",
      limit: "budget",
      slept: 1800,
      laps: 30,
      k: 2,
    })
    const seen = message + JSON.stringify(toasts) + JSON.stringify(logs)
    for (const leak of ["gh run", "123", "sleep 60", "Wait a minute", "CI run"]) expect(seen).not.toContain(leak)
  })

  test("past the lap cap the message and the toast name the cap", async () => {
    const { trace, call, toasts } = await start()
    await trace(laps("V R=p", 60))
    const message = await call("s1", ...CALLS.V)
    expect(message).toContain("60 waits so far, 5m slept in all")
    expect(message).toContain("loop-guard's cap of 60 laps (OPENCODE_LOOP_GUARD_WAIT_LAPS)")
    expect(toasts.at(-1)?.message).toBe(
      "loop-guard: blocked a wait past its lap cap (60 laps of bash -> bash, 5m slept); the agent was told to stop " +
        "and report what it is waiting for",
    )
  })

  test("a blocked wait retried is blocked again, and a wait's blocks count toward the bounded stop", async () => {
    const { trace, aborts, toasts } = await start({ OPENCODE_LOOP_GUARD_WAIT_BUDGET: "2m" })
    expect(await trace(laps("Z R=p", 2) + " Z Z Z Z Z")).toBe("....XXXXX")
    expect(aborts).toEqual([{ path: { id: "s1" } }])
    expect(toasts.at(-1)?.message).toStartWith(
      "loop-guard: stopped the agent after 5 blocks in one turn (the last: a wait past its budget",
    )
  })

  test("blocks of other loops and of a wait add up to the bounded stop", async () => {
    const { trace, aborts } = await start({ OPENCODE_LOOP_GUARD_WAIT_BUDGET: "2m" })
    expect(await trace("A A A A A A A")).toBe("...XXXX")
    expect(aborts).toEqual([])
    expect(await trace(laps("Z R=p", 3))).toBe("....X.")
    expect(aborts).toEqual([{ path: { id: "s1" } }])
  })

  test.each([
    ["a new turn (session idle)", "session.idle", { sessionID: "s1" }],
    ["a compaction", "session.compacted", { sessionID: "s1" }],
  ])("%s restarts the wait budget", async (_name, type, properties) => {
    const { trace, emit } = await start({ OPENCODE_LOOP_GUARD_WAIT_BUDGET: "5m" })
    expect(await trace(laps("Z R=p", 4))).toBe("........")
    await emit(type, properties)
    expect(await trace(laps("Z R=p", 6))).toBe(".........." + "X.") // 5 more minutes, not 1
  })

  test("waits in two sessions are timed apart", async () => {
    const { trace } = await start({ OPENCODE_LOOP_GUARD_WAIT_BUDGET: "3m" })
    let outcome = ""
    for (let lap = 0; lap < 4; lap++) outcome += (await trace("Z R=p", "s1")) + (await trace("Z R=p", "s2"))
    expect(outcome).toBe(".".repeat(12) + "X.X.") // a budget shared between them would block s1's 3rd lap
  })

  test("the time a model takes to answer is no wait: a slow loop without sleep is caught as today", async () => {
    const { call, succeed } = await start()
    let outcome = ""
    for (let i = 0; i < 4; i++) {
      await new Promise((resolve) => setTimeout(resolve, 30)) // the model thinking between calls
      outcome += (await call("s1", ...CALLS.R)) === null ? "." : "X"
      await succeed("s1", "bash", "in_progress")
    }
    expect(outcome).toBe("...X")
  })

  test("warn mode: a wait past its budget runs, the model reads the note, the human a warning toast", async () => {
    const { trace, call, succeed, toasts } = await start({
      OPENCODE_LOOP_GUARD: "warn",
      OPENCODE_LOOP_GUARD_WAIT_BUDGET: "3m",
    })
    expect(await trace(laps("Z R=p", 3))).toBe("......")
    expect(await call("s1", ...CALLS.Z)).toBeNull()
    const seen = await succeed("s1", "bash", "")
    expect(seen).toContain("One more wait would go past loop-guard's wait budget of 3m")
    expect(seen).not.toContain("materially different action")
    expect(toasts.at(-1)?.message).toStartWith("loop-guard: warned about a wait past its budget (3m slept in 3 laps")
  })

  test.each(["-1", "abc", "25h", "1.5m", "90000", "10 m", "1d"])(
    "OPENCODE_LOOP_GUARD_WAIT_BUDGET=%s is logged, default used",
    async (value) => {
      const { trace, logs } = await start({ OPENCODE_LOOP_GUARD_WAIT_BUDGET: value })
      expect(await trace(laps("Z R=p", 31))).toBe(".".repeat(60) + "X.")
      expect(logs.some((l) => l.level === "warn" && l.message.includes("OPENCODE_LOOP_GUARD_WAIT_BUDGET"))).toBe(true)
    },
  )

  test.each(["0", "x", "10001", "2.5"])("OPENCODE_LOOP_GUARD_WAIT_LAPS=%s is logged, default used", async (value) => {
    const { trace, logs } = await start({ OPENCODE_LOOP_GUARD_WAIT_LAPS: value })
    expect(await trace(laps("V R=p", 61))).toBe(".".repeat(120) + "X.")
    expect(logs.some((l) => l.level === "warn" && l.message.includes("OPENCODE_LOOP_GUARD_WAIT_LAPS"))).toBe(true)
  })
})

describe("the failure streak: one tool failing the same way, whatever its arguments", () => {
  const table: [string, string, string][] = [
    ["3 edits fail the same way: the 4th edit is blocked", "F!n G!n H!n I", "...X"],
    ["a retry is blocked again", "F!n G!n H!n I J", "...XX"],
    ["another tool still runs", "F!n G!n H!n A=x", "...."],
    ["any successful call ends the streak", "F!n G!n H!n A=x I", "....."],
    ["a success in the middle", "F!n G!n A=x H!n I", "....."],
    ["different errors are no streak", "F!a G!b H!a I", "...."],
    ["another tool failing the same way breaks it", "F!n G!n W!n I", "...."],
    ["2 failures are not yet a streak", "F!n G!n I", "..."],
    ["a failure whose result was not seen (yet) breaks it", "F!n G!n H I", "...."],
    ["bash is never blocked for failing: distinct failing commands", "T!e L!e K!e Q!e", "...."],
    ["edits of different files", "J!d F!d G!d H", "...X"],
  ]
  test.each(table)("%s", async (_name, steps, expected) => {
    const { trace } = await start()
    expect(await trace(steps)).toBe(expected)
  })

  test.each([
    ["2", "F!n G!n H", "..X"],
    ["5", "F!n G!n H!n I!n J!n F", ".....X"],
    ["0", "F!n G!n H!n I!n J!n F!n G", "......."],
  ])("OPENCODE_LOOP_GUARD_FAILURES=%s: %s -> %s", async (n, steps, expected) => {
    const { trace } = await start({ OPENCODE_LOOP_GUARD_FAILURES: n })
    expect(await trace(steps)).toBe(expected)
  })

  test.each(["1", "51", "x", "-1", "2.5"])("OPENCODE_LOOP_GUARD_FAILURES=%s is logged, default used", async (n) => {
    const { trace, logs } = await start({ OPENCODE_LOOP_GUARD_FAILURES: n })
    expect(await trace("F!n G!n H!n I")).toBe("...X")
    expect(logs.some((l) => l.level === "warn" && l.message.includes("OPENCODE_LOOP_GUARD_FAILURES"))).toBe(true)
  })

  test("an exempt tool is not blocked for failing", async () => {
    const { trace } = await start({ OPENCODE_LOOP_GUARD_EXEMPT: "edit" })
    expect(await trace("F!n G!n H!n I")).toBe("....")
  })

  test("the message names the tool and the count, says to re-read the file and change approach; no error text, no argument", async () => {
    const { call, fail, logs, toasts } = await start()
    const secret = "sk-live-SECRET-4242"
    for (const old of ["a", "b", "c"]) {
      await call("s1", "edit", { filePath: `/home/alice/${secret}.ts`, oldString: `${secret}${old}`, newString: "z" })
      await fail("s1", "edit", `Could not find oldString ${secret} in /home/alice`)
    }
    const message = await call("s1", "edit", { filePath: "/home/alice/x.ts", oldString: "d", newString: "z" })
    expect(message).toStartWith("loop-guard blocked this edit call: it was not run.")
    expect(message).toContain("Your last 3 tool calls were edit calls, and each failed with the same error")
    expect(message).toContain("for edit: read the file again")
    expect(message).toContain("change your approach")
    const seen = message + JSON.stringify(logs) + JSON.stringify(toasts)
    for (const leak of [secret, "alice", "Could not find", "oldString"]) expect(seen).not.toContain(leak)
    expect(logs.find((l) => l.message.includes("blocked"))?.extra).toMatchObject({
      reason: "failures",
      tools: ["edit"],
      failures: 3,
    })
  })

  test("failure events of other sessions, unknown call ids and odd shapes are ignored", async () => {
    const { call, emit, trace } = await start()
    await call("s1", "edit", { a: 1 })
    for (const properties of [
      { sessionID: "s2", part: { type: "tool", callID: `c${callNumber}`, state: { status: "error", error: "e" } } },
      { sessionID: "s1", part: { type: "tool", callID: "nope", state: { status: "error", error: "e" } } },
      { sessionID: "s1", part: { type: "text", callID: `c${callNumber}`, state: { status: "error" } } },
      { sessionID: "s1", part: { type: "tool", callID: `c${callNumber}`, state: { status: "completed" } } },
      { part: null },
      null,
    ])
      await emit("message.part.updated", properties)
    expect(await trace("G!n H!n I")).toBe("...") // the first edit did not become a failure
  })
})

describe("texts: the message the model reads", () => {
  const SECRETS = ["sk-live-SECRET-4242", "/home/alice/.ssh/id_rsa", "hunter2"]
  const secretRead: readonly [string, unknown] = ["read", { filePath: SECRETS[1] }]
  const secretBash: readonly [string, unknown] = [
    "bash",
    { command: `curl -H 'Authorization: ${SECRETS[0]}' x`, env: { PASS: SECRETS[2] } },
  ]

  test("names the tools in order, k and repetitions, says the results are in context, asks for a different action", async () => {
    const { call } = await start()
    let message: string | null = null
    for (let i = 0; i < 6; i++) message = await call("s1", ...(i % 2 ? secretRead : secretBash))
    expect(message).not.toBeNull()
    expect(message).toContain("bash -> read")
    expect(message).toContain("cycle length 2")
    expect(message).toContain("3 times")
    expect(message).toContain("already in your context")
    expect(message).toContain("materially different action")
    expect(message).toContain("explain to the user what blocks you")
  })

  test("never contains an argument value, nor do the log lines", async () => {
    const { call, logs } = await start()
    const messages: string[] = []
    for (let i = 0; i < 12; i++) {
      const message = await call("s1", ...(i % 2 ? secretRead : secretBash))
      if (message) messages.push(message)
    }
    expect(messages.length).toBeGreaterThan(0)
    expect(logs.length).toBeGreaterThan(0)
    const seen = messages.join("\n") + JSON.stringify(logs)
    for (const secret of SECRETS) expect(seen).not.toContain(secret)
    for (const fragment of ["alice", "Authorization", "curl", "PASS"]) expect(seen).not.toContain(fragment)
  })

  test("escalates from the 3rd block in a session: the count, and stop calling tools", async () => {
    const { call, emit } = await start()
    for (let i = 0; i < 3; i++) await call("s1", "read", { filePath: "a" })
    const first = await call("s1", "read", { filePath: "a" })
    const second = await call("s1", "read", { filePath: "a" })
    const third = await call("s1", "read", { filePath: "a" })
    const fourth = await call("s1", "read", { filePath: "a" })
    expect(first).not.toContain("Stop calling tools")
    expect(second).not.toContain("Stop calling tools")
    expect(third).toContain("3rd time")
    expect(third).toContain("Stop calling tools now and report to the user")
    expect(fourth).toContain("4th time")
    // another session has its own count
    for (let i = 0; i < 3; i++) await call("s2", "read", { filePath: "a" })
    expect(await call("s2", "read", { filePath: "a" })).not.toContain("Stop calling tools")
    // a reset starts the count over
    await emit("session.idle", { sessionID: "s1" })
    for (let i = 0; i < 3; i++) await call("s1", "read", { filePath: "a" })
    expect(await call("s1", "read", { filePath: "a" })).not.toContain("Stop calling tools")
  })

  test("each block is logged with tool names, k and session id", async () => {
    const { trace, logs } = await start()
    await trace("ABABAB")
    const block = logs.find((log) => log.message.includes("blocked"))
    expect(block?.service).toBe("loop-guard")
    expect(block?.extra).toMatchObject({ sessionID: "s1", tools: ["read", "bash"], k: 2, repetitions: 3 })
  })
})

describe("texts: toasts, the human sees every block", () => {
  const table: [string, string, Record<string, string>, string, string][] = [
    [
      "a 4th identical read",
      "AAAA",
      {},
      "loop-guard: blocked a 4th identical read; the agent was told to change course",
      "warning",
    ],
    [
      "an A-B cycle",
      "ATATAT",
      {},
      "loop-guard: blocked a cycle read -> bash repeated 3 times; the agent was told to change course",
      "warning",
    ],
    [
      "the backstop",
      "P=1 P=2 P=3 P=4 P=5 P=6 P=7 P=8 P=9 P",
      {},
      "loop-guard: blocked a 10th identical bashoutput whose results kept changing; the agent was told to wait or change course",
      "warning",
    ],
    [
      "a failure streak",
      "F!n G!n H!n I",
      {},
      "loop-guard: blocked edit after 3 failures in a row; the agent was told to re-read and change approach",
      "warning",
    ],
    [
      "the 3rd block escalates",
      "AAAAAA",
      {},
      "loop-guard: blocked a 6th identical read; the agent was told to stop and report",
      "error",
    ],
    [
      "an 8th (article)",
      "AAAAAAAA",
      { OPENCODE_LOOP_GUARD_REPETITIONS: "7" },
      "loop-guard: blocked an 8th identical read; the agent was told to change course",
      "warning",
    ],
    [
      "warn mode",
      "AAAA",
      { OPENCODE_LOOP_GUARD: "warn" },
      "loop-guard: warned about a 4th identical read; it ran (warn mode) and the agent was told",
      "warning",
    ],
  ]
  test.each(table)("%s", async (_name, steps, env, message, variant) => {
    const { trace, toasts } = await start(env)
    await trace(steps)
    expect(toasts.at(-1)).toEqual({ message, variant })
  })

  test("a blocked retry counts on: the human sees a 5th, a 6th identical read; a new repeat starts at the 4th", async () => {
    const { trace, toasts } = await start({ OPENCODE_LOOP_GUARD_MAX_BLOCKS: "0" })
    await trace("AAAAAA")
    expect(toasts.map((t) => t.message.replace(/;.*/, ""))).toEqual([
      "loop-guard: blocked a 4th identical read",
      "loop-guard: blocked a 5th identical read",
      "loop-guard: blocked a 6th identical read",
    ])
    await trace("EAAAA") // a different call ran in between: the next repeat is a 4th again
    expect(toasts.at(-1)?.message).toStartWith("loop-guard: blocked a 4th identical read")
  })

  test("one toast per block, none for calls that ran; variants warning, warning, error, error, then the stop", async () => {
    const { trace, toasts } = await start()
    await trace("ABCDE")
    expect(toasts).toEqual([])
    await trace("AAAAAAA")
    expect(toasts.map((t) => t.variant)).toEqual(["warning", "warning", "error", "error"])
    await trace("A")
    expect(toasts.length).toBe(5)
    expect(toasts[4].message).toStartWith("loop-guard: stopped the agent")
  })

  test("a toast never carries an argument value", async () => {
    const { call, toasts } = await start()
    for (let i = 0; i < 8; i++)
      await call("s1", "bash", { command: "cat /home/alice/.ssh/id_rsa", description: "hunter2" })
    expect(toasts.length).toBe(5)
    for (const t of toasts)
      for (const leak of ["alice", "id_rsa", "hunter2", "cat "]) expect(t.message).not.toContain(leak)
  })

  test("toasts and aborts are fire and forget: a client that hangs or throws does not delay or break a block", async () => {
    const never = () => new Promise(() => {})
    const throwing = () => {
      throw new Error("no TUI")
    }
    for (const fn of [never, throwing, () => Promise.reject(new Error("rejected"))]) {
      const client = { app: { log: fn }, tui: { showToast: fn }, session: { abort: fn } }
      const hooks = await plugin.server({ client } as any)
      expect(await driver(hooks).trace("AAAAAAAA")).toBe("...XXXXX")
    }
  })
})

describe("settings from the environment", () => {
  test("OPENCODE_LOOP_GUARD=off: no hooks, every call runs", async () => {
    const { hooks, trace } = await start({ OPENCODE_LOOP_GUARD: "off" })
    expect(hooks["tool.execute.before"]).toBeUndefined()
    expect(await trace("AAAAAA")).toBe("......")
  })

  test("OPENCODE_LOOP_GUARD=warn: the call runs and a warning is logged", async () => {
    const { trace, logs } = await start({ OPENCODE_LOOP_GUARD: "warn" })
    expect(await trace("AAAAA")).toBe(".....")
    const warnings = logs.filter((log) => log.level === "warn" && log.message.includes("warn mode"))
    expect(warnings.length).toBe(2)
    expect(warnings[0].extra).toMatchObject({ k: 1, tools: ["read"], sessionID: "s1" })
  })

  test("OPENCODE_LOOP_GUARD=block is the default and accepted explicitly", async () => {
    expect(await (await start({ OPENCODE_LOOP_GUARD: "block" })).trace("AAAA")).toBe("...X")
    expect(await (await start({ OPENCODE_LOOP_GUARD: " WARN " })).trace("AAAA")).toBe("....")
  })

  test("an invalid mode is logged and replaced by block", async () => {
    const { trace, logs } = await start({ OPENCODE_LOOP_GUARD: "strict" })
    expect(await trace("AAAA")).toBe("...X")
    expect(logs.some((log) => log.message.includes('OPENCODE_LOOP_GUARD="strict"'))).toBe(true)
  })

  const repetitionTable: [string, string, string][] = [
    ["2", "AAA", "..X"], // max(2*1, 3) = 3
    ["2", "ABAB", "...X"], // max(2*2, 3) = 4
    ["2", "ABCDABCD", ".......X"],
    ["4", "AAAAA", "....X"], // max(4, 5) = 5
    ["4", "ABABABAB", ".......X"],
    ["5", "ABCDABCDABCDABCDABCD", "...................X"],
  ]
  test.each(repetitionTable)("OPENCODE_LOOP_GUARD_REPETITIONS=%s: %s -> %s", async (r, letters, expected) => {
    const { trace } = await start({ OPENCODE_LOOP_GUARD_REPETITIONS: r })
    expect(await trace(letters)).toBe(expected)
  })

  test.each(["1", "0", "-3", "abc", "2.5", "51", "3x"])(
    "OPENCODE_LOOP_GUARD_REPETITIONS=%s is logged, default used",
    async (r) => {
      const { trace, logs } = await start({ OPENCODE_LOOP_GUARD_REPETITIONS: r })
      expect(await trace("AAAA")).toBe("...X")
      expect(logs.some((log) => log.level === "warn" && log.message.includes("OPENCODE_LOOP_GUARD_REPETITIONS"))).toBe(
        true,
      )
    },
  )

  const exemptTable: [string, string, [string, unknown][], string][] = [
    ["an exempt tool repeats freely", "todowrite", [["todowrite", { todos: [] }]], "......"],
    ["a * glob", "mcp_*_poll", [["mcp_jobs_poll", { id: 1 }]], "......"],
    ["a ? glob", "rea?", [["read", { filePath: "a" }]], "......"],
    ["a non-matching glob still blocks", "mcp_*_poll", [["mcp_jobs_list", { id: 1 }]], "...XXX"],
    [
      "a mixed cycle is not exempt",
      "todowrite",
      [
        ["todowrite", { todos: [] }],
        ["read", { filePath: "a" }],
      ],
      ".....X",
    ],
    [
      "several globs, all tools exempt",
      " todowrite , read ",
      [
        ["todowrite", { todos: [] }],
        ["read", { filePath: "a" }],
      ],
      "......",
    ],
  ]
  test.each(exemptTable)("OPENCODE_LOOP_GUARD_EXEMPT: %s", async (_name, exempt, calls, expected) => {
    const { call } = await start({ OPENCODE_LOOP_GUARD_EXEMPT: exempt })
    let outcome = ""
    for (let i = 0; i < 6; i++) outcome += (await call("s1", ...calls[i % calls.length])) === null ? "." : "X"
    expect(outcome).toBe(expected)
  })

  test("settings do not leak from one start to the next", async () => {
    await start({ OPENCODE_LOOP_GUARD_EXEMPT: "read", OPENCODE_LOOP_GUARD_REPETITIONS: "5" })
    expect(await (await start()).trace("AAAA")).toBe("...X")
  })

  test("an invalid exempt glob is logged and ignored", async () => {
    const { trace, logs } = await start({ OPENCODE_LOOP_GUARD_EXEMPT: "read(,todowrite" })
    expect(await trace("AAAA")).toBe("...X")
    expect(logs.some((log) => log.message.includes("OPENCODE_LOOP_GUARD_EXEMPT"))).toBe(true)
  })
})

describe("session state: sessions, resets and eviction", () => {
  test("independent sessions each keep their own history", async () => {
    const { trace } = await start()
    expect(await trace("AAA", "s1")).toBe("...")
    expect(await trace("AAA", "s2")).toBe("...")
    expect(await trace("A", "s1")).toBe("X")
    expect(await trace("A", "s2")).toBe("X")
  })

  test("interleaved sessions do not add up", async () => {
    const { trace } = await start()
    let outcome = ""
    for (let i = 0; i < 3; i++) outcome += (await trace("A", "s1")) + (await trace("A", "s2"))
    expect(outcome).toBe("......")
    expect(await trace("A", "s1")).toBe("X")
  })

  const resets: [string, string, unknown][] = [
    ["session.idle", "session.idle", { sessionID: "s1" }],
    ["session.status idle", "session.status", { sessionID: "s1", status: { type: "idle" } }],
    ["session.deleted with info.id", "session.deleted", { info: { id: "s1", title: "t" } }],
    ["session.deleted with sessionID", "session.deleted", { sessionID: "s1" }],
  ]
  test.each(resets)("%s resets the session", async (_name, type, properties) => {
    const { trace, emit } = await start()
    expect(await trace("AAA")).toBe("...")
    await emit(type, properties)
    expect(await trace("AAAA")).toBe("...X")
  })

  const nonResets: [string, string, unknown][] = [
    ["session.status busy", "session.status", { sessionID: "s1", status: { type: "busy" } }],
    ["session.status retry", "session.status", { sessionID: "s1", status: { type: "retry", attempt: 1 } }],
    ["session.idle of another session", "session.idle", { sessionID: "s2" }],
    ["session.deleted of another session", "session.deleted", { info: { id: "s2" } }],
    ["message.updated", "message.updated", { sessionID: "s1", info: { id: "m1", role: "assistant" } }],
    ["an event without properties", "session.idle", undefined],
  ]
  test.each(nonResets)("%s does not reset", async (_name, type, properties) => {
    const { trace, emit } = await start()
    expect(await trace("AAA")).toBe("...")
    await emit(type, properties)
    expect(await trace("A")).toBe("X")
  })

  test("the number of sessions is bounded: the least recently used is dropped", async () => {
    const { trace } = await start()
    await trace("AAA", "old")
    await trace("AAA", "kept")
    for (let i = 0; i < MAX_SESSIONS - 2; i++) await trace("B", `other-${i}`)
    await trace("A", "kept-touch") // a new session: now "old" (least recently used) is dropped
    expect(await trace("A", "old")).toBe(".")
    // "kept" was the next oldest and has been dropped by "old" coming back
    expect(await trace("A", "kept")).toBe(".")
  })

  test("a recently used session survives the bound, an untouched one does not", async () => {
    const { trace } = await start()
    await trace("AAA", "untouched")
    await trace("A", "busy")
    for (let i = 0; i < 2700; i++) {
      await trace("B", `other-${i}`)
      if (i === 900 || i === 1800) await trace("A", "busy") // each touch comes before 999 others push it out
    }
    expect(await trace("A", "busy")).toBe("X") // its 4th identical call: the history survived
    expect(await trace("A", "untouched")).toBe(".") // dropped long ago: a fresh history
  })

  test("100,000 sessions come and go and the map stays at its bound", () => {
    const sessions = new Sessions()
    for (let i = 0; i < 100_000; i++) sessions.get(`s${i}`).history.push(newCall({ signature: "x", tool: "read" }, "c"))
    expect(sessions.size).toBe(MAX_SESSIONS)
    expect(sessions.has("s99999")).toBe(true)
    expect(sessions.has("s0")).toBe(false)
  })

  test("a session's history is bounded to what the rule needs", async () => {
    const state = newSessionState()
    for (let i = 0; i < 10_000; i++)
      record(state, newCall(signature("read", { filePath: `f${i}` }), `c${i}`), historyCapacity(3, 3))
    expect(state.history.length).toBe(71) // max(9*8, 10) - 1: the longest backstop window minus the current call
    expect(historyCapacity(5)).toBe(119)
    expect(historyCapacity(2, 60)).toBe(60) // a longer failure streak needs its calls
    const { call, trace } = await start()
    for (let i = 0; i < 10_000; i++) await call("s1", "read", { filePath: `f${i}` })
    expect(await trace("12345678".repeat(3))).toBe(".".repeat(23) + "X") // the longest window still works
  })
})

describe("session state: compaction resets the history, not the turn", () => {
  test("after session.compacted the first re-read runs; the block count of the turn goes on", async () => {
    const { trace, emit, call } = await start()
    expect(await trace("AAAAA")).toBe("...XX")
    await emit("session.compacted", { sessionID: "s1" })
    expect(await trace("AAA")).toBe("...")
    const third = await call("s1", "read", { filePath: "src/a.ts" })
    expect(third).toContain("3rd time") // the two blocks before the compaction still count
  })

  test("compaction of another session changes nothing here", async () => {
    const { trace, emit } = await start()
    expect(await trace("AAA")).toBe("...")
    await emit("session.compacted", { sessionID: "s2" })
    expect(await trace("A")).toBe("X")
  })
})

describe("the adapter: export form", () => {
  test("default export is { id, server, setup } (v1 calls server, v2 setup; no tui key) so hosts ignore the named helpers", () => {
    expect(plugin.id).toBe("loop-guard")
    expect(typeof plugin.server).toBe("function")
    expect(typeof plugin.setup).toBe("function")
    expect(Object.keys(plugin).sort()).toEqual(["id", "server", "setup"])
  })
})

describe("the adapter: fail-open", () => {
  const hostile = () => ({
    get filePath(): string {
      throw new Error("boom")
    },
  })

  test("an internal error lets the call through and is logged once per session", async () => {
    const { call, logs } = await start()
    for (let i = 0; i < 5; i++) expect(await call("s1", "read", hostile())).toBeNull()
    const errors = logs.filter((log) => log.level === "error")
    expect(errors.length).toBe(1)
    expect(errors[0].message).toContain("fail-open")
    expect(errors[0].extra).toMatchObject({ sessionID: "s1" })
    for (let i = 0; i < 2; i++) await call("s2", "read", hostile())
    expect(logs.filter((log) => log.level === "error").length).toBe(2)
  })

  test("the guard keeps working after an error", async () => {
    const { call, trace } = await start()
    await call("s1", "read", hostile())
    expect(await trace("AAAA")).toBe("...X")
  })

  test("odd inputs from the host never throw anything but a block", async () => {
    const { hooks } = await start()
    const before = hooks["tool.execute.before"]!
    const odd: [any, any][] = [
      [{ tool: "read", sessionID: "s1", callID: "x" }, {}],
      [{ tool: "read", sessionID: "s1", callID: "x" }, { args: null }],
      [{ tool: undefined, sessionID: undefined, callID: undefined }, { args: 1 }],
      [{ tool: "read\u0000\n", sessionID: "s1", callID: "x" }, { args: "str" }],
      [{ tool: "x".repeat(10_000), sessionID: "s1", callID: "x" }, { args: [1n, Symbol("s")] }],
    ]
    for (const [input, output] of odd) await expect(before(input, output)).resolves.toBeUndefined()
    await expect(hooks.event!({ event: undefined as any })).resolves.toBeUndefined()
    await expect(hooks.event!({ event: { type: "session.deleted", properties: null } as any })).resolves.toBeUndefined()
  })

  test("a client whose log throws does not break the guard", async () => {
    const client = {
      app: {
        log: () => {
          throw new Error("no server")
        },
      },
    }
    process.env.OPENCODE_LOOP_GUARD = "nonsense" // forces a log call at start
    try {
      const hooks = await plugin.server({ client } as any)
      expect(await driver(hooks).trace("AAAA")).toBe("...X")
    } finally {
      delete process.env.OPENCODE_LOOP_GUARD
    }
  })
})

describe("the adapter: warn mode speaks to the model", () => {
  test("the note is appended to the result the model reads, and the call is logged", async () => {
    const { call, succeed, logs } = await start({ OPENCODE_LOOP_GUARD: "warn" })
    for (let i = 0; i < 3; i++)
      (await call("s1", "read", { filePath: "/secret/a" }), await succeed("s1", "read", "same"))
    expect(await call("s1", "read", { filePath: "/secret/a" })).toBeNull()
    const seen = await succeed("s1", "read", "same")
    expect(seen).toStartWith("same\n\nloop-guard warning: this read call ran, but it repeats what you did before")
    expect(seen).toContain("cycle length 1")
    expect(seen).not.toContain("/secret")
    expect(logs.some((l) => l.message.includes("warn mode"))).toBe(true)
  })

  test("a call without a note reads its result unchanged", async () => {
    const { call, succeed } = await start({ OPENCODE_LOOP_GUARD: "warn" })
    await call("s1", "read", { filePath: "a" })
    expect(await succeed("s1", "read", "text")).toBe("text")
  })

  test("a failure streak in warn mode: the call runs, the note is appended", async () => {
    const { trace, call, succeed } = await start({ OPENCODE_LOOP_GUARD: "warn" })
    expect(await trace("F!n G!n H!n")).toBe("...")
    expect(await call("s1", "edit", { filePath: "z" })).toBeNull()
    expect(await succeed("s1", "edit", "ok")).toContain("Your last 3 tool calls were edit calls")
  })
})

describe("the adapter: the bounded stop, the 5th block in one turn aborts the run", () => {
  test("16 identical reads: blocks from the 4th; the 5th block (8th call) aborts the session through the SDK", async () => {
    const { trace, aborts, toasts, logs } = await start()
    expect(await trace("AAAAAAAA")).toBe("...XXXXX")
    expect(aborts).toEqual([{ path: { id: "s1" } }])
    expect(toasts.at(-1)).toEqual({
      message: "loop-guard: stopped the agent after 5 blocks in one turn (the last: an 8th identical read)",
      variant: "error",
    })
    expect(
      logs.some((l) => l.level === "error" && l.message.includes("stopped the session's run after 5 blocks")),
    ).toBe(true)
    // a model that goes on anyway is blocked and stopped again
    expect(await trace("AAAAAAAA")).toBe("XXXXXXXX")
    expect(aborts.length).toBe(9)
  })

  test("the stopping block tells the model the run was stopped", async () => {
    const { call } = await start()
    let last: string | null = null
    for (let i = 0; i < 8; i++) last = await call("s1", "read", { filePath: "a" })
    expect(last).toContain("loop-guard has now stopped this run")
  })

  test("a new turn (idle) starts the count over; other sessions have their own count", async () => {
    const { trace, emit, aborts } = await start()
    expect(await trace("AAAAAAA")).toBe("...XXXX")
    expect(await trace("AAAAAAA", "s2")).toBe("...XXXX")
    await emit("session.idle", { sessionID: "s1" })
    expect(await trace("AAAAAAA")).toBe("...XXXX")
    expect(aborts).toEqual([])
    expect(await trace("A", "s2")).toBe("X")
    expect(aborts).toEqual([{ path: { id: "s2" } }])
  })

  test.each([
    ["0", "AAAAAAAAAAAAAAAA", 0],
    ["1", "AAAA", 1],
    ["2", "AAAAA", 1],
  ])("OPENCODE_LOOP_GUARD_MAX_BLOCKS=%s", async (n, steps, expectedAborts) => {
    const { trace, aborts } = await start({ OPENCODE_LOOP_GUARD_MAX_BLOCKS: n })
    await trace(steps)
    expect(aborts.length).toBe(expectedAborts)
  })

  test.each(["-1", "x", "1001"])("OPENCODE_LOOP_GUARD_MAX_BLOCKS=%s is logged, default used", async (n) => {
    const { trace, aborts, logs } = await start({ OPENCODE_LOOP_GUARD_MAX_BLOCKS: n })
    await trace("AAAAAAAA")
    expect(aborts.length).toBe(1)
    expect(logs.some((l) => l.message.includes("OPENCODE_LOOP_GUARD_MAX_BLOCKS"))).toBe(true)
  })

  test("warn mode never stops", async () => {
    const { trace, aborts } = await start({ OPENCODE_LOOP_GUARD: "warn" })
    expect(await trace("AAAAAAAAAAAA")).toBe("............")
    expect(aborts).toEqual([])
  })
})

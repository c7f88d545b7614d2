// loop-guard through the interface opencode uses: `server(input)`, then the `tool.execute.before` and `event` hooks.
import { describe, expect, test } from "bun:test"
import plugin, {
  MAX_SESSIONS,
  Sessions,
  canonicalize,
  digest,
  fnv1a64,
  historyCapacity,
  record,
  signature,
} from "../loop-guard.ts"

type LogBody = { service: string; level: string; message: string; extra?: Record<string, unknown> }
const ENV_KEYS = ["OPENCODE_LOOP_GUARD", "OPENCODE_LOOP_GUARD_REPETITIONS", "OPENCODE_LOOP_GUARD_EXEMPT"]

/** Starts the plugin as opencode does, with the given environment and a client that records log calls. */
async function start(env: Record<string, string> = {}) {
  const logs: LogBody[] = []
  const client = { app: { log: async ({ body }: { body: LogBody }) => (logs.push(body), true) } }
  const saved = ENV_KEYS.map((key) => [key, process.env[key]] as const)
  for (const key of ENV_KEYS) delete process.env[key]
  Object.assign(process.env, env)
  try {
    const hooks = await plugin.server({ client, directory: "/tmp/p", worktree: "/tmp/p" } as any)
    return { hooks, logs, ...driver(hooks) }
  } finally {
    for (const [key, value] of saved) value === undefined ? delete process.env[key] : (process.env[key] = value)
  }
}

let callNumber = 0
function driver(hooks: any) {
  /** One tool call; resolves to the block message, or null when the call may run. */
  async function call(sessionID: string, tool: string, args: unknown): Promise<string | null> {
    if (!hooks["tool.execute.before"]) return null
    try {
      await hooks["tool.execute.before"]({ tool, sessionID, callID: `c${++callNumber}` }, { args })
      return null
    } catch (error) {
      expect(error).toBeInstanceOf(Error)
      return (error as Error).message
    }
  }
  async function emit(type: string, properties: unknown) {
    await hooks.event?.({ event: { type, properties } })
  }
  /** Runs a trace of letters (see CALLS) in one session; returns "." for a call that ran and "X" for a block. */
  async function trace(letters: string, sessionID = "s1"): Promise<string> {
    let outcome = ""
    for (const letter of letters) {
      const [tool, args] = CALLS[letter]
      outcome += (await call(sessionID, tool, args)) === null ? "." : "X"
    }
    return outcome
  }
  return { call, emit, trace }
}

const CALLS: Record<string, [string, unknown]> = {
  A: ["read", { filePath: "src/a.ts" }],
  B: ["bash", { command: "npm test", description: "run tests" }],
  C: ["grep", { pattern: "TODO", path: "src" }],
  D: ["glob", { pattern: "**/*.ts" }],
  E: ["read", { filePath: "src/e.ts" }],
  F: ["edit", { filePath: "src/a.ts", oldString: "x", newString: "y" }],
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
}

describe("detection (default: 3 repetitions)", () => {
  // trace -> outcome: "." ran, "X" blocked. A blocked call is not recorded.
  const table: [string, string, string][] = [
    ["4 identical calls: the 4th is blocked", "AAAA", "...X"],
    ["3 identical calls run", "AAA", "..."],
    ["A-B x3: the 6th call is blocked", "ABABAB", ".....X"],
    ["A-B-C x3: the 9th", "ABCABCABC", "........X"],
    ["A-B-C-D x3: the 12th", "ABCDABCDABCD", "...........X"],
    ["A-A-B x3: repeated members count", "AABAABAAB", "........X"],
    ["A-B-A-C x3", "ABACABACABAC", "...........X"],
    ["a cycle of length 5 is never blocked", "ABCDEABCDEABCDEABCDE", "...................."],
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

  test("canonical text sorts keys and keeps types", () => {
    expect(canonicalize({ b: [2, "2", null], a: { d: 1, c: true } })).toBe('{"a":{"c":true,"d":1},"b":[2,"2",null]}')
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
    expect(new Set(texts.map(fnv1a64)).size).toBe(texts.length)
    expect(digest("same")).toBe(digest("same"))
    expect(fnv1a64("same")).toBe(fnv1a64("same"))
  })
})

describe("the message the model reads", () => {
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

describe("sessions", () => {
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
    ["session.compacted", "session.compacted", { sessionID: "s1" }],
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
    for (let i = 0; i < 100_000; i++) sessions.get(`s${i}`).history.push({ signature: "x", tool: "read" })
    expect(sessions.size).toBe(MAX_SESSIONS)
    expect(sessions.has("s99999")).toBe(true)
    expect(sessions.has("s0")).toBe(false)
  })

  test("a session's history is bounded to what the rule needs", async () => {
    const state = { history: [], blocks: 0, errorLogged: false }
    for (let i = 0; i < 10_000; i++) record(state, signature("read", { filePath: `f${i}` }), historyCapacity(3))
    expect(state.history.length).toBe(11) // max(3*4, 4) - 1: the longest window minus the current call
    expect(historyCapacity(5)).toBe(19)
    const { call, trace } = await start()
    for (let i = 0; i < 10_000; i++) await call("s1", "read", { filePath: `f${i}` })
    expect(await trace("ABCDABCDABCD")).toBe("...........X") // the longest window still works after many calls
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

describe("fail-open", () => {
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

describe("export form", () => {
  test("default export is { id, server } so opencode ignores the named helpers", () => {
    expect(plugin.id).toBe("loop-guard")
    expect(typeof plugin.server).toBe("function")
    expect(Object.keys(plugin).sort()).toEqual(["id", "server"])
  })
})

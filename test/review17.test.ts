// Review of issue 17 (the stream watcher and the wait rule), through `server()` and the hooks. `test` cases pass with
// the fix on this branch; `test.failing` cases show a defect left unfixed (they pass while the defect is there: when
// it is fixed, turn them into `test`).
import { describe, expect, test } from "bun:test"
import plugin from "../loop-guard.ts"

const ENV_KEYS = [
  "OPENCODE_LOOP_GUARD",
  "OPENCODE_LOOP_GUARD_STREAM",
  "OPENCODE_LOOP_GUARD_WAIT_BUDGET",
  "OPENCODE_LOOP_GUARD_WAIT_LAPS",
  "OPENCODE_LOOP_GUARD_REPETITIONS",
]

async function start(env: Record<string, string> = {}) {
  const logs: any[] = []
  const toasts: any[] = []
  const aborts: any[] = []
  const client = {
    app: { log: async ({ body }: any) => (logs.push(body), true) },
    tui: { showToast: async ({ body }: any) => (toasts.push(body), true) },
    session: { abort: async (options: unknown) => (aborts.push(options), true) },
  }
  const saved = ENV_KEYS.map((key) => [key, process.env[key]] as const)
  for (const key of ENV_KEYS) delete process.env[key]
  Object.assign(process.env, env)
  try {
    const hooks: any = await plugin.server({ client, directory: "/tmp/p", worktree: "/tmp/p" } as any)
    return { hooks, logs, toasts, aborts }
  } finally {
    for (const [key, value] of saved) value === undefined ? delete process.env[key] : (process.env[key] = value)
  }
}

/** Streams one part as opencode 1.18.33 does (part.updated at start, a delta per chunk, part.updated at end). */
async function stream(run: any, sessionID: string, id: string, type: "reasoning" | "text", text: string, size = 40) {
  const part = (t: string, end?: number) => ({
    id,
    sessionID,
    messageID: `msg_${sessionID}`,
    type,
    text: t,
    time: end === undefined ? { start: 1 } : { start: 1, end },
  })
  await run.hooks.event({ event: { type: "message.part.updated", properties: { sessionID, part: part("") } } })
  for (let i = 0; i < text.length; i += size) {
    const delta = text.slice(i, i + size)
    await run.hooks.event({
      event: {
        type: "message.part.delta",
        properties: { sessionID, messageID: `msg_${sessionID}`, partID: id, field: "text", delta },
      },
    })
  }
  await run.hooks.event({ event: { type: "message.part.updated", properties: { sessionID, part: part(text, 2) } } })
}

const ZERO_ROW = "0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n" // 40 characters: 30 rows make 1,200

describe("code fences the watcher did not see (fixed)", () => {
  test("a fenced block inside a nested list item (indented 4 spaces) with 30 identical lines runs to its end", async () => {
    const run = await start()
    const text =
      "Steps:\n\n1. Setup\n    - Create `grid.txt`:\n\n    ```\n" +
      ("    " + ZERO_ROW).repeat(30) +
      "    ```\n\nThen run it.\n"
    await stream(run, "s1", "p1", "text", text)
    expect(run.aborts).toEqual([])
    expect(run.toasts).toEqual([])
  })

  test("a fenced block inside a blockquote with 30 identical lines runs to its end", async () => {
    const run = await start()
    const text = "As the README says:\n\n> ```\n" + ("> " + ZERO_ROW).repeat(30) + "> ```\n"
    await stream(run, "s1", "p1", "text", text)
    expect(run.aborts).toEqual([])
  })

  test("a line looping inside an indented fence is still stopped, at the code backstop", async () => {
    const run = await start()
    await stream(run, "s1", "p1", "text", "1. Run:\n    ```\n" + ("    " + ZERO_ROW).repeat(400))
    expect(run.aborts).toEqual([{ path: { id: "s1" } }])
  })

  test("a cycle inside a line in an indented fence follows the main rule", async () => {
    const run = await start()
    await stream(run, "s1", "p1", "text", "1. Config:\n    ```\n    key = 'ab" + "Qxzp".repeat(400))
    expect(run.aborts).toEqual([{ path: { id: "s1" } }])
    expect(run.toasts[0].message).toBe(
      "loop-guard: stopped the agent: its answer repeated a 4-character passage 200 times",
    )
  })
})

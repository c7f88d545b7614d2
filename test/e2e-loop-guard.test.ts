// End-to-end: loop-guard in a real opencode (issue 4, scenarios 1-3; issue 11, scenarios 10-15; issue 17,
// scenarios 16-17; issue 22, scenarios 22a-22d: a per-call streak, a permuted parallel fan-out, the host announcing steps, a slow call as a wait). Each test installs the plugins with the project's install.sh into a fresh sandbox, drives
// opencode with the scripted fake model, and asserts on what ran (tool parts, files written by bash), on what the
// model saw (the tool messages of its next request) and, under serve, on what the human is shown (the
// `tui.toast.show` events of GET /event).
import { afterAll, describe, expect, test } from "bun:test"
import fs from "node:fs"
import path from "node:path"
import { resetTarget } from "../loop-guard"
import {
  agentRequests,
  createSandbox,
  resultSeenFor,
  runOpencode,
  startServe,
  toolMessages,
  toolParts,
  userTexts,
  type Sandbox,
  type Serve,
} from "./e2e/harness"

const NOTES = "hello notes, line one\n"
const sandboxes: Sandbox[] = []
afterAll(() => sandboxes.forEach((sb) => sb.cleanup()))

function sandbox(files: Record<string, string> = {}, install?: string[]) {
  const sb = createSandbox({ files: { "notes.txt": NOTES, ...files }, install })
  sandboxes.push(sb)
  return sb
}

/**
 * A sandbox with loop-guard alone: semantic-anchors' built-in step confirmation (every 3 bash/edit calls) would
 * block bash polls and edit retries for reasons of its own.
 */
const loopGuardOnly = (files: Record<string, string> = {}) => sandbox(files, ["--only", "loop-guard"])

/** The tool parts of a serve session, in order (GET /session/:id/message). */
async function sessionToolParts(serve: Serve, id: string): Promise<{ tool: string; status: string; error?: string }[]> {
  const r = await serve.api("GET", `/session/${id}/message`)
  return (r.json ?? [])
    .flatMap((m: any) => m.parts ?? [])
    .filter((p: any) => p.type === "tool")
    .map((p: any) => ({ tool: p.tool, status: p.state?.status, error: p.state?.error }))
}

/** Steps the model takes after the last user message of a request (0: it is answering that message). */
function stepsSinceLastUser(body: any): { text: string; steps: number } {
  const messages: any[] = body.messages ?? []
  let last = -1
  messages.forEach((m, i) => m.role === "user" && (last = i))
  const text = JSON.stringify(messages[last]?.content ?? "")
  return { text, steps: messages.slice(last).filter((m) => m.role === "assistant").length }
}

const readNotes = (sb: Sandbox) => ({ tool: "read", args: { filePath: path.join(sb.project, "notes.txt") } })
const tick = { tool: "bash", args: { command: "echo tick >> ticks.log", description: "Append a tick" } }

// The stable parts of loop-guard's block message (loop-guard.ts, blockMessage), not its whole text.
function expectBlockMessage(text: string | undefined, o: { tool: string; shape: string; k: number; times: number }) {
  expect(text).toBeDefined()
  expect(text).toContain(`loop-guard blocked this ${o.tool} call: it was not run.`)
  expect(text).toContain(`repeat the same cycle ${o.times} times`)
  expect(text).toContain(`${o.shape} (cycle length ${o.k})`)
  expect(text).toContain("already in your context")
}

const poll = (command: string, description = "Check the job") => ({ tool: "bash", args: { command, description } })

describe("e2e loop-guard in opencode run", () => {
  test("install.sh put loop-guard into the sandbox config dir, not anywhere else", () => {
    const sb = sandbox()
    const installed = path.join(sb.configDir, "plugins", "loop-guard.ts")
    expect(fs.existsSync(installed)).toBe(true)
    expect(fs.readFileSync(installed, "utf8")).toBe(
      fs.readFileSync(path.resolve(import.meta.dir, "../loop-guard.ts"), "utf8"),
    )
    expect(sb.installOutput).toContain(sb.configDir)
  })

  test("1: four identical reads: the 4th is blocked, the model reads why, the file was read three times, exit 0", async () => {
    const sb = sandbox()
    const read = readNotes(sb)
    const r = await runOpencode(sb, {
      prompt: "read the notes",
      script: [read, read, read, read, { text: "I will stop." }],
    })

    expect(r.code).toBe(0)
    const reads = toolParts(r.events).filter((p) => p.tool === "read")
    expect(reads.map((p) => p.status)).toEqual(["completed", "completed", "completed", "error"])
    // The three reads that ran returned the file; the model saw its content three times.
    for (let step = 0; step < 3; step++) {
      expect(reads[step].output).toContain("hello notes, line one")
      expect(resultSeenFor(r.llm, step)).toContain("hello notes, line one")
    }
    // The 4th: the model's next request carries loop-guard's message as that call's result.
    const seen = resultSeenFor(r.llm, 3)
    expectBlockMessage(seen, { tool: "read", shape: "read", k: 1, times: 4 })
    expect(reads[3].error).toContain("loop-guard blocked this read call")
    // No argument leaks into what the model or the user reads.
    expect(seen).not.toContain("notes.txt")
    const last = agentRequests(r.llm).at(-1)
    expect(toolMessages(last).filter((t) => t.content.includes("hello notes, line one")).length).toBe(3)
    // The run went on after the block: the model got its next turn and answered.
    expect(last._fake.step).toBe(4)
  })

  test("1 (control): with --pure (no plugins) the same four reads all run", async () => {
    const sb = sandbox()
    const read = readNotes(sb)
    const r = await runOpencode(sb, {
      prompt: "read the notes",
      args: ["--pure"],
      script: [read, read, read, read, { text: "ok" }],
    })
    expect(r.code).toBe(0)
    expect(toolParts(r.events).map((p) => p.status)).toEqual(["completed", "completed", "completed", "completed"])
    expect(resultSeenFor(r.llm, 3)).toContain("hello notes, line one")
  })

  test("2: an A-B cycle (bash echo / read): the 6th call is blocked, a different call afterwards runs", async () => {
    const sb = sandbox({ "other.txt": "other file content\n" })
    const read = readNotes(sb)
    // The different call is a read of another file, not a 4th bash call: with semantic-anchors installed too, its
    // built-in step-confirmation (every 3 bash/edit calls) would block a 4th bash call for reasons of its own.
    const different = { tool: "read", args: { filePath: path.join(sb.project, "other.txt") } }
    const r = await runOpencode(sb, {
      prompt: "cycle",
      script: [tick, read, tick, read, tick, read, different, { text: "changed course" }],
    })

    expect(r.code).toBe(0)
    const parts = toolParts(r.events)
    expect(parts.map((p) => `${p.tool}:${p.status}`)).toEqual([
      "bash:completed",
      "read:completed",
      "bash:completed",
      "read:completed",
      "bash:completed",
      "read:error",
      "read:completed",
    ])
    // What ran: three ticks; then the different call, whose result the model read.
    expect(fs.readFileSync(path.join(sb.project, "ticks.log"), "utf8")).toBe("tick\ntick\ntick\n")
    expect(resultSeenFor(r.llm, 6)).toContain("other file content")
    // What the model saw for the 6th call.
    expectBlockMessage(resultSeenFor(r.llm, 5), { tool: "read", shape: "bash -> read", k: 2, times: 3 })
    expect(resultSeenFor(r.llm, 5)).not.toContain("ticks.log")
  })
})

describe("e2e loop-guard in opencode serve", () => {
  test("3: two interleaved sessions keep their own counts; DELETE /session/:id emits session.deleted in the shape loop-guard resets on", async () => {
    const sb = sandbox()
    const read = readNotes(sb)

    // A barrier in the fake model: the two sessions' requests for step i are answered only when both have arrived,
    // so their calls strictly alternate (A1 B1 A2 B2 ...). A history shared between sessions would then see four
    // identical reads after each session's 2nd read and block there.
    const arrived = new Map<number, { n: number; release: () => void; done: Promise<void> }>()
    let barrierTimeouts = 0
    const beforeReply = (body: any) => {
      if (body._fake.title) return
      let gate = arrived.get(body._fake.step)
      if (!gate) {
        let release!: () => void
        const done = new Promise<void>((r) => (release = r))
        gate = { n: 0, release, done }
        arrived.set(body._fake.step, gate)
      }
      gate.n += 1
      if (gate.n === 2) gate.release()
      // Deadlock guard only; a test failure if it ever fires.
      const guard = setTimeout(() => {
        barrierTimeouts += 1
        gate!.release()
      }, 30_000)
      return gate.done.then(() => clearTimeout(guard))
    }

    const serve = await startServe(sb, { script: [read, read, read, read, { text: "done" }], beforeReply })
    try {
      const [a, b] = [await serve.createSession(), await serve.createSession()]
      await Promise.all([serve.prompt(a, "session-A reads"), serve.prompt(b, "session-B reads")])
      expect(barrierTimeouts).toBe(0)

      // Per session: the first three reads ran, the 4th was blocked with loop-guard's message.
      for (const tag of ["session-A", "session-B"]) {
        const mine = agentRequests(serve.llm).filter((q) => userTexts(q).some((t) => t.includes(tag)))
        const last = mine.find((q) => q._fake.step === 4)
        const results = toolMessages(last).map((t) => t.content)
        expect(results.length).toBe(4)
        results.slice(0, 3).forEach((c) => expect(c).toContain("hello notes, line one"))
        expectBlockMessage(results[3], { tool: "read", shape: "read", k: 1, times: 4 })
      }
      // The calls really alternated between the sessions (the barrier held).
      const order = agentRequests(serve.llm).map((q) => `${q._fake.step}`)
      expect(order).toEqual(["0", "0", "1", "1", "2", "2", "3", "3", "4", "4"])

      // DELETE emits session.deleted, in the shape loop-guard resets on.
      const del = await serve.api("DELETE", `/session/${a}`)
      expect(del.status).toBe(200)
      const deleted = await serve.waitForEvent((e) => e.type === "session.deleted" && e.properties?.info?.id === a)
      expect(resetTarget(deleted)).toEqual({ sessionID: a, scope: "turn" })
      expect((await serve.api("GET", `/session/${a}`)).status).not.toBe(200)
      // The other session is untouched and still served.
      expect((await serve.api("GET", `/session/${b}`)).status).toBe(200)
    } finally {
      await serve.close()
    }
  })
})

describe("e2e loop-guard on results, streaks and stops (issue 11)", () => {
  test("10: a poll whose output changes every time runs 7 times; nothing is blocked", async () => {
    const sb = loopGuardOnly()
    const changing = poll("date +%s%N; echo polled >> polls.log")
    const r = await runOpencode(sb, { prompt: "poll", script: [...Array(7).fill(changing), { text: "done" }] })
    expect(r.code).toBe(0)
    expect(toolParts(r.events).map((p) => p.status)).toEqual(Array(7).fill("completed"))
    expect(fs.readFileSync(path.join(sb.project, "polls.log"), "utf8")).toBe("polled\n".repeat(7))
    expect(new Set(toolParts(r.events).map((p) => p.output)).size).toBe(7) // the outputs really changed
  })

  test("11: a poll whose output never changes is blocked at the 4th, and the model is told to wait or read the log", async () => {
    const sb = loopGuardOnly()
    const same = poll("echo running; echo polled >> polls.log")
    const r = await runOpencode(sb, { prompt: "poll", script: [same, same, same, same, { text: "I will wait." }] })
    expect(r.code).toBe(0)
    expect(toolParts(r.events).map((p) => p.status)).toEqual(["completed", "completed", "completed", "error"])
    expect(fs.readFileSync(path.join(sb.project, "polls.log"), "utf8")).toBe("polled\n".repeat(3))
    const seen = resultSeenFor(r.llm, 3)
    expectBlockMessage(seen, { tool: "bash", shape: "bash", k: 1, times: 4 })
    expect(seen).toContain("wait first (for example with sleep) or read its log before asking again")
    expect(seen).not.toContain("polls.log")
  })

  test("12: the same command with a reworded description each time is still blocked at the 4th", async () => {
    const sb = loopGuardOnly()
    const steps = ["Append a line", "Add one more line", "Write the line again", "Append it once more"].map((d) =>
      poll("echo line >> lines.log", d),
    )
    const r = await runOpencode(sb, { prompt: "append", script: [...steps, { text: "ok" }] })
    expect(r.code).toBe(0)
    expect(toolParts(r.events).map((p) => p.status)).toEqual(["completed", "completed", "completed", "error"])
    expect(fs.readFileSync(path.join(sb.project, "lines.log"), "utf8")).toBe("line\n".repeat(3))
    expectBlockMessage(resultSeenFor(r.llm, 3), { tool: "bash", shape: "bash", k: 1, times: 4 })
  })

  test("13: an edit retried with a different oldString, failing the same way 3 times: the 4th edit is stopped", async () => {
    const sb = loopGuardOnly()
    const file = path.join(sb.project, "notes.txt")
    const edit = (i: number) => ({ tool: "edit", args: { filePath: file, oldString: `absent ${i}`, newString: "x" } })
    const r = await runOpencode(sb, {
      prompt: "edit",
      script: [{ tool: "read", args: { filePath: file } }, edit(1), edit(2), edit(3), edit(4), { text: "ok" }],
    })
    expect(r.code).toBe(0)
    const parts = toolParts(r.events)
    expect(parts.map((p) => `${p.tool}:${p.status}`)).toEqual([
      "read:completed",
      "edit:error",
      "edit:error",
      "edit:error",
      "edit:error",
    ])
    // edits 1-3 failed in opencode itself (the error the model read), the 4th was loop-guard's
    for (const p of parts.slice(1, 4)) expect(p.error).not.toContain("loop-guard")
    const seen = resultSeenFor(r.llm, 4)
    expect(seen).toContain("loop-guard blocked this edit call: it was not run.")
    expect(seen).toContain("Your last 3 tool calls were edit calls, and each failed with the same error")
    expect(seen).toContain("for edit: read the file again")
    expect(seen).not.toContain("absent")
    expect(seen).not.toContain("Could not find") // the error text is not repeated
    expect(fs.readFileSync(file, "utf8")).toBe(NOTES)
  })

  test("14: 16 identical reads end after at most 9 tool calls: the 5th block stops the run, the human is told, and a later message works", async () => {
    const sb = loopGuardOnly()
    const read = readNotes(sb)
    // The second user message is answered by its text: one bash call, then a plain answer.
    const pickStep = (body: any) => {
      const { text, steps } = stepsSinceLastUser(body)
      if (!text.includes("second message")) return undefined
      return steps === 0 ? poll("echo second > second.txt", "Write the marker") : { text: "second done" }
    }
    const serve = await startServe(sb, { script: Array(16).fill(read), pickStep })
    try {
      const id = await serve.createSession()
      const first = await serve.prompt(id, "read the notes")
      expect(first.info?.error?.name).toBe("MessageAbortedError") // the run was stopped, not finished
      const parts = await sessionToolParts(serve, id)
      expect(parts.length).toBeLessThanOrEqual(9)
      expect(parts.slice(0, 3).map((p) => p.status)).toEqual(["completed", "completed", "completed"])
      expect(parts.slice(3).every((p) => p.status === "error" && p.error?.startsWith("loop-guard blocked"))).toBe(true)
      expect(agentRequests(serve.llm).length).toBeLessThanOrEqual(9)

      // What the human was shown: a toast per block, the escalated ones and the stop as errors.
      const toasts = serve.events.filter((e) => e.type === "tui.toast.show").map((e) => e.properties)
      expect(toasts.slice(0, 2)).toEqual([
        expect.objectContaining({
          message: "loop-guard: blocked a 4th identical read; the agent was told to change course",
          variant: "warning",
        }),
        expect.objectContaining({
          message: "loop-guard: blocked a 5th identical read; the agent was told to change course",
          variant: "warning",
        }),
      ])
      expect(toasts.slice(2, 4).map((t) => t.variant)).toEqual(["error", "error"])
      expect(toasts).toContainEqual(
        expect.objectContaining({
          message: "loop-guard: stopped the agent after 5 blocks in one turn (the last: an 8th identical read)",
          variant: "error",
        }),
      )
      expect(JSON.stringify(toasts)).not.toContain("notes.txt")

      // A later user message in the same session works normally.
      const second = await serve.prompt(id, "second message")
      expect(second.info?.error).toBeUndefined()
      expect(fs.readFileSync(path.join(sb.project, "second.txt"), "utf8")).toBe("second\n")
      const after = (await sessionToolParts(serve, id)).slice(parts.length)
      expect(after.map((p) => `${p.tool}:${p.status}`)).toEqual(["bash:completed"])
    } finally {
      await serve.close()
    }
  })

  test("15: an automatic compaction resets the history: the first re-read after it runs and the model reads the file", async () => {
    const sb = loopGuardOnly()
    const read = readNotes(sb)
    // The 3rd read's reply reports a prompt near the context limit: opencode compacts, then continues with a
    // synthetic user message; the model answers it with the same read once more, then a text.
    const pickStep = (body: any) => {
      const { text, steps } = stepsSinceLastUser(body)
      if (!text.includes("Continue if you have next steps")) return undefined
      return steps === 0 ? read : { text: "after compaction" }
    }
    const big = { ...read, usage: { prompt_tokens: 99_000 } }
    const serve = await startServe(sb, { script: [read, read, big, read, read, { text: "never" }], pickStep })
    try {
      const id = await serve.createSession()
      await serve.prompt(id, "read the notes")
      await serve.waitForEvent((e) => e.type === "session.compacted" && e.properties?.sessionID === id)
      const reads = (await sessionToolParts(serve, id)).filter((p) => p.tool === "read")
      // Without the reset, the 4th identical read (the first after the compaction) would have been blocked.
      expect(reads.map((p) => p.status)).toEqual(["completed", "completed", "completed", "completed"])
      const afterCompaction = agentRequests(serve.llm).filter((q) => stepsSinceLastUser(q).text.includes("Continue"))
      const seen = toolMessages(afterCompaction.at(-1)).map((t) => t.content)
      expect(seen.at(-1)).toContain("hello notes, line one")
      expect(serve.events.some((e) => e.type === "tui.toast.show")).toBe(false) // nothing was blocked
    } finally {
      await serve.close()
    }
  })
})

describe("e2e loop-guard: a wait is not a loop, refusals are the user's (issue 17)", () => {
  test("16: a sleep 5 + poll cycle runs past the cycle rule under a 15s wait budget; the wait past it is blocked", async () => {
    const sb = loopGuardOnly()
    // r = 2 makes the cycle rule fire at the 4th call (the 2nd poll), so three laps show the wait rule at work
    // while only 15 s are slept; the budget then blocks the 4th sleep.
    Object.assign(sb.env, { OPENCODE_LOOP_GUARD_WAIT_BUDGET: "15s", OPENCODE_LOOP_GUARD_REPETITIONS: "2" })
    const wait = poll("sleep 5", "Wait for the job")
    const check = poll("echo in_progress; echo polled >> polls.log")
    const started = Date.now()
    const r = await runOpencode(sb, {
      prompt: "wait for the job",
      args: ["--print-logs"],
      script: [wait, check, wait, check, wait, check, wait, { text: "The job is still running; I stopped waiting." }],
      timeoutMs: 150_000,
    })
    const elapsed = Date.now() - started

    expect(r.code).toBe(0)
    const parts = toolParts(r.events)
    expect(parts.map((p) => p.status)).toEqual([...Array(6).fill("completed"), "error"])
    expect(fs.readFileSync(path.join(sb.project, "polls.log"), "utf8")).toBe("polled\n".repeat(3))
    expect(elapsed).toBeGreaterThanOrEqual(15_000) // the three sleeps really ran
    // What the model read for the 4th sleep: the wait budget, and to report to the user what it waits for.
    const seen = resultSeenFor(r.llm, 6)
    expect(seen).toContain("loop-guard blocked this bash call: it was not run.")
    expect(seen).toContain("bash -> bash (cycle length 2), 3 waits so far, 15s slept in all")
    expect(seen).toContain("loop-guard's wait budget of 15s")
    expect(seen).toContain("report to the user what you are waiting for")
    for (const leak of ["sleep", "polls.log", "in_progress"]) expect(seen).not.toContain(leak)
    expect(parts[6].error).toBe(seen)
    // The run went on: the model answered after the block.
    expect(agentRequests(r.llm).at(-1)._fake.step).toBe(7)
    // opencode's log holds loop-guard's line for the block.
    expect(r.stderr).toContain("loop-guard: blocked a wait past its budget: bash -> bash")
  })

  test("17: three writes the plan agent's rules refuse: the 4th is blocked and the model reads that the user's rules forbid it", async () => {
    const sb = loopGuardOnly()
    const write = (name: string) => ({ tool: "write", args: { filePath: path.join(sb.project, name), content: "x\n" } })
    const r = await runOpencode(sb, {
      prompt: "write the docs",
      args: ["--agent", "plan"],
      script: [write("a.md"), write("b.md"), write("c.md"), write("d.md"), { text: "I will ask." }],
    })

    expect(r.code).toBe(0)
    const parts = toolParts(r.events)
    expect(parts.map((p) => p.status)).toEqual(["error", "error", "error", "error"])
    // Writes 1-3: opencode's own refusal, the text loop-guard recognizes; the 4th: loop-guard's block.
    for (const p of parts.slice(0, 3)) {
      expect(p.error).toStartWith("The user has specified a rule which prevents you from using this specific tool call")
    }
    const seen = resultSeenFor(r.llm, 3)
    expect(seen).toContain("loop-guard blocked this write call: it was not run.")
    expect(seen).toContain("opencode refused each of them: the user's permission rules forbid them")
    expect(seen).toContain("ask them to allow it or to choose another way")
    expect(seen).not.toContain("read the file again")
    expect(seen).not.toContain(".md") // no path
    for (const name of ["a.md", "b.md", "c.md", "d.md"]) expect(fs.existsSync(path.join(sb.project, name))).toBe(false)
  })
})

describe("e2e loop-guard: per-call streaks and steps as sets (issue 22)", () => {
  test("22a: a read re-issued every other call while the reads between change: its 4th is blocked, the reads between ran", async () => {
    const sb = loopGuardOnly({ "a.txt": "file a\n", "b.txt": "file b\n", "c.txt": "file c\n" })
    const read = readNotes(sb)
    const other = (name: string) => ({ tool: "read", args: { filePath: path.join(sb.project, name) } })
    const r = await runOpencode(sb, {
      prompt: "read around",
      script: [read, other("a.txt"), read, other("b.txt"), read, other("c.txt"), read, { text: "I will stop." }],
    })

    expect(r.code).toBe(0)
    const parts = toolParts(r.events)
    expect(parts.map((p) => p.status)).toEqual([...Array(6).fill("completed"), "error"])
    expect(resultSeenFor(r.llm, 5)).toContain("file c")
    const seen = resultSeenFor(r.llm, 6)
    expect(seen).toStartWith("loop-guard blocked this read call: it was not run.\n")
    expect(seen).toContain("make this same read call 4 times with identical arguments, between other calls")
    expect(seen).toContain("that result is already in your context")
    expect(seen).not.toContain("notes.txt")
    expect(parts[6].error).toBe(seen)
    expect(agentRequests(r.llm).at(-1)._fake.step).toBe(7) // the run went on after the block
  })

  test("22b: a fan-out of three reads re-emitted in another order: the third step's last call is blocked", async () => {
    const sb = loopGuardOnly({ "a.txt": "file a\n", "b.txt": "file b\n", "c.txt": "file c\n" })
    const read = (name: string) => ({ tool: "read", args: { filePath: path.join(sb.project, name) } })
    const [a, b, c] = [read("a.txt"), read("b.txt"), read("c.txt")]
    const r = await runOpencode(sb, {
      prompt: "read the three files",
      script: [{ tools: [a, b, c] }, { tools: [c, a, b] }, { tools: [b, c, a] }, { text: "I will stop." }],
    })

    expect(r.code).toBe(0)
    const parts = toolParts(r.events)
    expect(parts.length).toBe(9)
    expect(parts.slice(0, 6).map((p) => p.status)).toEqual(Array(6).fill("completed"))
    // In the third step two reads ran and one (the last to reach the hook) was blocked.
    const third = parts.slice(6)
    expect(third.filter((p) => p.status === "completed").length).toBe(2)
    const blocked = third.filter((p) => p.status === "error")
    expect(blocked.length).toBe(1)
    expect(blocked[0].error).toStartWith("loop-guard blocked this read call: it was not run.\n")
    expect(blocked[0].error).toContain("Your last 3 steps each made the same 3 tool calls at once, in some order")
    expect(blocked[0].error).toContain("already in your context")
    expect(blocked[0].error).not.toContain(".txt")
    // The model read the block as that call's result, and the run went on.
    const last = agentRequests(r.llm).at(-1)
    expect(last._fake.step).toBe(3)
    expect(toolMessages(last).filter((t) => t.content.startsWith("loop-guard blocked")).length).toBe(1)
  })

  test("22c: opencode announces each tool part with its messageID before the call reaches tool.execute.before", async () => {
    // loop-guard's steps come from these announcements (stepOf); a probe plugin beside it writes the order it sees.
    const probe = [
      'import fs from "node:fs"',
      "const out = process.env.PROBE_OUT",
      "const line = (text) => fs.appendFileSync(out, text + '\\n')",
      "export default {",
      '  id: "order-probe",',
      "  server: async () => ({",
      "    event: async ({ event }) => {",
      "      const p = event?.properties?.part",
      '      if (event?.type === "message.part.updated" && p?.type === "tool" && p.state?.status === "pending")',
      '        line("announced " + p.callID + " " + p.messageID)',
      "    },",
      '    "tool.execute.before": async (input) => line("before " + input.callID),',
      "  }),",
      "}",
    ].join("\n")
    const files = { "a.txt": "file a\n", "b.txt": "file b\n", "c.txt": "file c\n" }
    const sb = createSandbox({ files, install: ["--only", "loop-guard"], configFiles: { "plugins/probe.ts": probe } })
    sandboxes.push(sb)
    sb.env.PROBE_OUT = path.join(sb.root, "probe.log")
    const read = (name: string) => ({ tool: "read", args: { filePath: path.join(sb.project, name) } })
    const r = await runOpencode(sb, {
      prompt: "read",
      script: [{ tools: [read("a.txt"), read("b.txt"), read("c.txt")] }, { tools: [read("c.txt")] }, { text: "ok" }],
    })
    expect(r.code).toBe(0)
    const lines = fs.readFileSync(sb.env.PROBE_OUT, "utf8").trim().split("\n")
    const befores = lines.filter((l) => l.startsWith("before "))
    expect(befores.length).toBe(4)
    const messages = new Map<string, string>()
    for (const [i, l] of lines.entries()) {
      const [kind, callID, messageID] = l.split(" ")
      if (kind === "announced") messages.set(callID, messageID)
      // every call was announced, with its message, before it reached the hook
      if (kind === "before") expect(messages.get(callID)).toStartWith("msg")
      if (kind === "before") expect(lines.slice(0, i).some((x) => x.startsWith(`announced ${callID} `))).toBe(true)
    }
    const ids = befores.map((l) => messages.get(l.split(" ")[1]))
    expect(new Set(ids.slice(0, 3)).size).toBe(1) // the three parallel calls: one message
    expect(ids[3]).not.toBe(ids[0]) // the next step: another
  })

  test("22b (control): the same fan-out in the same order twice, then a different third step: nothing is blocked", async () => {
    const sb = loopGuardOnly({ "a.txt": "file a\n", "b.txt": "file b\n", "c.txt": "file c\n", "d.txt": "file d\n" })
    const read = (name: string) => ({ tool: "read", args: { filePath: path.join(sb.project, name) } })
    const [a, b, c, d] = [read("a.txt"), read("b.txt"), read("c.txt"), read("d.txt")]
    const r = await runOpencode(sb, {
      prompt: "read the files",
      script: [{ tools: [a, b, c] }, { tools: [c, a, b] }, { tools: [d, c, a] }, { text: "done" }],
    })
    expect(r.code).toBe(0)
    expect(toolParts(r.events).map((p) => p.status)).toEqual(Array(9).fill("completed"))
  })
})

describe("e2e loop-guard: a call that waits counts as a wait (issue 22, item 5)", () => {
  test("22d: a command that itself runs 6 s (no sleep in it), the same answer each time, is timed as a wait, not blocked at its 4th as a cycle; a cap of 3 laps blocks the 5th", async () => {
    const sb = loopGuardOnly()
    // The lap cap, not the budget: the time a call takes from tool.execute.before to its result varies with the
    // machine's load (6-9 s here), the count of waits does not.
    sb.env.OPENCODE_LOOP_GUARD_WAIT_LAPS = "3"
    // blocks 6 s, then answers the same; `timeout` is no sleep to loop-guard: only the time it ran makes it a wait
    const slow = poll("timeout 6 tail -f /dev/null; echo running; echo polled >> polls.log", "Wait on the job")
    const started = Date.now()
    const r = await runOpencode(sb, {
      prompt: "wait for the job",
      script: [slow, slow, slow, slow, slow, { text: "The job is still running; I stopped waiting." }],
      timeoutMs: 180_000,
    })
    const elapsed = Date.now() - started

    expect(r.code).toBe(0)
    const parts = toolParts(r.events)
    expect(parts.map((p) => p.status)).toEqual(["completed", "completed", "completed", "completed", "error"])
    expect(fs.readFileSync(path.join(sb.project, "polls.log"), "utf8")).toBe("polled\n".repeat(4))
    expect(elapsed).toBeGreaterThanOrEqual(24_000) // the four calls really ran 6 s each
    // The 4th call ran (the same call with the same answer 3 times: the cycle rule alone would block it); the 5th
    // is a wait past the lap cap: the first slow run is not yet a wait, the 2nd-4th are, 6 s or more each.
    const seen = resultSeenFor(r.llm, 4)
    expect(seen).toContain("loop-guard blocked this bash call: it was not run.")
    expect(seen).toContain("bash (cycle length 1), 3 waits so far, ")
    expect(seen).toContain("loop-guard's cap of 3 laps (OPENCODE_LOOP_GUARD_WAIT_LAPS)")
    expect(seen).not.toContain("returned the same results")
    const slept = /3 waits so far, (?:(\d+)m)?(\d+)s slept in all/.exec(seen ?? "")
    expect(slept).not.toBeNull()
    expect(Number(slept![1] ?? 0) * 60 + Number(slept![2])).toBeGreaterThanOrEqual(18)
    for (const leak of ["timeout", "polls.log", "running"]) expect(seen).not.toContain(leak)
  })
})

// End-to-end: loop-guard in a real opencode (issue 4, scenarios 1-3). Each test installs the plugins with the
// project's install.sh into a fresh sandbox, drives opencode with the scripted fake model, and asserts on what ran
// (tool parts, files written by bash) and on what the model saw (the tool messages of its next request).
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
} from "./e2e/harness"

const NOTES = "hello notes, line one\n"
const sandboxes: Sandbox[] = []
afterAll(() => sandboxes.forEach((sb) => sb.cleanup()))

function sandbox(files: Record<string, string> = {}) {
  const sb = createSandbox({ files: { "notes.txt": NOTES, ...files } })
  sandboxes.push(sb)
  return sb
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
      expect(resetTarget(deleted)).toBe(a)
      expect((await serve.api("GET", `/session/${a}`)).status).not.toBe(200)
      // The other session is untouched and still served.
      expect((await serve.api("GET", `/session/${b}`)).status).toBe(200)
    } finally {
      await serve.close()
    }
  })
})

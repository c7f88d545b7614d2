// End-to-end: ordinary sessions with the default config (no YAML file), as a new user meets them (issue 9). Each
// test installs both plugins with install.sh into a fresh sandbox, drives a real opencode with the scripted model,
// and asserts the outcome of every call: what ran, what was blocked, and what the model read.
import { afterAll, describe, expect, test } from "bun:test"
import fs from "node:fs"
import path from "node:path"
import {
  agentRequests,
  createSandbox,
  resultSeenFor,
  runOpencode,
  startServe,
  toolParts,
  type Sandbox,
  type SandboxOptions,
  type Serve,
  userTexts,
} from "./e2e/harness"

const sandboxes: Sandbox[] = []
afterAll(() => sandboxes.forEach((sb) => sb.cleanup()))

function sandbox(opts: SandboxOptions = {}) {
  const sb = createSandbox(opts)
  sandboxes.push(sb)
  return sb
}

const PROJECT_FILES = {
  "src/app.ts": "export const answer = 41\n",
  "src/util.ts": "export const twice = (n: number) => 2 * n\n",
  "test/app.test.ts": "import { answer } from '../src/app'\n",
  "package.json": '{ "name": "demo", "version": "1.0.0" }\n',
}
const bash = (command: string, description = "Look around") => ({ tool: "bash", args: { command, description } })
const read = (sb: Sandbox, rel: string) => ({ tool: "read", args: { filePath: path.join(sb.project, rel) } })
const write = (sb: Sandbox, rel: string, content = `${rel}\n`) => ({
  tool: "write",
  args: { filePath: path.join(sb.project, rel), content },
})
const exists = (sb: Sandbox, rel: string) => fs.existsSync(path.join(sb.project, rel))
const statuses = (parts: { tool: string; status: string }[]) => parts.map((p) => `${p.tool}:${p.status}`)

/** What an agent runs to look around a project: none of it changes anything. */
function exploreCalls(sb: Sandbox) {
  return [
    bash("ls"),
    bash("ls -la src"),
    bash("pwd"),
    bash("git status"),
    bash("git log --oneline -5"),
    bash("git branch"),
    bash("git diff HEAD --stat"),
    bash("cat package.json"),
    bash("head -n 5 src/app.ts"),
    bash("wc -l src/*.ts"),
    bash("grep -rn answer src | head"),
    bash("find . -name '*.ts' -not -path './node_modules/*'"),
    bash("git show --stat HEAD"),
    bash("tail -n 3 src/util.ts"),
    bash("ls test && cat test/app.test.ts"),
    bash("git rev-parse --show-toplevel"),
    bash("stat package.json"),
    read(sb, "src/app.ts"),
    read(sb, "src/util.ts"),
    read(sb, "package.json"),
  ]
}

/** Tool parts of a serve session, oldest first, from GET /session/:id/message. */
async function sessionToolParts(serve: Serve, id: string) {
  const r = await serve.api("GET", `/session/${id}/message`)
  return (r.json as any[])
    .flatMap((m) => m.parts ?? [])
    .filter((p) => p.type === "tool")
    .map((p) => ({ tool: p.tool as string, status: p.state?.status as string, error: p.state?.error as string }))
}

function expectStepBlock(text: string | undefined) {
  expect(text).toBeDefined()
  expect(text).toContain("step-confirmation")
  expect(text).not.toContain("loop-guard")
}

describe("e2e ordinary work with the default config", () => {
  test("an explore-only session of 20 read-only calls: nothing is blocked", async () => {
    const sb = sandbox({ files: PROJECT_FILES })
    const script = exploreCalls(sb)
    const r = await runOpencode(sb, { prompt: "get to know this project", script: [...script, { text: "seen it" }] })

    expect(r.code).toBe(0)
    const parts = toolParts(r.events)
    expect(parts).toHaveLength(20)
    expect(parts.filter((p) => p.status !== "completed")).toEqual([])
  })

  test("a fix session: explore, 3 changes, the 4th change is the first block; a user message, then 3 more changes", async () => {
    const sb = sandbox({ files: PROJECT_FILES })
    const script = [
      bash("ls"),
      bash("git status"),
      bash("cat src/app.ts"),
      write(sb, "src/app.ts", "export const answer = 42\n"),
      bash("git diff"),
      write(sb, "src/b.ts"),
      {
        tool: "edit",
        args: { filePath: path.join(sb.project, "src/util.ts"), oldString: "2 * n", newString: "n * 2" },
      },
      write(sb, "src/c.ts"),
      { text: "Three changes done; may I go on?" },
      write(sb, "src/c.ts"),
      write(sb, "src/d.ts"),
      write(sb, "src/e.ts"),
      { text: "done" },
    ]
    const serve = await startServe(sb, { script })
    try {
      const id = await serve.createSession()
      await serve.prompt(id, "fix the answer so that the test passes")
      expect(statuses(await sessionToolParts(serve, id))).toEqual([
        "bash:completed",
        "bash:completed",
        "bash:completed",
        "write:completed",
        "bash:completed",
        "write:completed",
        "edit:completed",
        "write:error",
      ])
      expectStepBlock(resultSeenFor(serve.llm, 7))
      expect(exists(sb, "src/c.ts")).toBe(false)

      await serve.prompt(id, "yes, go on")
      expect((await sessionToolParts(serve, id)).slice(8).map((p) => p.status)).toEqual([
        "completed",
        "completed",
        "completed",
      ])
      for (const f of ["src/c.ts", "src/d.ts", "src/e.ts"]) expect(exists(sb, f)).toBe(true)
    } finally {
      await serve.close()
    }
  })

  test("a failing edit is not a changing step: 3 writes after it run, the 4th change is blocked", async () => {
    const sb = sandbox({ files: PROJECT_FILES })
    const r = await runOpencode(sb, {
      prompt: "rename the answer so that it reads better",
      script: [
        { tool: "edit", args: { filePath: path.join(sb.project, "src/app.ts"), oldString: "nope", newString: "x" } },
        write(sb, "a1.txt"),
        write(sb, "a2.txt"),
        write(sb, "a3.txt"),
        write(sb, "a4.txt"),
        { text: "stopping" },
      ],
    })

    expect(r.code).toBe(0)
    expect(statuses(toolParts(r.events))).toEqual([
      "edit:error",
      "write:completed",
      "write:completed",
      "write:completed",
      "write:error",
    ])
    expect(toolParts(r.events)[0].error).not.toContain("semantic-anchors")
    expectStepBlock(resultSeenFor(r.llm, 4))
  })

  test("writes the plan agent's permissions deny are not counted", async () => {
    const sb = sandbox({ files: PROJECT_FILES })
    const plan = (n: number) => write(sb, `.opencode/plans/p${n}.md`, `# plan ${n}\n`)
    const r = await runOpencode(sb, {
      prompt: "plan the change so that we agree on it first",
      args: ["--agent", "plan"],
      script: [
        write(sb, "docs/a.md", "# a\n"),
        write(sb, "docs/b.md", "# b\n"),
        plan(1),
        plan(2),
        plan(3),
        plan(4),
        { text: "planned" },
      ],
    })

    expect(r.code).toBe(0)
    const parts = toolParts(r.events)
    expect(statuses(parts)).toEqual([
      "write:error",
      "write:error",
      "write:completed",
      "write:completed",
      "write:completed",
      "write:error",
    ])
    // The first two were refused by opencode's own rules, not by a contract; the last by step-confirmation.
    for (const p of parts.slice(0, 2)) expect(p.error).not.toContain("semantic-anchors")
    expectStepBlock(resultSeenFor(r.llm, 5))
  })

  test("4 parallel writes in one step: 3 run, 1 is blocked; the limit is never exceeded", async () => {
    const sb = sandbox({ files: PROJECT_FILES })
    const r = await runOpencode(sb, {
      prompt: "create four files so that the demo has data",
      script: [{ tools: [1, 2, 3, 4].map((n) => write(sb, `data/f${n}.txt`)) }, { text: "stopping" }],
    })

    expect(r.code).toBe(0)
    const parts = toolParts(r.events)
    expect(parts.filter((p) => p.status === "completed")).toHaveLength(3)
    expect(parts.filter((p) => p.status === "error")).toHaveLength(1)
    expect([1, 2, 3, 4].filter((n) => exists(sb, `data/f${n}.txt`))).toHaveLength(3)
  })

  test("a warn note appears once in a turn of 5 edits", async () => {
    const sb = sandbox({
      files: {
        ...PROJECT_FILES,
        ".opencode/opencode-semantic-anchors.yaml":
          "version: 1\ncontracts:\n  - id: step-confirmation\n    enabled: false\n",
      },
    })
    const script = [1, 2, 3, 4, 5].map((n) => write(sb, `notes/n${n}.txt`))
    const r = await runOpencode(sb, {
      prompt: "write five notes so that we remember",
      script: [...script, { text: "ok" }],
    })

    expect(r.code).toBe(0)
    expect(toolParts(r.events).map((p) => p.status)).toEqual(Array(5).fill("completed"))
    const notes = [0, 1, 2, 3, 4].map((step) => resultSeenFor(r.llm, step) ?? "")
    expect(notes.map((text) => text.includes("source-anchor"))).toEqual([true, false, false, false, false])
  })

  test("a contract locked in the global file survives a project `roles` remap, and the attempt is reported", async () => {
    const globalYaml = `version: 1
contracts:
  - id: no-force-push
    description: Never rewrite shared history.
    mode: block
    locked: true
    roles: [software-developer]
    trigger:
      type: tool
      tools: [bash]
      args:
        command: { regex: '\\bgit\\s+push\\b.*\\s(--force|-f)\\b' }
`
    const projectYaml = "version: 1\nroles:\n  agents:\n    build: team-lead\n"
    const sb = sandbox({
      files: { ...PROJECT_FILES, ".opencode/opencode-semantic-anchors.yaml": projectYaml },
      configFiles: { "opencode-semantic-anchors.yaml": globalYaml },
    })
    const r = await runOpencode(sb, {
      prompt: "publish it",
      args: ["--print-logs"],
      script: [bash("echo ran >> push.log; git push --force origin main", "Force-push"), { text: "ok" }],
    })

    expect(r.code).toBe(0)
    expect(statuses(toolParts(r.events))).toEqual(["bash:error"])
    expect(resultSeenFor(r.llm, 0)).toContain("no-force-push")
    expect(exists(sb, "push.log")).toBe(false)
    const line = r.stderr.split("\n").find((l) => l.includes("roles.agents.build") && l.includes("no-force-push"))
    expect(line).toContain("level=ERROR")
  })

  test("a subagent's changes count for the root session: 1 root write + 2 subagent writes, the root's next write is blocked", async () => {
    const sb = sandbox({ files: PROJECT_FILES })
    const childScript = [write(sb, "sub/c1.txt"), write(sb, "sub/c2.txt"), { text: "child done" }]
    // The subagent's requests are told apart by their first user message: the prompt the root wrote for it.
    const pickStep = (body: any, stepNo: number) =>
      userTexts(body)[0]?.includes("SUBAGENT-TASK") ? childScript[stepNo] : undefined
    const script = [
      write(sb, "a.txt"),
      {
        tool: "task",
        args: { description: "Write two files", prompt: "SUBAGENT-TASK: write two files", subagent_type: "general" },
      },
      write(sb, "b.txt"),
      { text: "stopping" },
    ]
    const serve = await startServe(sb, { script, pickStep })
    try {
      const id = await serve.createSession()
      await serve.prompt(id, "write the files so that the demo has data. Source: https://example.com")
      expect(statuses(await sessionToolParts(serve, id))).toEqual(["write:completed", "task:completed", "write:error"])
      for (const f of ["a.txt", "sub/c1.txt", "sub/c2.txt"]) expect(exists(sb, f)).toBe(true)
      expect(exists(sb, "b.txt")).toBe(false)
      expectStepBlock(resultSeenFor(serve.llm, 2))
    } finally {
      await serve.close()
    }
  })

  test("/anchor status as a plan session's first command names the plan agent's role", async () => {
    const sb = sandbox({ files: PROJECT_FILES })
    const r = await runOpencode(sb, {
      args: ["--agent", "plan", "--command", "anchor", "status"],
      script: [{ text: "Status reported." }],
    })

    expect(r.code).toBe(0)
    const seen = userTexts(agentRequests(r.llm)[0]).join("\n")
    expect(seen).toContain("role: software-architect (agent plan)")
    expect(seen).toContain("boundary-anchor")
    // Nothing in the message is addressed to the model; the system prompt of that turn asks it for one short line.
    expect(seen).not.toContain("Report this")
    const system = agentRequests(r.llm)[0].messages.filter((m: any) => m.role === "system")
    expect(JSON.stringify(system)).toContain("Reply with one short sentence")
  })
})

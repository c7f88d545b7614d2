// What the person at the keyboard is told (issue 10), through server() and the hooks with a recording client: a
// toast for every block, for the first warn of each contract in a turn, for each tip, and for config problems once
// the TUI can show them; the /anchor command's answer carries nothing addressed to the model.
import { describe, expect, jest, test } from "bun:test"
import { start } from "./fixtures/semantic-anchors/harness"

const S = "ses_screen"
const write = (n: number) => ({ filePath: `src/f${n}.ts`, content: `${n}` })
const FORCE_PUSH =
  "version: 1\ncontracts:\n  - { id: no-force-push, description: Never rewrite shared history., mode: block, trigger: { type: tool, tools: [bash], args: { command: { contains: 'push --force' } } } }\n"

describe("toasts: every block, the first warn of a contract in a turn, each tip", () => {
  test("a block: the plugin, the tool, the rule in plain words and its id, what lifts it; never an argument", async () => {
    const h = await start({ project: FORCE_PUSH })
    await h.user(S, "ship it so that users get the fix. Source: https://example.com")
    h.toasts.length = 0
    expect(await h.tool(S, "bash", { command: "TOKEN=hunter2 git push --force-with-lease origin main" })).toBeDefined()
    expect(h.toasts).toEqual([
      {
        message:
          "semantic-anchors: blocked a bash call: Never rewrite shared history (no-force-push). The agent was told why; /anchor bypass <reason> lets one call through.",
        variant: "warning",
      },
    ])
    expect(JSON.stringify(h.toasts)).not.toContain("hunter2")
  })

  test("a step block tells the person that their next message lets the agent go on; each block has its toast", async () => {
    const h = await start()
    await h.user(S, "fix it so that the tests pass. Source: https://example.com")
    for (let i = 1; i <= 3; i++) await h.run(S, "write", write(i))
    h.toasts.length = 0
    await h.tool(S, "write", write(4))
    await h.tool(S, "write", write(4))
    expect(h.toasts.map((t) => t.message)).toEqual([
      "semantic-anchors: blocked a write call: Stop for the human's confirmation every 3 changing steps (step-confirmation). Your next message lets the agent go on.",
      "semantic-anchors: blocked a write call: Stop for the human's confirmation every 3 changing steps (step-confirmation). Your next message lets the agent go on.",
    ])
  })

  test("a warn: one toast for the first matching call of a turn, again in the next turn", async () => {
    const h = await start({ project: "version: 1\ncontracts:\n  - { id: step-confirmation, enabled: false }\n" })
    await h.user(S, "write the notes so that we remember")
    h.toasts.length = 0
    for (let i = 1; i <= 4; i++) await h.run(S, "write", write(i))
    const warned =
      "semantic-anchors: the write call ran, with a note to the agent: Write only on a cited source (source-anchor)."
    expect(h.toasts).toEqual([{ message: warned, variant: "info" }])
    await h.user(S, "two more so that the set is complete")
    await h.run(S, "write", write(5))
    await h.run(S, "write", write(6))
    expect(h.toasts.map((t) => t.message)).toEqual([warned, warned])
  })

  test("a tip on a user message is sent a moment later, when the TUI no longer paints over it", async () => {
    const h = await start()
    jest.useFakeTimers()
    try {
      const parts = [
        {
          id: "prt_1",
          sessionID: S,
          messageID: "msg_1",
          type: "text",
          text: "refactor the whole module and rename every function in it please",
        },
      ]
      await h.hooks["chat.message"]({ sessionID: S }, { message: { agent: "build" }, parts } as never)
      expect(h.toasts).toEqual([])
      jest.advanceTimersByTime(650)
      expect(h.toasts).toEqual([])
      jest.advanceTimersByTime(100)
      expect(h.toasts.map((t) => t.message)).toEqual([
        "semantic-anchors: tip: Say the goal and how the result can be verified (e.g. 'so that ...', 'done when the tests pass'). (intent-anchor)",
      ])
    } finally {
      jest.useRealTimers()
    }
  })
})

test("a slash command's expanded template is not the person's own words: it earns no tip", async () => {
  const h = await start()
  const parts = [{ type: "text", text: "Review the whole module and list every function in it, one per line" }]
  await h.hooks["command.execute.before"]({ command: "review", sessionID: S, arguments: "" }, { parts } as never)
  await h.user(S, parts[0].text)
  expect(h.toasts).toEqual([])
  await h.user(S, "refactor the whole module and rename every function in it please")
  expect(h.toasts.map((t) => t.message.endsWith("(intent-anchor)"))).toEqual([true])
})

describe("the bypass: the person sees its facts before the question and its outcome after", () => {
  const asking = (h: Awaited<ReturnType<typeof start>>, answer: (input: unknown) => Promise<void>) =>
    h.hooks.tool.anchor_bypass.execute({ reason: "hotfix\nfor the release" } as never, h.ctx(S, answer))
  const FACTS = "contract no-force-push blocked a bash call; reason: hotfix for the release; 3 of 3 overrides left"

  test("anchor_bypass, allowed: a toast with the facts before the dialog, then 'granted once'", async () => {
    const h = await start({ project: FORCE_PUSH })
    await h.tool(S, "bash", { command: "git push --force-with-lease origin main" })
    h.toasts.length = 0
    const seenWhenAsked: string[] = []
    await asking(h, async () => void seenWhenAsked.push(...h.toasts.map((t) => t.message)))
    const asked = `semantic-anchors: the agent asks you to let one blocked call run once: ${FACTS}. Answer in the dialog below.`
    expect(seenWhenAsked).toEqual([asked])
    expect(h.toasts).toEqual([
      { message: asked, variant: "warning" },
      {
        message:
          "semantic-anchors: bypass granted once (override 1 of 3): the next blocked call in this session may run once.",
        variant: "success",
      },
    ])
  })

  test("anchor_bypass, rejected by the person: 'refused'; refused by the rules: 'refused' with why, nobody asked", async () => {
    const h = await start({ project: FORCE_PUSH })
    await h.tool(S, "bash", { command: "git push --force origin main" })
    h.toasts.length = 0
    await asking(h, async () => {
      throw new Error("The user rejected permission to use this specific tool call.")
    })
    expect(h.toasts.map((t) => t.message).at(-1)).toBe(
      "semantic-anchors: bypass refused: you did not allow it; the blocked call stays blocked.",
    )
    h.toasts.length = 0
    let asked = 0
    await h.hooks.tool.anchor_bypass.execute(
      { reason: " " } as never,
      h.ctx(S, async () => void asked++),
    )
    expect(asked).toBe(0)
    expect(h.toasts.map((t) => t.message)).toEqual([
      "semantic-anchors: bypass refused: a reason is required (/anchor bypass <reason>; for anchor_bypass the string reason is required).",
    ])
  })

  test("/anchor bypass: 'granted once', then 'refused' while the pass is pending, each a moment after the command", async () => {
    const h = await start({ project: FORCE_PUSH })
    await h.user(S, "ship it so that users get the fix")
    h.toasts.length = 0
    await h.command(S, "bypass the release needs it")
    await h.command(S, "bypass again")
    expect(h.toasts).toEqual([
      {
        message:
          "semantic-anchors: bypass granted once (override 1 of 3): the next blocked call in this session may run once.",
        variant: "success",
      },
      {
        message:
          "semantic-anchors: bypass refused: a bypass is already pending; it lets the next blocked call run once.",
        variant: "warning",
      },
    ])
  })
})

describe("config problems reach the person", () => {
  const BROKEN = "version: 1\ncontracts: [\n"

  test("sent at start (no TUI sees it yet), again after the process's first user message, not on later ones", async () => {
    const h = await start({ project: BROKEN })
    const problem = (t: { message: string }) =>
      t.message.startsWith("semantic-anchors: 1 config problem (1 error), first:")
    expect(h.toasts.filter(problem)).toHaveLength(1)
    await h.user(S, "hello there, please look at the parser so that it works")
    expect(h.toasts.filter(problem)).toHaveLength(2)
    expect(h.toasts.filter(problem)[1].variant).toBe("error")
    expect(h.toasts.filter(problem)[1].message).toContain("cannot parse YAML")
    await h.user(S, "and again")
    await h.user("ses_other", "a second session")
    expect(h.toasts.filter(problem)).toHaveLength(2)
  })

  test("the tip of that first message comes after the problem, not over it", async () => {
    const h = await start({ project: BROKEN })
    h.toasts.length = 0
    await h.user(S, "refactor the whole module and rename every function in it please")
    expect(h.toasts.map((t) => t.message.split(":")[1].trim().split(" ")[0])).toEqual(["1", "tip"])
  })

  test("no problems: nothing is sent", async () => {
    const h = await start()
    await h.user(S, "hello so that we start")
    expect(h.toasts).toEqual([])
  })

  test("/anchor reload shows the problems of the reloaded files", async () => {
    const h = await start()
    await h.user(S, "hello so that we start")
    h.writeProject(BROKEN)
    await h.command(S, "reload")
    expect(h.toasts.map((t) => t.message).filter((m) => m.includes("config problem"))).toHaveLength(1)
  })
})

describe("/anchor: the answer is shown once", () => {
  const system = async (h: Awaited<ReturnType<typeof start>>, sessionID: string) => {
    const output = { system: ["You are opencode."] }
    await h.hooks["experimental.chat.system.transform"]({ sessionID, model: {} } as never, output)
    return output.system.slice(1)
  }

  test("the command's text is the result only; the model is asked, in the system prompt, for one short line", async () => {
    const h = await start()
    const text = await h.command(S, "status")
    expect(text.split("\n")[0]).toBe("[semantic-anchors] /anchor status")
    expect(text).not.toContain("Report this")
    expect(text).not.toContain("do not call tools")
    const added = await system(h, S)
    expect(added).toHaveLength(1)
    expect(added[0]).toContain("Reply with one short sentence")
    expect(await system(h, "ses_elsewhere")).toEqual([])
    await h.user(S, "now back to work")
    expect(await system(h, S)).toEqual([])
  })
})

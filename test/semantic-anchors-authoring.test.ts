// semantic-anchors.ts, for the person who writes contracts: `/anchor test <tool> <arguments>` (a dry run of one call
// against the session's current state, matcher by matcher) and contract `examples` (checked at every load). Driven
// through `server(input)` and the hooks, as opencode calls them: the command hook, then chat.message (test harness).
import { describe, expect, test } from "bun:test"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { buildConfig } from "../semantic-anchors"
import { type Harness, edit, start } from "./fixtures/semantic-anchors/harness"

const S = "ses_author"

/** A project file with one contract of the given trigger (YAML flow mapping text). */
function oneContract(trigger: string, mode = "block", id = "rule"): string {
  return `version: 1\ncontracts:\n  - id: ${id}\n    description: The rule under test.\n    mode: ${mode}\n    trigger: ${trigger}\n`
}

/** `/anchor test <args>` as the person runs it: the text they see (and the model reads). */
async function dryRun(h: Harness, args: string, session = S, agent = "build"): Promise<string> {
  return h.command(session, `test ${args}`, agent)
}

/** The lines of one contract in a test answer: its heading and its indented reasons. */
function contractLines(text: string, id: string): string[] {
  const lines = text.split("\n")
  const at = lines.findIndex((line) => new RegExp(`^ {2}(block|warn|info) +${id}\\b`).test(line))
  if (at === -1) return []
  const out = [lines[at].trim()]
  for (let i = at + 1; i < lines.length && lines[i].startsWith("    "); i++) out.push(lines[i].trim())
  return out
}

const FORCE_PUSH = `{ type: tool, tools: [bash], args: { command: { regex: '\\bgit\\s+push\\b.*\\s(--force|-f)\\b' } } }`
const FORCE_PUSH_SHOWN = "/\\bgit\\s+push\\b.*\\s(--force|-f)\\b/"

describe("/anchor test: each trigger type, through the command hook", () => {
  test("tool trigger: the call that fires, and the one that passes, matcher by matcher", async () => {
    const h = await start({ project: oneContract(FORCE_PUSH, "block", "no-force-push") })
    const fires = await dryRun(h, "bash git push --force origin main")
    expect(fires).toStartWith("[semantic-anchors] /anchor test bash git push --force origin main\n")
    expect(fires).toContain("semantic-anchors test, a dry run: nothing was counted, recorded or blocked.")
    expect(fires).toContain('call: bash {"command":"git push --force origin main"}')
    expect(fires).toContain("role: software-developer (agent build)")
    expect(fires).toContain("verdict: block (protect-remote-history, no-force-push): the call would not run")
    expect(contractLines(fires, "no-force-push")).toEqual([
      "block no-force-push: fires",
      "tool bash: in tools [bash]",
      `args.command: regex ${FORCE_PUSH_SHOWN} matched "git push --force origin main"`,
    ])
    const passes = await dryRun(h, "bash git push origin main")
    expect(passes).toContain("verdict: nothing: the call would run, with no note and no tip")
    expect(contractLines(passes, "no-force-push")).toEqual([
      "block no-force-push: passes",
      "tool bash: in tools [bash]",
      `args.command: regex ${FORCE_PUSH_SHOWN} did not match "git push origin main"`,
    ])
    expect(contractLines(await dryRun(h, "write src/a.ts"), "no-force-push")).toEqual([
      "block no-force-push: passes",
      "tool write: not in tools [bash]",
    ])
  })

  test("state trigger: the step count against its limit, and a call that only looks", async () => {
    const h = await start()
    await h.user(S, "start")
    for (let i = 1; i <= 2; i++) await h.tool(S, "edit", edit(i))
    expect(contractLines(await dryRun(h, "write src/x.ts"), "step-confirmation")).toEqual([
      "block step-confirmation: passes",
      "tool write: in tools [edit, write, patch, multiedit, apply_patch, bash], a changing step; 2 counted since the user's last confirmation, limit 3: this call would be step 3 of 3",
    ])
    await h.tool(S, "edit", edit(3))
    const full = await dryRun(h, "write src/x.ts")
    expect(full).toContain("verdict: block (step-confirmation): the call would not run")
    expect(contractLines(full, "step-confirmation")[1]).toEndWith(
      "a changing step; 3 counted since the user's last confirmation, limit 3: the limit is reached",
    )
    expect(contractLines(await dryRun(h, "bash git status"), "step-confirmation")).toEqual([
      "block step-confirmation: passes",
      "tool bash: in tools [edit, write, patch, multiedit, apply_patch, bash], but this call only looks: not a changing step",
    ])
  })

  test("message trigger: /anchor test message <text>, with pattern, unless and minLength said", async () => {
    const h = await start({
      project: oneContract(
        "{ type: message, pattern: '\\bdeploy', unless: '\\b[A-Z]+-\\d+\\b', flags: i, minLength: 10 }",
        "info",
        "deploy-needs-ticket",
      ),
    })
    const tip = await dryRun(h, "message please deploy the app now")
    expect(tip).toContain('user message: "please deploy the app now"')
    expect(tip).toContain("verdict: tip (deploy-needs-ticket): the user would get a tip")
    expect(tip).toContain("as a real message it would confirm: the step counters would start again")
    expect(contractLines(tip, "deploy-needs-ticket")).toEqual([
      "info  deploy-needs-ticket: fires",
      "minLength 10: the message has 25 characters",
      "pattern /\\bdeploy/i: matched",
      "unless /\\b[A-Z]+-\\d+\\b/i: did not match",
    ])
    expect(contractLines(tip, "step-confirmation")).toEqual([
      "block step-confirmation: passes",
      "judged on tool calls, not on user messages",
    ])
    expect(contractLines(await dryRun(h, "message deploy ABC-12 now"), "deploy-needs-ticket")).toEqual([
      "info  deploy-needs-ticket: passes",
      "minLength 10: the message has 17 characters",
      "pattern /\\bdeploy/i: matched",
      "unless /\\b[A-Z]+-\\d+\\b/i: matched, so it does not fire",
    ])
    expect(contractLines(await dryRun(h, "message deploy"), "deploy-needs-ticket")[1]).toBe(
      "minLength 10: the message has 6 characters, too short to be judged",
    )
    // a tool call is not what a message trigger judges
    expect(contractLines(await dryRun(h, "bash deploy"), "deploy-needs-ticket")).toEqual([
      "info  deploy-needs-ticket: passes",
      "judged on user messages, not on tool calls",
    ])
  })

  test("unlessSeen: the evidence not seen yet, then seen", async () => {
    const h = await start()
    const before = await dryRun(h, "write src/a.ts")
    expect(before).toContain("verdict: warn (source-anchor): the call would run, with a note to the agent")
    expect(contractLines(before, "source-anchor")).toEqual([
      "warn  source-anchor: fires",
      "tool write: in tools [edit, write, patch, multiedit, apply_patch]",
      "unlessSeen /https?:\\/\\/\\S|\\b(?:Source|Quelle)\\s*:/i: nothing seen in this session matches yet",
    ])
    await h.user(S, "Source: https://example.com/spec")
    expect(contractLines(await dryRun(h, "write src/a.ts"), "source-anchor")).toEqual([
      "warn  source-anchor: passes",
      "tool write: in tools [edit, write, patch, multiedit, apply_patch]",
      "unlessSeen /https?:\\/\\/\\S|\\b(?:Source|Quelle)\\s*:/i: seen in this session (a user message or tool result matched), so it does not fire",
    ])
  })

  test("the built-in kinds: boundary (plan agent), spread, and guard-integrity (locked by the plugin)", async () => {
    const h = await start()
    const plan = await dryRun(h, "write src/a.ts", "ses_plan", "plan")
    expect(plan).toContain("role: software-architect (agent plan)")
    expect(plan).toContain("verdict: block (boundary-anchor): the call would not run")
    expect(contractLines(plan, "boundary-anchor")).toEqual([
      "block boundary-anchor: fires",
      "it writes src/a.ts, outside docs/**, **/*.md, **/*.adoc, adr/**",
    ])
    expect(contractLines(plan, "emergence-anchor")).toEqual([
      "warn  emergence-anchor: passes",
      "with this call, 1 top-level directories (src) since the user's last confirmation, limit 3",
    ])
    const guard = await dryRun(h, "bash touch .opencode/opencode-semantic-anchors.yaml")
    expect(guard).toContain("verdict: block (guard-integrity): the call would not run")
    expect(contractLines(guard, "guard-integrity")).toEqual([
      "block guard-integrity [locked by the plugin]: fires",
      "the command touches .opencode, a guard file or directory",
    ])
    expect(contractLines(await dryRun(h, "read src/a.ts"), "guard-integrity")).toEqual([
      "block guard-integrity [locked by the plugin]: passes",
      "tool read: neither an edit tool nor bash with a command",
    ])
    // contracts that are not active for the role are named, with the reason
    expect(plan).toContain("not active for this role: source-anchor (not in this role's preset), intent-anchor (")
  })
})

describe("/anchor test: each matcher kind, on what it held or failed", () => {
  const cases: [string, string, string, string][] = [
    // matcher (YAML), the call, the contract's verdict, the reason line
    ["command: { equals: make }", "bash make", "fires", 'args.command: equals "make" matched "make"'],
    ["command: { equals: make }", "bash make test", "passes", 'args.command: equals "make" did not match "make test"'],
    [
      "command: { contains: '--force' }",
      "bash git push --force",
      "fires",
      'args.command: contains "--force" matched "git push --force"',
    ],
    [
      "command: { startsWith: 'git commit' }",
      "bash git status",
      "passes",
      'args.command: startsWith "git commit" did not match "git status"',
    ],
    [
      "filePath: { glob: ['secrets/**', '**/*.pem'] }",
      "read secrets/a.txt",
      "fires",
      'args.filePath: glob secrets/**, **/*.pem matched "secrets/a.txt"',
    ],
    [
      "filePath: { glob: 'secrets/**' }",
      "read src/a.txt",
      "passes",
      'args.filePath: glob secrets/** did not match "src/a.txt"',
    ],
    [
      "command: { regex: '^git', not: true }",
      "bash ls",
      "fires",
      'args.command: regex /^git/ did not match "ls"; with not: holds',
    ],
    [
      "command: { regex: '^git', not: true }",
      "bash git log",
      "passes",
      'args.command: regex /^git/ matched "git log"; with not: fails',
    ],
    [
      "command: { regex: 'push', flags: i }",
      "bash git PUSH",
      "fires",
      'args.command: regex /push/i matched "git PUSH"',
    ],
    [
      "workdir: { exists: true }",
      'bash {"command":"ls","workdir":"/tmp"}',
      "fires",
      "args.workdir: present; exists: true holds",
    ],
    [
      "workdir: { exists: true }",
      "bash ls",
      "passes",
      'args.workdir: the call has no argument "workdir"; exists: true fails on a missing argument',
    ],
    [
      "workdir: { exists: false }",
      "bash ls",
      "fires",
      'args.workdir: the call has no argument "workdir"; exists: false holds on a missing argument',
    ],
    // a matcher on an argument the tool does not have: the contract that silently never fires
    [
      "cmd: { regex: 'push' }",
      "bash git push",
      "passes",
      'args.cmd: the bash tool has no argument "cmd" (its arguments: command, timeout, description, workdir); regex /push/ fails on a missing argument',
    ],
    [
      "path: { glob: 'secrets/**' }",
      "write secrets/a",
      "passes",
      'args.path: the write tool has no argument "path" (its arguments: filePath, content); glob secrets/** fails on a missing argument',
    ],
    [
      "edits.0.filePath: { glob: 'src/**' }",
      'multiedit {"filePath":"x","edits":[{"filePath":"src/a.ts"}]}',
      "fires",
      'args.edits.0.filePath: glob src/** matched "src/a.ts"',
    ],
    [
      "edits.1.filePath: { glob: 'src/**' }",
      'multiedit {"filePath":"x","edits":[{"filePath":"src/a.ts"}]}',
      "passes",
      'args.edits.1.filePath: the call has no argument "edits.1.filePath"; glob src/** fails on a missing argument',
    ],
    [
      "base: { equals: main }",
      'mcp_github_create_pr {"repo":"x"}',
      "passes",
      'args.base: the call has no argument "base"; equals "main" fails on a missing argument',
    ],
    [
      "base: { equals: main }",
      'mcp_github_create_pr {"repo":"x","base":"main"}',
      "fires",
      'args.base: equals "main" matched "main"',
    ],
  ]
  test.each(cases)("%s on `%s`: %s", async (matcher, call, verdict, reason) => {
    const h = await start({ project: oneContract(`{ type: tool, args: { ${matcher} } }`) })
    const lines = contractLines(await dryRun(h, call), "rule")
    expect(lines[0]).toBe(`block rule: ${verdict}`)
    expect(lines).toContain(reason)
  })

  test("a glob on a path opencode passes absolute: matched relative to the project", async () => {
    const h = await start({ project: oneContract("{ type: tool, args: { filePath: { glob: 'secrets/**' } } }") })
    const path = `${h.dirs.project}/secrets/a.pem`
    expect(contractLines(await dryRun(h, `read ${path}`), "rule")).toContain(
      `args.filePath: glob secrets/** matched ${JSON.stringify(path)}`,
    )
  })

  test("every matcher is said, not only the first that fails", async () => {
    const h = await start({
      project: oneContract("{ type: tool, tools: [bash], args: { cmd: { contains: x }, command: { contains: y } } }"),
    })
    expect(contractLines(await dryRun(h, "bash yes"), "rule")).toEqual([
      "block rule: passes",
      "tool bash: in tools [bash]",
      'args.cmd: the bash tool has no argument "cmd" (its arguments: command, timeout, description, workdir); contains "x" fails on a missing argument',
      'args.command: contains "y" matched "yes"',
    ])
  })
})

describe("/anchor test: locks, bypasses, arguments, roles", () => {
  test("a contract locked by the global file says so, and the project file cannot switch it off", async () => {
    const h = await start({
      global: `version: 1\ncontracts:\n  - id: no-force-push\n    description: Never rewrite shared history.\n    mode: block\n    locked: true\n    trigger: ${FORCE_PUSH}\n`,
      project: "version: 1\ncontracts:\n  - id: no-force-push\n    enabled: false\n",
    })
    const text = await dryRun(h, "bash git push -f origin main")
    expect(text).toContain("verdict: block (protect-remote-history, no-force-push): the call would not run")
    expect(contractLines(text, "no-force-push")[0]).toBe(
      `block no-force-push [locked by the global file (${h.dirs.globalFile})]: fires`,
    )
  })

  test("a pending bypass: the verdict says the call would use it, and the dry run does not", async () => {
    const h = await start({ project: oneContract(FORCE_PUSH, "block", "no-force-push") })
    await h.command(S, "bypass the fixture needs it")
    expect(await dryRun(h, "bash git push --force origin main")).toContain(
      "verdict: block (protect-remote-history, no-force-push), but a bypass is pending: the call would run once and use it",
    )
    expect(await dryRun(h, "bash git push --force origin main")).toContain("but a bypass is pending")
    expect(await h.tool(S, "bash", { command: "git push --force origin main" })).toBeUndefined() // the pass was there
    expect(await h.tool(S, "bash", { command: "git push --force origin main" })).toContain("no-force-push")
  })

  test("arguments: a JSON object, or plain text as the tool's main argument; what is refused and why", async () => {
    const h = await start()
    expect(await dryRun(h, 'bash {"command":"ls -la","timeout":5}')).toContain(
      'call: bash {"command":"ls -la","timeout":5}',
    )
    expect(await dryRun(h, "read src/app.ts")).toContain('call: read {"filePath":"src/app.ts"}')
    expect(await dryRun(h, "edit src/app.ts")).toContain('call: edit {"filePath":"src/app.ts"}')
    expect(await dryRun(h, "glob **/*.ts")).toContain('call: glob {"pattern":"**/*.ts"}')
    expect(await dryRun(h, "grep TODO")).toContain('call: grep {"pattern":"TODO"}')
    expect(await dryRun(h, "webfetch https://example.com")).toContain('call: webfetch {"url":"https://example.com"}')
    // a shell group that is not JSON stays a command
    expect(await dryRun(h, "bash { ls; } > out.txt")).toContain('call: bash {"command":"{ ls; } > out.txt"}')
    // no arguments: a call with none
    expect(await dryRun(h, "mcp_github_list_prs")).toContain("call: mcp_github_list_prs {}")
    expect(await dryRun(h, 'mcp_github_create_pr {"repo":"x","base":"main"}')).toContain(
      'call: mcp_github_create_pr {"repo":"x","base":"main"}',
    )
    expect(await dryRun(h, "mcp_github_create_pr main")).toEndWith(
      '"mcp_github_create_pr" is not one of opencode\'s built-in tools, so its main argument is not known: give its arguments as a JSON object, e.g. /anchor test mcp_github_create_pr {"name":"value"}',
    )
    expect(await dryRun(h, "mcp_x {not json")).toContain("The arguments are not a JSON object (")
    expect(await dryRun(h, "todowrite buy milk")).toContain('"todowrite" is not one of')
    for (const args of ["", "message"])
      expect(await h.command(S, `test ${args}`.trim())).toContain("Usage: /anchor test <tool> <arguments>")
    expect(await h.command(S, "frobnicate")).toContain("/anchor test <tool> <arguments>")
  })

  test("a command that spans lines is judged whole, and shown whole", async () => {
    const h = await start({ project: oneContract("{ type: tool, args: { command: { regex: 'rm -rf' } } }") })
    const text = await dryRun(h, "bash echo start\nrm -rf build")
    expect(text).toStartWith("[semantic-anchors] /anchor test bash echo start\nrm -rf build\n")
    expect(text).toContain('call: bash {"command":"echo start\\nrm -rf build"}')
    expect(contractLines(text, "rule")[0]).toBe("block rule: fires")
  })

  test("the role is the one of the agent that ran the command, even in a new session", async () => {
    const h = await start()
    const text = await dryRun(h, "write src/a.ts", "ses_new_plan", "plan")
    expect(text).toContain("role: software-architect (agent plan)")
    expect(text).toContain("contracts active for this role (9):")
  })

  test("the plugin's own tools are never checked", async () => {
    const h = await start()
    expect(await dryRun(h, "anchor_status")).toContain(
      "verdict: nothing: anchor_status is the plugin's own tool and is never checked",
    )
  })
})

describe("/anchor test is read-only", () => {
  /** The same session history in two plugin instances: user message, a warn, 2 steps, a block. */
  async function history(): Promise<Harness> {
    const h = await start({ project: oneContract(FORCE_PUSH, "block", "no-force-push") })
    await h.user(S, "start the work")
    await h.run(S, "edit", edit(1)) // source-anchor warns (its note given in this turn), step 1
    await h.run(S, "edit", edit(2)) // step 2
    await h.tool(S, "bash", { command: "git push --force origin main" }) // blocked: the last block
    return h
  }
  /** What a later series of calls does: outcomes, toasts, logs, the bypass question. */
  async function aftermath(h: Harness): Promise<unknown[]> {
    const toastsBefore = h.toasts.length
    const logsBefore = h.logs.length
    const asked: unknown[] = []
    const out: unknown[] = []
    out.push(await h.run(S, "edit", edit(3))) // step 3 passes, with no second source-anchor note
    out.push(await h.run(S, "edit", edit(4))) // the 4th is blocked
    out.push(await h.tool.bind(h)(S, "bash", { command: "ls" }))
    out.push(
      await h.hooks.tool.anchor_bypass.execute(
        { reason: "why not" } as never,
        h.ctx(S, async (q) => void asked.push(q)),
      ),
    )
    out.push(await h.run(S, "edit", edit(4))) // the pass the bypass granted
    out.push(asked)
    out.push(h.toasts.slice(toastsBefore), h.logs.slice(logsBefore))
    return out
  }
  const DRY_RUNS = [
    "bash git push --force origin main", // would block
    "edit src/f9.ts", // would count a step (and warn, if the note were not given)
    "write docs/a.md",
    "bash ls",
    "message Source: https://example.com", // evidence, were it a real message
    "mcp_x {}",
  ]

  test("the status is the same before and after, and no toast or log line is added", async () => {
    const h = await history()
    const before = await h.status(S)
    const toasts = h.toasts.length
    const logs = h.logs.length
    for (const args of DRY_RUNS) await dryRun(h, args)
    expect(await h.status(S)).toBe(before)
    expect(h.toasts.length).toBe(toasts)
    expect(h.logs.length).toBe(logs)
  })

  test("what the session does next is what it does after /anchor status (which changes nothing)", async () => {
    const control = await history()
    await control.command(S, "status")
    const tested = await history()
    for (const args of DRY_RUNS) await dryRun(tested, args)
    const expected = await aftermath(control)
    expect(expected.length).toBe(8)
    expect(JSON.stringify(await aftermath(tested)).replace(/call_\d+/g, "call")).toBe(
      JSON.stringify(expected).replace(/call_\d+/g, "call"),
    )
  })

  test("a session that has no state yet gets none from a dry run", async () => {
    const h = await start({ project: oneContract(FORCE_PUSH, "block", "no-force-push") })
    // the command hook alone (chat.message, which creates the session's state for any message, is not called)
    const parts = [{ type: "text", text: "The user ran /anchor test" }]
    await h.hooks["command.execute.before"](
      { command: "anchor", sessionID: "ses_untouched", arguments: "test edit src/a.ts" },
      { parts } as never,
    )
    expect(parts[0].text).toContain("verdict: warn (source-anchor)")
    expect(parts[0].text).toContain("0 counted since the user's last confirmation")
    expect(await h.status("ses_untouched")).toContain("step-confirmation (0/3 since the last confirmation)")
  })
})

describe("examples: checked at every load and reload", () => {
  test("examples that hold: no problem, and the contract is in force", async () => {
    const h = await start({
      project: `version: 1
contracts:
  - id: no-force-push
    description: Never rewrite shared history.
    mode: block
    trigger: ${FORCE_PUSH}
    examples:
      fires: [{ tool: bash, args: { command: "git push --force origin main" } }, { tool: bash, args: { command: "git push -f" } }]
      passes: [{ tool: bash, args: { command: "git push origin main" } }, { tool: read, args: { filePath: x } }]
  - id: ask-every-2
    description: Check in after two commands.
    mode: block
    trigger: { type: state, every: 2, tools: [bash] }
    examples:
      fires: [{ tool: bash, args: { command: "npm test" }, steps: 2 }]
      passes: [{ tool: bash, args: { command: "npm test" }, steps: 1 }, { tool: bash, args: { command: ls }, steps: 5 }]
  - id: ticket-in-commit
    description: Commits name their ticket.
    mode: warn
    trigger: { type: tool, tools: [bash], args: { command: { startsWith: git commit } }, unlessSeen: '\\b[A-Z]+-\\d+\\b' }
    examples:
      fires: [{ tool: bash, args: { command: "git commit -m wip" } }]
      passes: [{ tool: bash, args: { command: "git commit -m wip" }, seen: "this is ABC-12" }]
  - id: deploy-tip
    description: Name the ticket of a deploy.
    mode: info
    trigger: { type: message, pattern: '\\bdeploy', unless: '\\b[A-Z]+-\\d+\\b' }
    examples:
      fires: [{ message: "deploy the app" }]
      passes: [{ message: "deploy ABC-12" }, { message: "hello" }]
`,
    })
    const status = await h.status(S)
    expect(status).toContain("problems: none")
    for (const id of ["no-force-push", "ask-every-2", "ticket-in-commit", "deploy-tip"]) expect(status).toContain(id)
    expect(await h.tool(S, "bash", { command: "git push --force origin main" })).toContain("no-force-push")
  })

  test("a reload checks them again: a rule changed so its example fails is left out, with the reason", async () => {
    const rule = (regex: string) =>
      `version: 1\ncontracts:\n  - id: no-force-push\n    description: d\n    mode: block\n    trigger: { type: tool, tools: [bash], args: { command: { regex: '${regex}' } } }\n    examples:\n      passes: [{ tool: bash, args: { command: "git push origin main" } }]\n`
    const h = await start({ project: rule("--force") })
    expect(await h.tool(S, "bash", { command: "git push --force" })).toContain("no-force-push")
    h.writeProject(rule("push"))
    await h.command(S, "reload")
    const status = await h.status(S)
    expect(status).toContain(
      '  error: .opencode/opencode-semantic-anchors.yaml: contracts[0].examples.passes[0]: listed under passes, but the contract fires: tool bash: in tools [bash]; args.command: regex /push/ matched "git push origin main"; the contract is left out',
    )
    expect(status).not.toMatch(/block\s+no-force-push/)
    expect((await h.tool(S, "bash", { command: "git push --force" })) ?? "").not.toContain("no-force-push")
  })

  test("examples are judged with the project's paths: an absolute path inside it matches a relative glob", async () => {
    const h = await start()
    h.writeProject(
      `version: 1\ncontracts:\n  - id: no-secrets\n    description: d\n    mode: block\n    trigger: { type: tool, args: { filePath: { glob: 'secrets/**' } } }\n    examples:\n      fires: [{ tool: read, args: { filePath: "${h.dirs.project}/secrets/a.pem" } }]\n`,
    )
    await h.command(S, "reload")
    expect(await h.status(S)).toContain("problems: none")
  })

  test("the built-ins carry examples that hold (checked at every load: no problem with no file)", () => {
    const config = buildConfig([])
    expect(config.problems).toEqual([])
    for (const contract of config.contracts.values()) {
      expect({ id: contract.id, fires: contract.examples!.fires.length > 0 }).toEqual({ id: contract.id, fires: true })
      expect({ id: contract.id, passes: contract.examples!.passes.length > 0 }).toEqual({
        id: contract.id,
        passes: true,
      })
    }
  })

  test("a built-in changed field by field keeps its examples; a new trigger drops them (they were for the old one)", async () => {
    const h = await start({
      project: `version: 1
contracts:
  - id: step-confirmation
    mode: warn
  - id: source-anchor
    trigger: { type: tool, tools: [bash] }
`,
    })
    expect(await h.status(S)).toContain("problems: none") // source-anchor's built-in examples (write calls) are gone
    const config = buildConfig([
      {
        path: "/p/x.yaml",
        label: "x",
        layer: "project",
        text: "version: 1\ncontracts:\n  - id: step-confirmation\n    mode: warn\n",
      },
    ])
    expect(config.contracts.get("step-confirmation")!.examples!.fires.length).toBeGreaterThan(0)
  })
})

describe("the Authoring contracts section of docs/contracts.md is true", () => {
  const reference = readFileSync(join(import.meta.dir, "../docs/contracts.md"), "utf8")
  const begin = reference.indexOf("\n## Authoring contracts\n")
  const end = reference.indexOf("\n## ", begin + 1)
  const section = reference.slice(begin, end < 0 ? undefined : end)
  const blocks = [...section.matchAll(/```(yaml)?\n([\s\S]*?)```/g)].map((m) => m[2])

  test("the rule that never fired, its /anchor test answer, and the error its examples give at load", async () => {
    const [rule, answer, examples, error] = blocks
    expect(rule).toContain("cmd: { regex:")
    const h = await start({ project: rule })
    expect(await h.status(S)).toContain("problems: none") // it loads, and silently never fires
    // it never fires (the force push is blocked by the built-in protect-remote-history alone)
    expect(await h.tool("ses_agent", "bash", { command: "git push --force origin main" })).not.toContain(
      "no-force-push",
    )
    expect(`${await dryRun(h, "bash git push --force origin main")}\n`).toBe(answer)
    const withExamples = await start({ project: rule + examples })
    expect((await withExamples.status(S)).split("\n")).toContain(`  ${error.trim()}`)
  })

  test("the fix the section names makes the examples hold and the rule fire", async () => {
    const [rule, , examples] = blocks
    const h = await start({ project: rule.replace("cmd:", "command:") + examples })
    expect(await h.status(S)).toContain("problems: none")
    expect(await h.tool(S, "bash", { command: "git push --force origin main" })).toContain("no-force-push")
  })
})

describe("/anchor test and examples never take the session down", () => {
  test("odd arguments get an answer, never an internal error", async () => {
    const h = await start({ project: oneContract("{ type: tool, args: { cmd: { regex: x } } }") })
    const odd = [
      "constructor x",
      "__proto__ {}",
      "toString",
      'hasOwnProperty {"cmd":1}',
      'bash {"command":{"nested":[1,2]}}',
      'edit {"filePath":null}',
      "bash " + "x".repeat(100_000),
      "message " + "y".repeat(100_000),
      'bash {"command":"ls"',
      "bash \u0000\u2028",
    ]
    for (const args of odd) expect(await dryRun(h, args)).toStartWith(`[semantic-anchors] /anchor test `)
    expect(h.logs.filter((l) => l.message.includes("internal error"))).toEqual([])
  })

  test("a JSON object that does not parse is said so; a bash brace group is a command; a long call is echoed capped", async () => {
    const h = await start()
    const broken = await dryRun(h, 'read {"filePath": "x"')
    expect(broken).toContain("The arguments are not a JSON object (")
    expect(broken).not.toContain("verdict:")
    expect(await dryRun(h, "bash { make; make test; }")).toContain('call: bash {"command":"{ make; make test; }"}')
    const long = await dryRun(h, "bash echo " + "x".repeat(5_000))
    const echoed = long.split("\n").find((line) => line.startsWith("call: "))!
    expect(echoed.length).toBeLessThanOrEqual("call: bash ".length + 300)
    expect(echoed).toEndWith("...")
  })

  test("an example naming a tool like an Object property is judged like any other", async () => {
    const h = await start({
      project: `${oneContract("{ type: tool, args: { cmd: { regex: x } } }")}    examples:\n      passes: [{ tool: constructor }, { tool: __proto__ }, { tool: toString, args: { cmd: y } }]\n`,
    })
    const status = await h.status(S)
    expect(status).toContain("problems: none")
    expect(status).toMatch(/block\s+rule/)
  })
})

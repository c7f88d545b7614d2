// semantic-anchors.ts, layer 1: files, merging, the validator over a malformed-config corpus, presets, and the
// JSON Schema kept in step with the validator. Everything goes through server(input) and the hooks.
import { describe, expect, test } from "bun:test"
import { mkdirSync, readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { ANCHOR_IDS, BUILTIN_PRESETS, PROTECTION_IDS, ROLES, SCHEMA_KEYS } from "../semantic-anchors"
import { type Harness, PROJECT_FILE, edit, start } from "./fixtures/semantic-anchors/harness"

const S = "ses_cfg"
const CORPUS = join(import.meta.dir, "fixtures/semantic-anchors/malformed")
const corpus = readdirSync(CORPUS)
  .filter((name) => name.endsWith(".yaml"))
  .sort()

/** A fixture's first line: `# error: <message>` or `# warning: <message>`. */
function expectation(name: string): { severity: string; text: string; body: string } {
  const body = readFileSync(join(CORPUS, name), "utf8")
  const match = /^# (error|warning): (.*)\n/.exec(body)
  if (!match) throw new Error(`${name}: first line must be "# error: ..." or "# warning: ..."`)
  return { severity: match[1], text: match[2], body }
}

/** Contract ids in the status's "active contracts" list, in order. */
function activeIds(status: string): string[] {
  return [...status.matchAll(/^ {2}(?:block|warn|info) +([a-z0-9-]+)/gm)].map((m) => m[1])
}

describe("the malformed-config corpus", () => {
  test("has at least 30 fixtures, each with an expected message", () => {
    expect(corpus.length).toBeGreaterThanOrEqual(30)
    for (const name of corpus) expect(expectation(name).text.length).toBeGreaterThan(10)
  })

  for (const name of corpus) {
    test(`${name}: precise message, and the plugin keeps working`, async () => {
      const { severity, text, body } = expectation(name)
      const h = await start({ project: body })
      const status = await h.status(S)
      // the exact message, with file and key path, in the status, and in the log at its level
      expect(status.split("\n")).toContain(`  ${severity}: ${PROJECT_FILE}: ${text}`)
      expect(
        h.logs.some(
          (l) =>
            l.level === (severity === "error" ? "error" : "warn") &&
            l.message === `semantic-anchors: ${PROJECT_FILE}: ${text}`,
        ),
      ).toBe(true)
      // one toast for all problems
      expect(h.toasts.filter((t) => t.message.includes("config problem")).length).toBe(1)
      // and the session goes on under the built-ins: step-confirmation still counts and blocks
      await h.user(S, "start")
      for (let i = 1; i <= 3; i++) expect(await h.tool(S, "edit", edit(i))).toBeUndefined()
      expect(await h.tool(S, "edit", edit(4))).toContain('Contract "step-confirmation"')
      expect(await h.tool(S, "bash", { command: `rm ${PROJECT_FILE}` })).toContain("guard-integrity")
    })
  }
})

describe("files and merging", () => {
  test("no file at all is the normal case: built-ins apply, no problems, no toast", async () => {
    const h = await start()
    const status = await h.status(S)
    expect(status).toContain("problems: none")
    expect(status).toContain("(not found)")
    expect(h.toasts.length).toBe(0)
    expect(activeIds(status)).toEqual([
      "guard-integrity",
      ...PROTECTION_IDS,
      "step-confirmation",
      "source-anchor",
      "intent-anchor",
    ])
  })

  test("paths come from the plugin input (directory, XDG_CONFIG_HOME), never process.cwd()", async () => {
    const h = await start({
      project:
        "version: 1\ncontracts:\n  - { id: from-project, description: p, mode: warn, trigger: { type: tool, tools: [probe] } }\n",
      global:
        "version: 1\ncontracts:\n  - { id: from-global, description: g, mode: warn, trigger: { type: tool, tools: [probe] } }\n",
    })
    expect(process.cwd()).not.toBe(h.dirs.project)
    expect(activeIds(await h.status(S))).toEqual(expect.arrayContaining(["from-project", "from-global"]))
  })

  test("merged by id: built-ins, then global, then project (field by field)", async () => {
    const global =
      "version: 1\ncontracts:\n  - id: no-curl\n    description: No curl.\n    mode: warn\n    message: from global\n    trigger: { type: tool, tools: [bash], args: { command: { contains: curl } } }\n  - id: source-anchor\n    mode: block\n"
    const project = "version: 1\ncontracts:\n  - id: no-curl\n    mode: block\n"
    const h = await start({ global, project })
    const blocked = await h.tool(S, "bash", { command: "curl x" })
    expect(blocked).toContain('Contract "no-curl": No curl. from global')
    expect(await h.tool(S, "write", { filePath: "a.ts" })).toContain('Contract "source-anchor"')
  })

  test("enabled: false switches a built-in off", async () => {
    const h = await start({ project: "version: 1\ncontracts:\n  - id: step-confirmation\n    enabled: false\n" })
    for (let i = 1; i <= 6; i++) expect(await h.tool(S, "edit", edit(i))).toBeUndefined()
    expect(activeIds(await h.status(S))).not.toContain("step-confirmation")
  })

  test("OPENCODE_SEMANTIC_ANCHORS_CONFIG names one file that replaces the global one", async () => {
    const g =
      "version: 1\ncontracts:\n  - { id: from-global, description: g, mode: warn, trigger: { type: tool, tools: [probe] } }\n"
    const e =
      "version: 1\ncontracts:\n  - { id: from-env, description: e, mode: warn, trigger: { type: tool, tools: [probe] } }\n"
    const h = await start({ global: g, envFile: e })
    const ids = activeIds(await h.status(S))
    expect(ids).toContain("from-env")
    expect(ids).not.toContain("from-global")
  })

  test("a named OPENCODE_SEMANTIC_ANCHORS_CONFIG file that does not exist is reported", async () => {
    const h = await start({ envPath: "/nonexistent/anchors.yaml" })
    expect(await h.status(S)).toContain(
      "error: /nonexistent/anchors.yaml: cannot read the file (ENOENT: OPENCODE_SEMANTIC_ANCHORS_CONFIG names a file that does not exist)",
    )
  })

  test("an unparseable or unreadable file is ignored whole and the other file stays in force", async () => {
    const global =
      "version: 1\ncontracts:\n  - { id: no-curl, description: No curl., mode: block, trigger: { type: tool, tools: [bash], args: { command: { contains: curl } } } }\n"
    const broken = await start({ global, project: "version: 1\ncontracts:\n  - id: [unclosed\n" })
    expect(await broken.status(S)).toContain(`error: ${PROJECT_FILE}: cannot parse YAML`)
    expect(await broken.tool(S, "bash", { command: "curl x" })).toContain("no-curl")

    const unreadable = await start({ global })
    mkdirSync(unreadable.dirs.projectFile) // a directory where the file should be
    await unreadable.command(S, "reload")
    const status = await unreadable.status(S)
    expect(status).toContain(`error: ${PROJECT_FILE}: cannot read the file (EISDIR`)
    expect(status).toContain(`${PROJECT_FILE} (unreadable)`)
    expect(await unreadable.tool(S, "bash", { command: "curl x" })).toContain("no-curl")
  })

  test("an invalid contract disables only itself", async () => {
    const project =
      "version: 1\ncontracts:\n  - { id: good, description: ok, mode: block, trigger: { type: tool, tools: [bash], args: { command: { equals: make } } } }\n  - { id: bad, description: x, mode: block, trigger: { type: tool, tools: [bash], args: { command: { regex: '(' } } } }\n  - { id: source-anchor, mode: nope }\n"
    const h = await start({ project })
    const ids = activeIds(await h.status(S))
    expect(ids).toContain("good")
    expect(ids).not.toContain("bad")
    expect(ids).toContain("source-anchor") // the broken change left the built-in as it was
    expect(await h.tool(S, "bash", { command: "make" })).toContain("good")
    expect((await h.run(S, "write", { filePath: "a.ts" })).output).toContain("WARN source-anchor")
  })

  test("warnings go to the log (each), to one toast, and to the status", async () => {
    const project =
      "version: 1\nsetings: {}\ncontracts:\n  - { id: x, description: d, mode: warn, anchorRefs: [yagnii, arc-42], trigger: { type: tool, tools: [probe] } }\n"
    const h = await start({ project })
    const lines = [
      `${PROJECT_FILE}: setings: unknown key "setings" (did you mean "settings"?); it is ignored`,
      `${PROJECT_FILE}: contracts[0].anchorRefs[0]: unknown Semantic-Anchors id "yagnii" (closest: "yagni")`,
      `${PROJECT_FILE}: contracts[0].anchorRefs[1]: unknown Semantic-Anchors id "arc-42" (closest: "arc42")`,
    ]
    for (const line of lines)
      expect(h.logs.some((l) => l.level === "warn" && l.message === `semantic-anchors: ${line}`)).toBe(true)
    expect(h.toasts).toEqual([
      {
        message:
          'semantic-anchors: 3 config problems (0 errors), first: .opencode/opencode-semantic-anchors.yaml: setings: unknown key "setings" (did you mean "settings"?); it is ignored; run /anchor status to see all.',
        variant: "warning",
      },
    ])
    const status = await h.status(S)
    for (const line of lines) expect(status).toContain(`warning: ${line}`)
    expect(activeIds(status)).toContain("x") // warnings do not disable
  })
})

describe("locked contracts vs the project file", () => {
  const FORCE_PUSH = "git push --force origin main"
  const noForcePush = (extra: string) =>
    `  - id: no-force-push\n    description: Never rewrite shared history.\n    mode: block\n${extra}    trigger: { type: tool, tools: [bash], args: { command: { regex: '\\bgit\\s+push\\b.*\\s(--force|-f)\\b' } } }\n`
  const global = `version: 1\ncontracts:\n${noForcePush("    locked: true\n")}  - id: step-confirmation\n    locked: true\n`

  /** Error problems of a harness, as opencode's log has them: `semantic-anchors: <file>: <keyPath>: <text>`. */
  const errorLines = (h: Harness) =>
    h.logs.filter((l) => l.level === "error").map((l) => l.message.replace(h.dirs.globalFile, "<global>"))

  // Who locked a contract decides who may change it, and the refusal says so.
  const refusals: [string, { global?: string; project?: string }, string][] = [
    [
      "a built-in locked by the plugin, from the project file",
      { project: "version: 1\ncontracts:\n  - { id: guard-integrity, enabled: false }\n" },
      `semantic-anchors: ${PROJECT_FILE}: contracts[0]: contract "guard-integrity" is locked by the plugin; no file can change or disable it. Remove this entry`,
    ],
    [
      "a built-in locked by the plugin, from the global file",
      { global: "version: 1\ncontracts:\n  - { id: guard-integrity, mode: warn }\n" },
      `semantic-anchors: <global>: contracts[0]: contract "guard-integrity" is locked by the plugin; no file can change or disable it. Remove this entry`,
    ],
    [
      "a file contract locked by the global file, from the project file",
      { global, project: "version: 1\ncontracts:\n  - { id: no-force-push, enabled: false }\n" },
      `semantic-anchors: ${PROJECT_FILE}: contracts[0]: contract "no-force-push" is locked by the global file (<global>); the project file cannot change or disable it. Remove this entry, or change it in the global file`,
    ],
    [
      "a built-in locked by the global file, from the project file",
      { global, project: "version: 1\ncontracts:\n  - { id: step-confirmation, mode: info }\n" },
      `semantic-anchors: ${PROJECT_FILE}: contracts[0]: contract "step-confirmation" is locked by the global file (<global>); the project file cannot change or disable it. Remove this entry, or change it in the global file`,
    ],
  ]
  for (const [name, files, line] of refusals) {
    test(`refused with who locked it: ${name}`, async () => {
      const h = await start(files)
      expect(errorLines(h)).toEqual([line])
    })
  }

  test("a refused change leaves the locked contract as the global file has it", async () => {
    const project =
      "version: 1\ncontracts:\n  - id: no-force-push\n    enabled: false\n  - id: step-confirmation\n    mode: info\n"
    const h = await start({ global, project })
    expect(errorLines(h).length).toBe(2)
    await h.user(S, "go", "build")
    expect(await h.tool(S, "bash", { command: FORCE_PUSH })).toContain('Contract "no-force-push"')
    for (let i = 1; i <= 3; i++) expect((await h.run(S, "edit", edit(i))).blocked).toBeUndefined()
    expect((await h.run(S, "edit", edit(4))).blocked).toContain('Contract "step-confirmation"')
  })

  // Locks hold: the project's roles and presets cannot drop a locked contract from an agent the global file's roles
  // and presets gave it to. Each row: the files, the agent, whether the locked contract still applies, the error.
  type LockCase = {
    name: string
    global: string
    project: string
    agent: string
    check: "force-push" | "4th edit"
    holds: boolean // the contract still blocks for this agent
    role: string // the session's role: the rest of the project's mapping applies
    errors: string[]
  }
  const dropNote = (keyPath: string, what: string, id: string, stays: string, fix: string) =>
    `semantic-anchors: ${PROJECT_FILE}: ${keyPath}: ${what}contract "${id}", locked by the global file (<global>); it stays in force for ${stays}. ${fix}, or unlock the contract in the global file`
  const lockedForDevelopers = `version: 1\ncontracts:\n${noForcePush("    locked: true\n    roles: [software-developer]\n")}`
  const lockedStep = "version: 1\ncontracts:\n  - id: step-confirmation\n    locked: true\n"
  const cases: LockCase[] = [
    {
      name: "locked file contract, project roles.agents.build remaps build",
      global: lockedForDevelopers,
      project: "version: 1\nroles:\n  agents: { build: team-lead }\n",
      agent: "build",
      check: "force-push",
      holds: true,
      role: "team-lead",
      errors: [
        dropNote(
          "roles.agents.build",
          'maps agent "build" to "team-lead", which would drop ',
          "no-force-push",
          "this agent",
          "Remove the mapping",
        ),
      ],
    },
    {
      name: "locked file contract, project roles.default remaps agents not in the map",
      global: lockedForDevelopers,
      project: "version: 1\nroles:\n  default: team-lead\n",
      agent: "coder",
      check: "force-push",
      holds: true,
      role: "team-lead",
      errors: [
        dropNote(
          "roles.default",
          'gives the agents not in roles.agents the role "team-lead", which would drop ',
          "no-force-push",
          "those agents",
          "Remove roles.default here",
        ),
      ],
    },
    {
      name: "locked file contract, project maps an agent the global file left to the default",
      global: lockedForDevelopers,
      project: "version: 1\nroles:\n  agents: { docs: technical-writer }\n",
      agent: "docs",
      check: "force-push",
      holds: true,
      role: "technical-writer",
      errors: [
        dropNote(
          "roles.agents.docs",
          'maps agent "docs" to "technical-writer", which would drop ',
          "no-force-push",
          "this agent",
          "Remove the mapping",
        ),
      ],
    },
    {
      name: "locked built-in reaching a role through a global preset, project roles.agents.build remaps build",
      global: lockedStep,
      project: "version: 1\nroles:\n  agents: { build: team-lead }\n",
      agent: "build",
      check: "4th edit",
      holds: true,
      role: "team-lead",
      errors: [
        dropNote(
          "roles.agents.build",
          'maps agent "build" to "team-lead", which would drop ',
          "step-confirmation",
          "this agent",
          "Remove the mapping",
        ),
      ],
    },
    {
      name: "locked built-in reaching a role through a global file preset, project presets edit drops it",
      global: `${lockedStep}presets:\n  team-lead: [step-confirmation, intent-anchor]\nroles:\n  agents: { build: team-lead }\n`,
      project: "version: 1\npresets:\n  team-lead: [intent-anchor]\n",
      agent: "build",
      check: "4th edit",
      holds: true,
      role: "team-lead",
      errors: [
        dropNote(
          "presets.team-lead",
          "leaves out ",
          "step-confirmation",
          'every agent with role "team-lead" under the global file\'s roles',
          "Add it to this preset",
        ),
      ],
    },
    {
      name: "control: an unlocked file contract is switched off by the remap",
      global: `version: 1\ncontracts:\n${noForcePush("    roles: [software-developer]\n")}`,
      project: "version: 1\nroles:\n  agents: { build: team-lead }\n",
      agent: "build",
      check: "force-push",
      holds: false,
      role: "team-lead",
      errors: [],
    },
    {
      name: "control: an unlocked built-in is switched off by the remap",
      global: "version: 1\n",
      project: "version: 1\nroles:\n  agents: { build: team-lead }\n",
      agent: "build",
      check: "4th edit",
      holds: false,
      role: "team-lead",
      errors: [],
    },
    {
      name: "control: a lock does not reach an agent the global file never gave it to",
      global: lockedForDevelopers,
      project: "version: 1\nroles:\n  agents: { build: team-lead }\n",
      agent: "plan",
      check: "force-push",
      holds: false,
      role: "software-architect",
      errors: [expect.stringContaining("roles.agents.build") as unknown as string],
    },
  ]
  for (const c of cases) {
    test(`${c.name}: ${c.holds ? "still in force" : "off"} for agent ${c.agent}`, async () => {
      const h = await start({ global: c.global, project: c.project })
      expect(errorLines(h)).toEqual(c.errors)
      await h.user(S, "go", c.agent)
      const status = await h.status(S)
      expect(status).toContain(`role: ${c.role} (agent ${c.agent})`)
      if (c.check === "force-push") {
        const result = await h.tool(S, "bash", { command: FORCE_PUSH })
        if (c.holds) expect(result).toContain('Contract "no-force-push"')
        else expect(result ?? "").not.toContain('Contract "no-force-push"') // protect-remote-history blocks it still
      } else {
        for (let i = 1; i <= 3; i++) await h.run(S, "edit", edit(i))
        const result = (await h.run(S, "edit", edit(4))).blocked
        if (c.holds) expect(result).toContain('Contract "step-confirmation"')
        else expect(result).toBeUndefined()
      }
    })
  }

  test("the rest of the project's mapping applies: the remapped agent gets its new role's preset too", async () => {
    const h = await start({
      global: lockedForDevelopers,
      project: "version: 1\nroles:\n  agents: { build: team-lead }\n",
    })
    await h.user(S, "go", "build")
    expect(activeIds(await h.status(S))).toEqual([
      "guard-integrity",
      ...PROTECTION_IDS,
      "intent-anchor",
      "emergence-anchor",
      "no-force-push",
    ])
  })

  test("the same locks hold before the first user message names the agent (the global default role)", async () => {
    const h = await start({ global, project: "version: 1\npresets:\n  software-developer: [intent-anchor]\n" })
    const ids = activeIds(await h.status(S))
    expect(ids).toContain("step-confirmation")
    expect(ids).not.toContain("source-anchor") // unlocked ones follow the project's preset
    expect(errorLines(h)).toEqual([
      dropNote(
        "presets.software-developer",
        "leaves out ",
        "step-confirmation",
        'every agent with role "software-developer" under the global file\'s roles',
        "Add it to this preset",
      ),
    ])
  })

  test("one session switching agents gets each agent's locks", async () => {
    const h = await start({
      global: lockedForDevelopers,
      project: "version: 1\nroles:\n  agents: { build: team-lead, plan: team-lead }\n",
    })
    await h.user(S, "go", "plan")
    expect((await h.tool(S, "bash", { command: FORCE_PUSH })) ?? "").not.toContain('Contract "no-force-push"')
    await h.user(S, "go", "build")
    expect(await h.tool(S, "bash", { command: FORCE_PUSH })).toContain('Contract "no-force-push"')
  })

  test("locked in the project file is ignored with a warning; the global file can still change its own contracts", async () => {
    const h = await start({
      global:
        "version: 1\ncontracts:\n  - { id: a, description: d, mode: warn, trigger: { type: tool, tools: [probe] } }\n",
      project: "version: 1\ncontracts:\n  - { id: a, mode: block, locked: true }\n",
    })
    expect(await h.status(S)).toContain(
      `warning: ${PROJECT_FILE}: contracts[0].locked: is honoured only in the global file; it is ignored here`,
    )
    expect(await h.tool(S, "probe", {})).toContain('Contract "a"')
  })
})

describe("roles and presets", () => {
  test("the 12 built-in presets cover the 12 roles and reference existing built-in contracts", () => {
    expect(Object.keys(BUILTIN_PRESETS).sort()).toEqual([...ROLES].sort())
    const builtins = new Set([
      "step-confirmation",
      "source-anchor",
      "intent-anchor",
      "boundary-anchor",
      "emergence-anchor",
      "guard-integrity",
    ])
    for (const preset of Object.values(BUILTIN_PRESETS)) {
      expect(preset.contracts.length).toBeGreaterThan(0)
      for (const id of preset.contracts) expect(builtins.has(id)).toBe(true)
      expect(preset.why.length).toBeGreaterThan(20)
    }
    expect(BUILTIN_PRESETS["software-developer"].contracts).toEqual([
      "step-confirmation",
      "source-anchor",
      "intent-anchor",
    ])
    expect(BUILTIN_PRESETS["software-architect"].contracts).toEqual([
      "boundary-anchor",
      "emergence-anchor",
      "step-confirmation",
    ])
  })

  for (const role of ROLES) {
    test(`preset ${role} loads: guard-integrity + its contracts are active`, async () => {
      const h = await start({ project: `version: 1\nroles:\n  agents: { worker: ${role} }\n` })
      await h.user(S, "hello", "worker")
      const status = await h.status(S)
      expect(status).toContain(`role: ${role} (agent worker)`)
      expect(activeIds(status)).toEqual(["guard-integrity", ...PROTECTION_IDS, ...BUILTIN_PRESETS[role].contracts])
      expect(status).toContain("problems: none")
    })
  }

  test("a file preset replaces the role's built-in preset and may name file contracts", async () => {
    const h = await start({
      project:
        "version: 1\ncontracts:\n  - { id: ship, description: s, mode: info, roles: [nobody], trigger: { type: tool, tools: [probe] } }\npresets:\n  software-developer: [ship, source-anchor]\n",
    })
    expect(activeIds(await h.status(S))).toEqual(["guard-integrity", ...PROTECTION_IDS, "ship", "source-anchor"])
  })

  test("file contracts apply to every role when roles is absent or *, else only to the named roles", async () => {
    const project =
      "version: 1\ncontracts:\n  - { id: all, description: d, mode: warn, trigger: { type: tool, tools: [probe] } }\n  - { id: star, description: d, mode: warn, roles: ['*'], trigger: { type: tool, tools: [probe] } }\n  - { id: qa, description: d, mode: warn, roles: [qa-engineer], trigger: { type: tool, tools: [probe] } }\n  - { id: boundary-anchor, roles: [qa-engineer] }\n"
    const h = await start({ project })
    await h.user("dev", "x", "build")
    await h.user("qa", "x", "qa-engineer")
    expect(activeIds(await h.status("dev"))).toEqual([
      "guard-integrity",
      ...PROTECTION_IDS,
      "step-confirmation",
      "source-anchor",
      "intent-anchor",
      "all",
      "star",
    ])
    expect(activeIds(await h.status("qa"))).toEqual([
      "guard-integrity",
      ...PROTECTION_IDS,
      "intent-anchor",
      "step-confirmation",
      "boundary-anchor",
      "all",
      "star",
      "qa",
    ])
  })

  test("roles.default and roles.agents map opencode agents to roles", async () => {
    const h = await start({
      global:
        "version: 1\nroles:\n  default: consultant\n  agents: { build: devops-engineer, docs: technical-writer }\n",
    })
    for (const [agent, role] of [
      ["build", "devops-engineer"],
      ["docs", "technical-writer"],
      ["plan", "software-architect"],
      ["general", "consultant"],
    ]) {
      await h.user(`s-${agent}`, "x", agent)
      expect(await h.status(`s-${agent}`)).toContain(`role: ${role} (agent ${agent})`)
    }
  })
})

describe("matchers (type: tool)", () => {
  const contracts: [string, string][] = [
    ["eq", "command: { equals: make }"],
    ["eq-num", "n: { equals: 3 }"],
    ["re", "command: { regex: '^git\\s+push' }"],
    ["re-flags", "command: { regex: 'PUSH', flags: i }"],
    ["re-not", "command: { regex: push, not: true }"],
    ["glob", "filePath: { glob: 'src/**/*.ts' }"],
    ["glob-q", "filePath: { glob: 'docs/?.md' }"],
    ["glob-list", "filePath: { glob: ['a/*', 'b/*'] }"],
    ["glob-not", "filePath: { glob: 'src/**', not: true }"],
    ["contains", "command: { contains: force }"],
    ["starts", "command: { startsWith: 'rm ' }"],
    ["exists", "filePath: { exists: true }"],
    ["absent", "filePath: { exists: false }"],
    ["absent-not", "filePath: { exists: false, not: true }"],
    ["nested", "edits.0.filePath: { glob: '**/*.json' }"],
  ]
  const yaml = `version: 1\ncontracts:\n${contracts.map(([id, arg]) => `  - { id: ${id}, description: d, mode: warn, trigger: { type: tool, tools: [probe], args: { ${arg} } } }`).join("\n")}\n  - { id: tool-q, description: d, mode: warn, trigger: { type: tool, tools: ['pr?be'] } }\n  - { id: tool-star, description: d, mode: warn, trigger: { type: tool, tools: ['mcp_*'] } }\n`
  const cases: [string, string, unknown, string[]][] = [
    ["equals", "probe", { command: "make" }, ["eq", "re-not", "absent"]],
    ["equals, number as text", "probe", { n: "3" }, ["eq-num", "absent"]],
    ["equals, number", "probe", { n: 3 }, ["eq-num", "absent"]],
    ["equals, no match", "probe", { n: 4 }, ["absent"]],
    ["regex and contains", "probe", { command: "git push --force" }, ["re", "re-flags", "contains", "absent"]],
    ["regex flags", "probe", { command: "GIT PUSH" }, ["re-flags", "re-not", "absent"]],
    ["startsWith", "probe", { command: "rm -rf x" }, ["re-not", "starts", "absent"]],
    ["glob **", "probe", { filePath: "src/a/b/c.ts" }, ["glob", "exists", "absent-not"]],
    ["glob ** matches zero dirs", "probe", { filePath: "src/c.ts" }, ["glob", "exists", "absent-not"]],
    [
      "glob absolute path inside the project",
      "probe",
      { filePath: "PROJECT/src/c.ts" },
      ["glob", "exists", "absent-not"],
    ],
    ["glob ?", "probe", { filePath: "docs/a.md" }, ["glob-q", "glob-not", "exists", "absent-not"]],
    ["glob ? is one character", "probe", { filePath: "docs/ab.md" }, ["glob-not", "exists", "absent-not"]],
    ["glob list", "probe", { filePath: "b/x" }, ["glob-list", "glob-not", "exists", "absent-not"]],
    ["glob * stays in its segment", "probe", { filePath: "a/x/y" }, ["glob-not", "exists", "absent-not"]],
    ["nested dot path", "probe", { edits: [{ filePath: "cfg/x.json" }] }, ["absent", "nested"]],
    ["missing arguments make matchers false (not included), except exists: false", "probe", {}, ["absent"]],
    ["a non-matching tool fires nothing", "other", { command: "make" }, []],
    ["tool glob *", "mcp_github_push", {}, ["tool-star"]],
  ]
  for (const [name, tool, args, expected] of cases) {
    test(`${name}: ${expected.join(", ") || "none"}`, async () => {
      const h = await start({ project: yaml })
      expect(await h.status(S)).toContain("problems: none")
      const fixed = JSON.parse(JSON.stringify(args).replace("PROJECT", h.dirs.project))
      const { output } = await h.run(S, tool, fixed, "ok")
      const fired = [...(output ?? "").matchAll(/WARN ([a-z0-9-]+):/g)].map((m) => m[1])
      const withToolQ = tool === "probe" ? [...expected, "tool-q"] : expected
      expect(fired.sort()).toEqual(withToolQ.sort())
    })
  }

  test("unlessSeen on a user tool contract", async () => {
    const h = await start({
      project:
        "version: 1\ncontracts:\n  - { id: ticket, description: Name the ticket., mode: block, trigger: { type: tool, tools: [bash], args: { command: { startsWith: 'git commit' } }, unlessSeen: 'JIRA-\\d+' } }\n",
    })
    expect(await h.tool(S, "bash", { command: "git commit -m x" })).toContain('Contract "ticket"')
    await h.user(S, "this is for JIRA-42")
    expect(await h.tool(S, "bash", { command: "git commit -m x" })).toBeUndefined()
  })

  test("a regex runs on at most 10000 characters of input", async () => {
    const h = await start({
      project:
        "version: 1\ncontracts:\n  - { id: tail, description: d, mode: block, trigger: { type: tool, tools: [probe], args: { text: { regex: 'MIDDLE' } } } }\n",
    })
    const long = `${"x".repeat(20_000)}MIDDLE${"x".repeat(20_000)}`
    expect(await h.tool(S, "probe", { text: long })).toBeUndefined() // beyond the cap: not seen
    expect(await h.tool(S, "probe", { text: `${"x".repeat(100)}MIDDLE` })).toContain("tail")
  })
})

describe("regexes that can backtrack exponentially are refused", () => {
  // [regex, the kind reported or null for accepted]. The check is static and simple (see regexHazard): these rows
  // are what it promises, including the harmless shapes it must leave alone.
  const cases: [string, string | null][] = [
    ["(a+)+$", "nested quantifier in /(a+)+/"],
    ["^(\\w+\\s?)*$", "nested quantifier in /(\\w+\\s?)*/"],
    ["(?:x*y)+", "nested quantifier in /(?:x*y)+/"],
    ["(a+){2,5}", "nested quantifier in /(a+){2,5}/"],
    ["((ab)+c)+", "nested quantifier in /((ab)+c)+/"],
    ["^(a|a)*$", "overlapping alternation in /(a|a)*/"],
    ["^(a|aa)+$", "overlapping alternation in /(a|aa)+/"],
    ["(x|)+", "overlapping alternation in /(x|)+/"],
    ["^(a?){25}a{25}$", "large bounded repeat of an optional item in /(a?){25}/"],
    ["(b*c){12}", "large bounded repeat of an optional item in /(b*c){12}/"],
    ["\\bgit\\s+push\\b.*\\s(--force|-f)\\b", null],
    ["(\\d+\\.){3}\\d+", null], // a fixed count of a group with a quantifier: polynomial, and common
    ["(https?|ftp)://\\S+", null],
    ["(?:foo|bar)+", null],
    ["(a?){9}", null], // below the bounded-repeat limit
    ["[(a+)]+", null], // a class, not a group
    ["\\(a+\\)+", null], // escaped parentheses
  ]
  for (const [regex, kind] of cases) {
    test(`${kind ? "refused" : "accepted"}: /${regex}/`, async () => {
      const h = await start({
        project: `version: 1\ncontracts:\n  - { id: r, description: d, mode: block, trigger: { type: tool, tools: [probe], args: { text: { regex: ${JSON.stringify(regex)} } } } }\n`,
      })
      const status = await h.status(S)
      if (kind) {
        expect(status).toContain(`error: ${PROJECT_FILE}: contracts[0].trigger.args.text.regex: ${kind} (`)
        expect(status).toContain("The regex is refused: capping its input at 10000 characters does not bound this")
        expect(activeIds(status)).not.toContain("r")
      } else {
        expect(status).toContain("problems: none")
        expect(activeIds(status)).toContain("r")
      }
    })
  }

  test("the same check covers pattern, unless, unlessSeen and settings.confirmPattern", async () => {
    const project = [
      "version: 1",
      "settings: { confirmPattern: '^(ok|okay)+$' }",
      "contracts:",
      "  - { id: p, description: d, mode: info, trigger: { type: message, pattern: '(a+)+b' } }",
      "  - { id: u, description: d, mode: info, trigger: { type: message, unless: '(a|aa)*c' } }",
      "  - { id: s, description: d, mode: warn, trigger: { type: tool, tools: [write], unlessSeen: '(x?){30}' } }",
      "",
    ].join("\n")
    const h = await start({ project })
    const status = await h.status(S)
    for (const line of [
      "contracts[0].trigger.pattern: nested quantifier",
      "contracts[1].trigger.unless: overlapping alternation",
      "contracts[2].trigger.unlessSeen: large bounded repeat",
      "settings.confirmPattern: overlapping alternation",
    ])
      expect(status).toContain(`error: ${PROJECT_FILE}: ${line}`)
    for (const id of ["p", "u", "s"]) expect(activeIds(status)).not.toContain(id)
    // the refused confirmPattern is not installed: any user message still confirms
    for (let i = 1; i <= 3; i++) await h.tool(S, "edit", edit(i))
    await h.user(S, "go on")
    expect(await h.tool(S, "edit", edit(4))).toBeUndefined()
  })
})

describe("keys written twice in one mapping", () => {
  // [what, YAML, expected warnings as "path: line a and b"]
  const cases: [string, string, string[]][] = [
    ["top level", "version: 1\nsettings: { maxOverrides: 2 }\nsettings: { maxOverrides: 5 }\n", ["settings: 2 and 3"]],
    [
      "in a contract",
      "version: 1\ncontracts:\n  - id: a\n    description: d\n    mode: block\n    trigger: { type: tool, tools: [probe] }\n    mode: info\n",
      ["contracts[0].mode: 5 and 7"],
    ],
    [
      "in the second contract, compact list",
      "version: 1\ncontracts:\n- id: a\n  description: d\n  mode: warn\n  trigger: { type: tool, tools: [probe] }\n- id: b\n  description: d\n  description: e\n  mode: warn\n  trigger: { type: tool, tools: [probe] }\n",
      ["contracts[1].description: 8 and 9"],
    ],
    [
      "nested mapping",
      "version: 1\nroles:\n  agents:\n    build: qa-engineer\n    plan: software-architect\n    build: educator\n",
      ["roles.agents.build: 4 and 6"],
    ],
    [
      "same key in sibling mappings is fine",
      "version: 1\ncontracts:\n  - id: a\n    description: d\n    mode: warn\n    trigger: { type: tool, tools: [probe] }\n  - id: b\n    description: d\n    mode: warn\n    trigger: { type: tool, tools: [probe] }\n",
      [],
    ],
    [
      "block scalar lines are text",
      "version: 1\ncontracts:\n  - id: a\n    description: |\n      mode: x\n      mode: y\n    mode: warn\n    trigger: { type: tool, tools: [probe] }\n",
      [],
    ],
    ["quoted and plain spelling are one key", 'version: 1\n"version": 1\n', ["version: 1 and 2"]],
  ]
  for (const [what, yaml, expected] of cases) {
    test(what, async () => {
      const h = await start({ project: yaml })
      const found = (await h.status(S)).split("\n").filter((line) => line.includes("is written twice"))
      expect(found.length).toBe(expected.length)
      for (const want of expected) {
        const [path, lines] = want.split(": ")
        const [a, b] = lines.split(" and ")
        expect(found).toContain(
          `  warning: ${PROJECT_FILE}: ${path}: key "${path
            .split(".")
            .pop()!
            .replace(
              /\[\d+\]$/,
              "",
            )}" is written twice in one mapping (lines ${a} and ${b}); YAML keeps only the last one, so line ${a} has no effect. Delete one of them`,
        )
      }
    })
  }
})

describe("message and state triggers", () => {
  test("message: pattern, unless and minLength; warn and info toast the user; block becomes warn", async () => {
    const project =
      "version: 1\npresets: { software-developer: [] }\ncontracts:\n  - { id: deploy, description: Deploys need a ticket., mode: block, trigger: { type: message, pattern: '\\bdeploy\\b', unless: 'TICKET-\\d+', flags: i } }\n  - { id: long, description: Keep it short., mode: info, trigger: { type: message, unless: '^$', minLength: 60 } }\n"
    const h = await start({ project })
    await h.user(S, "Deploy to prod now")
    await h.user(S, "deploy TICKET-7 to prod")
    await h.user(S, "x".repeat(61))
    expect(await h.status(S)).toContain("contracts[0].trigger.type: a user message cannot be blocked")
    expect(
      h.toasts.filter((t) => t.message.startsWith("semantic-anchors: tip:")).map((t) => [t.message, t.variant]),
    ).toEqual([
      ["semantic-anchors: tip: Deploys need a ticket. (deploy)", "warning"],
      ["semantic-anchors: tip: Keep it short. (long)", "info"],
    ])
  })

  test("state: every N matching calls pass, the next one fires until the human confirms", async () => {
    const h = await start({
      project:
        "version: 1\npresets: { software-developer: [] }\ncontracts:\n  - { id: ask-often, description: Ask every 2 commands., mode: warn, trigger: { type: state, every: 2, tools: [bash] } }\n",
    })
    const outputs: string[] = []
    for (let i = 0; i < 4; i++) outputs.push((await h.run(S, "bash", { command: "npm run build" }, "ok")).output!)
    // The warn's note reaches the model once per user turn: on the first call that fires it.
    expect(outputs.map((o) => o.includes("WARN ask-often"))).toEqual([false, false, true, false])
    expect((await h.run(S, "edit", edit(1), "ok")).output).toBe("ok") // not a counted tool
    expect((await h.run(S, "bash", { command: "ls" }, "ok")).output).toBe("ok") // read-only: not a changing step
    await h.user(S, "fine")
    expect((await h.run(S, "bash", { command: "npm run build" }, "ok")).output).toBe("ok")
  })
})

describe("the JSON Schema is in step with the validator", () => {
  const schema = JSON.parse(readFileSync(join(import.meta.dir, "../opencode-semantic-anchors.schema.json"), "utf8"))
  const keys = (node: any) => Object.keys(node.properties).sort()
  const sorted = (list: readonly string[]) => [...list].sort()

  test("the same keys at every level, and no others", () => {
    expect(keys(schema)).toEqual(sorted(SCHEMA_KEYS.top))
    expect(keys(schema.properties.settings)).toEqual(sorted(SCHEMA_KEYS.settings))
    expect(keys(schema.properties.roles)).toEqual(sorted(SCHEMA_KEYS.roles))
    expect(keys(schema.definitions.contract)).toEqual(sorted(SCHEMA_KEYS.contract))
    expect(keys(schema.definitions.trigger)).toEqual(sorted(SCHEMA_KEYS.trigger))
    expect(keys(schema.definitions.matcher)).toEqual(sorted(SCHEMA_KEYS.matcher))
    expect(keys(schema.definitions.examples)).toEqual(sorted(SCHEMA_KEYS.examples))
    expect(keys(schema.definitions.example)).toEqual(sorted(SCHEMA_KEYS.example))
    for (const node of [
      schema,
      schema.properties.settings,
      schema.properties.roles,
      schema.definitions.contract,
      schema.definitions.trigger,
      schema.definitions.matcher,
      schema.definitions.examples,
      schema.definitions.example,
    ]) {
      expect(node.additionalProperties).toBe(false)
    }
  })

  test("the same enums, matcher kinds, id pattern and anchor ids", () => {
    expect(schema.definitions.contract.properties.mode.enum).toEqual([...SCHEMA_KEYS.modes])
    expect(schema.definitions.trigger.properties.type.enum).toEqual([...SCHEMA_KEYS.triggerTypes])
    expect(schema.definitions.matcher.oneOf.map((alt: any) => alt.required[0])).toEqual([...SCHEMA_KEYS.matcherKinds])
    expect(schema.definitions.contract.properties.id.pattern).toBe("^[a-z0-9-]+$")
    expect(sorted(schema.definitions.contract.properties.anchorRefs.items.enum)).toEqual(sorted([...ANCHOR_IDS]))
    expect(ANCHOR_IDS.size).toBe(188)
    const catalog = JSON.parse(
      readFileSync(join(import.meta.dir, "fixtures/semantic-anchors/catalog-ids.json"), "utf8"),
    )
    expect(sorted([...ANCHOR_IDS])).toEqual(sorted(catalog))
  })
})

// ---------------------------------------------------------------------------------------------------------------
// The contract reference (docs/contracts.md) and the README's semantic-anchors section: every sample and table in
// them is produced or checked here.
// ---------------------------------------------------------------------------------------------------------------

const section = readFileSync(join(import.meta.dir, "../docs/contracts.md"), "utf8")
const readme = readFileSync(join(import.meta.dir, "../README.md"), "utf8")
const readmeSection = readme.slice(
  readme.indexOf("<!-- semantic-anchors:begin -->"),
  readme.indexOf("<!-- semantic-anchors:end -->"),
)
const schemaExample = (text: string) => /```yaml\n(# yaml-language-server[\s\S]*?)```/.exec(text)?.[1] ?? ""
const exampleYaml = schemaExample(section)
const schemaJson = JSON.parse(readFileSync(join(import.meta.dir, "../opencode-semantic-anchors.schema.json"), "utf8"))

/** Enough of JSON Schema draft-07 for our schema: returns the paths that fail. */
function schemaErrors(value: unknown, node: any, path = "", root = node): string[] {
  if (node.$ref)
    return schemaErrors(
      value,
      node.$ref
        .split("/")
        .slice(1)
        .reduce((n: any, k: string) => n[k], root),
      path,
      root,
    )
  const errors: string[] = []
  const type = Array.isArray(value)
    ? "array"
    : value === null
      ? "null"
      : Number.isInteger(value)
        ? "integer"
        : typeof value
  const types = node.type === undefined ? undefined : [node.type].flat()
  if (types && !types.some((t: string) => t === type || (t === "number" && type === "integer")))
    return [`${path}: type ${type}`]
  if ("const" in node && value !== node.const) errors.push(`${path}: const`)
  if (node.enum && !node.enum.includes(value)) errors.push(`${path}: enum`)
  if (typeof value === "string") {
    if (node.minLength !== undefined && value.length < node.minLength) errors.push(`${path}: minLength`)
    if (node.pattern && !new RegExp(node.pattern).test(value)) errors.push(`${path}: pattern`)
  }
  if (typeof value === "number") {
    if (node.minimum !== undefined && value < node.minimum) errors.push(`${path}: minimum`)
    if (node.maximum !== undefined && value > node.maximum) errors.push(`${path}: maximum`)
  }
  if (Array.isArray(value)) {
    if (node.minItems !== undefined && value.length < node.minItems) errors.push(`${path}: minItems`)
    if (node.items) value.forEach((item, i) => errors.push(...schemaErrors(item, node.items, `${path}[${i}]`, root)))
  }
  if (type === "object") {
    const object = value as Record<string, unknown>
    for (const key of node.required ?? []) if (!(key in object)) errors.push(`${path}.${key}: required`)
    for (const [key, item] of Object.entries(object)) {
      if (node.properties?.[key]) errors.push(...schemaErrors(item, node.properties[key], `${path}.${key}`, root))
      else if (node.additionalProperties === false) errors.push(`${path}.${key}: additional`)
      else if (typeof node.additionalProperties === "object")
        errors.push(...schemaErrors(item, node.additionalProperties, `${path}.${key}`, root))
    }
  }
  if (node.oneOf && node.oneOf.filter((alt: any) => schemaErrors(value, alt, path, root).length === 0).length !== 1)
    errors.push(`${path}: oneOf`)
  if (node.anyOf && !node.anyOf.some((alt: any) => schemaErrors(value, alt, path, root).length === 0))
    errors.push(`${path}: anyOf`)
  for (const alt of node.allOf ?? []) {
    if (alt.if && schemaErrors(value, alt.if, path, root).length === 0)
      errors.push(...schemaErrors(value, alt.then, path, root))
    else if (!alt.if) errors.push(...schemaErrors(value, alt, path, root))
  }
  return errors
}

describe("docs/contracts.md and the README's semantic-anchors section are true", () => {
  test.each([
    ["docs/contracts.md: the complete example", section],
    ["README: the short example", readmeSection],
  ])("%s loads (as the global file) without a single problem, and matches the JSON Schema", async (_, text) => {
    const yaml = schemaExample(text)
    expect(yaml).toContain("version: 1")
    const h = await start({ global: yaml })
    expect(await h.status(S)).toContain("problems: none")
    expect(schemaErrors(Bun.YAML.parse(yaml), schemaJson)).toEqual([])
  })

  // A block that starts with `contracts:` is one a user copies into a file as it is (the command rules, the
  // examples): it must load with no problem, its examples holding, and match the schema.
  const contractBlocks = (text: string) =>
    [...text.matchAll(/```yaml\n(contracts:\n[\s\S]*?)```/g)].map((match) => `version: 1\n${match[1]}`)
  test.each([
    ...contractBlocks(readmeSection).map((yaml, i) => [`README: contracts block ${i + 1}`, yaml]),
    ...contractBlocks(section).map((yaml, i) => [`docs/contracts.md: contracts block ${i + 1}`, yaml]),
  ])("%s loads without a single problem and matches the JSON Schema", async (_, yaml) => {
    const h = await start({ global: yaml })
    expect(await h.status(S)).toContain("problems: none")
    expect(schemaErrors(Bun.YAML.parse(yaml), schemaJson)).toEqual([])
  })

  test("the README shows at least one command rule a user can copy", () => {
    expect(contractBlocks(readmeSection).some((yaml) => yaml.includes("runs:"))).toBe(true)
  })

  test("the schema rejects what the validator calls a type or key error (a sample of the corpus)", () => {
    for (const name of [
      "02-top-level-list",
      "04-version-2",
      "06-unknown-top-key",
      "07-contracts-not-list",
      "10-id-bad-characters",
      "13-mode-typo",
      "15-trigger-type-typo",
      "17-regex-flag-g",
      "18-matcher-two-kinds",
      "19-matcher-no-kind",
      "21-exists-not-boolean",
      "23-state-every-zero",
      "24-message-no-pattern",
      "26-tools-not-list",
      "27-contract-key-typo",
      "28-anchor-ref-unknown",
      "30-max-overrides-negative",
      "32-agent-role-not-string",
      "44-roles-empty",
      "46-equals-object",
      "48-matcher-key-typo",
      "51-json-wrong-type",
      "54-examples-not-mapping",
      "55-example-args-not-mapping",
    ]) {
      const parsed = Bun.YAML.parse(readFileSync(join(CORPUS, `${name}.yaml`), "utf8"))
      expect({ name, rejected: schemaErrors(parsed, schemaJson).length > 0 }).toEqual({ name, rejected: true })
    }
  })

  test("the example's contracts behave as its comments say", async () => {
    const h = await start({ global: exampleYaml })
    await h.user("dev", "start working on the parser, please", "build")
    await h.user("ops", "start", "devops-engineer")
    await h.user("arch", "start", "plan")
    // no-force-push: every role
    for (const s of ["dev", "ops", "arch"])
      expect(await h.tool(s, "bash", { command: "git push -f origin main" })).toContain('Contract "no-force-push"')
    // ticket-in-commit warns until a ticket id was seen
    expect((await h.run("dev", "bash", { command: "git commit -m x" })).output).toContain("WARN ticket-in-commit")
    await h.user("dev", "this is ABC-12")
    expect((await h.run("dev", "bash", { command: "git commit -m x" })).output).not.toContain("ticket-in-commit")
    // no-secrets-dir, for patch tools too
    expect(await h.tool("ops", "read", { filePath: "secrets/prod.env" })).toContain("no-secrets-dir")
    expect(await h.tool("ops", "write", { filePath: "deploy/key.pem" })).toContain("no-secrets-dir")
    // deploy-needs-ticket: a tip
    await h.user("ops", "please deploy the service now")
    expect(h.toasts.map((t) => t.message)).toContain(
      "semantic-anchors: tip: Name the ticket of a deploy. (deploy-needs-ticket)",
    )
    // ask-every-5-commands: team-lead only
    await h.user("lead", "start", "team-lead")
    for (let i = 0; i < 5; i++) expect(await h.tool("lead", "bash", { command: "make" })).toBeUndefined()
    expect(await h.tool("lead", "bash", { command: "ls" })).toBeUndefined() // looking around is not counted
    expect(await h.tool("lead", "bash", { command: "make" })).toContain("ask-every-5-commands")
    expect(activeIds(await h.status("ops"))).not.toContain("ask-every-5-commands")
    // source-anchor now blocks; emergence-anchor is off
    await h.user("dev", "next")
    expect(await h.tool("dev", "write", { filePath: "src/a.ts" })).toContain('Contract "source-anchor"')
    expect(activeIds(await h.status("arch"))).toEqual([
      "guard-integrity",
      ...PROTECTION_IDS,
      "boundary-anchor",
      "step-confirmation",
      "no-force-push",
      "ticket-in-commit",
      "no-secrets-dir",
      "deploy-needs-ticket",
    ])
  })

  test("the presets table is BUILTIN_PRESETS", () => {
    const rows = [...section.matchAll(/^\| ([a-z-]+) \| ([a-z-, ]+) \| (.+) \|$/gm)].filter((m) =>
      (ROLES as readonly string[]).includes(m[1]),
    )
    expect(rows.map((m) => m[1])).toEqual([...ROLES])
    for (const [, role, contracts, why] of rows) {
      const preset = BUILTIN_PRESETS[role as (typeof ROLES)[number]]
      expect(contracts.split(", ")).toEqual(preset.contracts)
      expect(why).toBe(preset.why)
    }
  })

  test.each([
    ["docs/contracts.md", section],
    ["README", readmeSection],
  ])("%s: the built-in table lists the built-ins with their modes", async (_, text) => {
    const rows = [...text.matchAll(/^\| `([a-z-]+)` \| (block|warn|info)\b/gm)].map((m) => `${m[2]} ${m[1]}`)
    const h = await start({
      project:
        "version: 1\npresets:\n  software-developer: [step-confirmation, source-anchor, intent-anchor, boundary-anchor, emergence-anchor]\n",
    })
    const status = await h.status(S)
    const listed = [...status.matchAll(/^ {2}(block|warn|info) +([a-z-]+)/gm)].map((m) => `${m[1]} ${m[2]}`)
    expect(rows).toEqual(listed)
  })

  test("the block, warn, tip and bypass samples are what the plugin produces", async () => {
    const h = await start()
    for (let i = 1; i <= 3; i++) await h.tool(S, "edit", edit(i))
    const block = (await h.tool(S, "edit", edit(4)))!
    await h.user(S, "ok")
    const warn = (await h.run(S, "write", { filePath: "src/a.ts", content: "" }, "Wrote file successfully.")).output!
    await h.user(S, "refactor the whole module and rename every function in it please")
    const tip = h.toasts.find((t) => t.message.startsWith("semantic-anchors: tip:"))!.message
    const bypass = await h.command(S, "bypass continuing intentional edit")
    for (const sample of [block, warn, tip, bypass]) expect(section).toContain("```\n" + sample + "\n```")
    expect(readmeSection).toContain("```\n" + block + "\n```")
  })

  test("What a lock covers: each report in the table and the log sample are what the plugin produces", async () => {
    const lockSection = section.slice(section.indexOf("## What a lock covers"), section.indexOf("## Built-in"))
    const HOME_LABEL = "~/.config/opencode/opencode-semantic-anchors.yaml"
    const locked = (roles: string) =>
      `version: 1\ncontracts:\n  - id: no-force-push\n    description: Never rewrite shared history.\n    mode: block\n    locked: true\n${roles}    trigger: { type: tool, tools: [bash], args: { command: { contains: push } } }\n  - { id: step-confirmation, locked: true }\n`
    const scenarios = [
      { global: locked(""), project: "version: 1\ncontracts:\n  - { id: no-force-push, enabled: false }\n" },
      { project: "version: 1\ncontracts:\n  - { id: guard-integrity, enabled: false }\n" },
      {
        global: locked("    roles: [software-developer]\n"),
        project: "version: 1\nroles:\n  agents: { build: team-lead }\n",
      },
      { global: locked("    roles: [software-developer]\n"), project: "version: 1\nroles:\n  default: team-lead\n" },
      { global: locked(""), project: "version: 1\npresets:\n  software-developer: []\n" },
    ]
    const lines: string[] = []
    for (const files of scenarios) {
      const h = await start(files)
      for (const l of h.logs.filter((l) => l.level === "error"))
        lines.push(l.message.replace(h.dirs.globalFile, HOME_LABEL).replace(`semantic-anchors: ${PROJECT_FILE}: `, ""))
    }
    // The table's third column: a full text, or a pattern where "..." stands for the rest and <agent>, <role> for names.
    const cells = [...lockSection.matchAll(/ \| `((?:contracts\[0\]|roles\.|presets\.)[^`]*)` \|$/gm)].map((m) => m[1])
    expect(cells.length).toBe(5)
    for (const cell of cells) {
      const pattern = cell
        .split("...")
        .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&").replace(/<agent>|<role>/g, "[a-z-]+"))
        .join(".*")
      expect({ cell, matched: lines.some((line) => new RegExp(`^${pattern}$`).test(line)) }).toEqual({
        cell,
        matched: true,
      })
    }
    const sample = /```\n(semantic-anchors: [^\n]*roles\.agents\.build[^\n]*)\n```/.exec(lockSection)?.[1]
    expect(sample).toBeDefined()
    expect(lines.map((line) => `semantic-anchors: ${PROJECT_FILE}: ${line}`)).toContain(sample!)
  })

  test("the problem samples and the corpus size are real", () => {
    const samples = [...section.matchAll(/^(error|warning): \.opencode\/opencode-semantic-anchors\.yaml: (.+)$/gm)]
    expect(samples.length).toBe(3) // two in Reference, one in Authoring contracts
    const expectations = corpus.map((name) => expectation(name))
    for (const [, severity, text] of samples)
      expect(expectations.some((e) => e.severity === severity && e.text === text)).toBe(true)
    expect(section).toContain(`holds ${corpus.length} broken files`)
  })
})

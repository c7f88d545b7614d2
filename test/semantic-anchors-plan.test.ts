// semantic-anchors.ts: the per-tool plans and their screens (one regex test that rules out many contracts' matchers
// on the same argument) decide exactly as each contract would alone. Table-driven, through server() and the hooks.
import { describe, expect, test } from "bun:test"
import { type Harness, start } from "./fixtures/semantic-anchors/harness"

const S = "ses_plan"

/** Contracts on bash's `command`: screened regexes (flags i, m, s), and ones a screen must leave alone. */
const COMMAND_MATCHERS: Record<string, string> = {
  "r-deploy": `{ regex: '\\bdeploy\\s+--(prod|force)\\b', flags: i }`,
  "r-push": `{ regex: '^git push', flags: m }`,
  "r-rm": `{ regex: 'rm\\s+-rf\\s+/' }`,
  "r-dot": `{ regex: 'BEGIN.END', flags: s }`,
  "r-alt": `{ regex: 'drop|truncate' }`,
  "r-backref": `{ regex: '(\\w+) \\1' }`,
  "r-named": `{ regex: '(?<verb>curl|wget) http' }`,
  "r-not": `{ regex: 'echo', not: true }`,
  "c-contains": `{ contains: "sudo " }`,
}

/** Contracts on `filePath`: globs with `**` in every place, `?`, no wildcard, and a negated glob. */
const PATH_MATCHERS: Record<string, string> = {
  "g-secrets": `{ glob: ["secrets/**"] }`,
  "g-key": `{ glob: ["**/*.key", "**/id_rsa"] }`,
  "g-middle": `{ glob: "a/**/b.txt" }`,
  "g-env": `{ glob: "*.env" }`,
  "g-qmark": `{ glob: "config/?.yml" }`,
  "g-exact": `{ glob: "Makefile" }`,
  "g-all-ts": `{ glob: "src/**/*.ts" }`,
  "g-not-docs": `{ glob: "docs/**", not: true }`,
}

function contractYaml(id: string, tools: string, key: string, matcher: string): string {
  return [
    `  - id: ${id}`,
    `    description: Plan test contract ${id}.`,
    "    mode: block",
    "    trigger:",
    "      type: tool",
    `      tools: [${tools}]`,
    "      args:",
    `        ${key}: ${matcher}`,
  ].join("\n")
}

function fileOf(contracts: string[]): string {
  // step-confirmation off, so that only the test's contracts block
  return `version: 1\ncontracts:\n${contracts.join("\n")}\n  - id: step-confirmation\n    enabled: false\n`
}

const ALL = [
  ...Object.entries(COMMAND_MATCHERS).map(([id, m]) => contractYaml(id, "bash", "command", m)),
  ...Object.entries(PATH_MATCHERS).map(([id, m]) => contractYaml(id, "read, edit", "filePath", m)),
  contractYaml("two-args", "edit", "filePath", `{ glob: "**/*.sql" }`) +
    "\n        newString: { regex: 'DROP', flags: i }",
]

/** The ids a call was blocked by; [] when it may run. `<project>` in a path is the harness's project directory. */
async function firedBy(h: Harness, tool: string, args: Record<string, string>): Promise<string[]> {
  const inProject = Object.fromEntries(
    Object.entries(args).map(([key, value]) => [key, value.replace("<project>", h.dirs.project)]),
  )
  const blocked = await h.tool(S, tool, inProject)
  return blocked ? [...blocked.matchAll(/^Contract "([^"]+)"/gm)].map((m) => m[1]) : []
}

const COMMANDS = [
  "npm test && git diff --stat",
  "echo hi",
  "DEPLOY   --PROD now",
  "ls\ngit push origin main",
  "rm -rf /tmp/x",
  "cat BEGIN\nEND",
  "psql -c 'truncate users'",
  "echo echo twice twice",
  "wget http://x",
  "sudo ls",
  "",
]

const PATHS = [
  "secrets/a.txt",
  "<project>/secrets/deep/b",
  "src/id_rsa",
  "home/.ssh/k.key",
  "x.key",
  "a/b.txt",
  "a/x/y/b.txt",
  "prod.env",
  "dir/prod.env",
  "config/a.yml",
  "config/ab.yml",
  "Makefile",
  "src/Makefile",
  "src/app.ts",
  "src/a/b/c.ts",
  "<project>/docs/guide.md",
  "db/migrate.sql",
  "/elsewhere/secrets/x",
]

describe("tool plans and screens", () => {
  test("many contracts on one argument fire exactly as each alone would (bash command, read and edit paths)", async () => {
    const all = await start({ project: fileOf(ALL) })
    await all.user(S, "Source: https://example.com so that the test runs")
    const alone = new Map<string, Harness>()
    for (const contract of ALL) {
      const id = /id: (\S+)/.exec(contract)![1]
      const h = await start({ project: fileOf([contract]) })
      await h.user(S, "Source: https://example.com so that the test runs")
      alone.set(id, h)
    }
    const calls: [string, Record<string, string>][] = [
      ...COMMANDS.map((command): [string, Record<string, string>] => ["bash", { command }]),
      ...PATHS.flatMap((filePath): [string, Record<string, string>][] => [
        ["read", { filePath }],
        ["edit", { filePath, oldString: "a", newString: "drop table" }],
      ]),
    ]
    let fired = 0
    for (const [tool, args] of calls) {
      const expected: string[] = []
      for (const [id, h] of alone) if ((await firedBy(h, tool, args)).includes(id)) expected.push(id)
      const got = await firedBy(all, tool, args)
      expect({ tool, args, fired: got.sort() }).toEqual({ tool, args, fired: expected.sort() })
      fired += got.length
    }
    // the table is not trivial: many calls fire several contracts, a few fire none
    expect(fired).toBeGreaterThan(40)
  })

  test("a plan is per tool name: a contract for `*shell*` tools applies to an MCP tool of that name, not to bash", async () => {
    const h = await start({ project: fileOf([contractYaml("shellish", '"*shell*"', "cmd", `{ regex: "rm" }`)]) })
    await h.user(S, "so that")
    expect(await firedBy(h, "bash", { cmd: "rm x" })).toEqual([])
    expect(await firedBy(h, "mcp_shell_run", { cmd: "rm x" })).toEqual(["shellish"])
    expect(await firedBy(h, "mcp_shell_run", { cmd: "ls" })).toEqual([])
  })

  test("plans follow a reload: a contract added to the file applies to a tool already planned", async () => {
    const h = await start({ project: fileOf([contractYaml("one", "bash", "command", `{ contains: "one" }`)]) })
    await h.user(S, "so that")
    expect(await firedBy(h, "bash", { command: "two" })).toEqual([])
    h.writeProject(fileOf([contractYaml("two", "bash", "command", `{ contains: "two" }`)]))
    await h.command(S, "reload")
    expect(await firedBy(h, "bash", { command: "two" })).toEqual(["two"])
  })
})

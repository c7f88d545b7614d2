// The default protection (docs/contracts.md, "Default protection"): with no config file, every role is stopped before
// it destroys what a person cannot get back, however the command is spelled, and its near misses run. Table-driven,
// through server() and tool.execute.before like the other suites; each row is a fresh session (no step count).
import { describe, expect, test } from "bun:test"
import { mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { PROTECTION_IDS, buildConfig, formatProblem, resolvePaths } from "../semantic-anchors"
import { type Harness, start } from "./fixtures/semantic-anchors/harness"
import { DISKS, FILES, REMOTE, ROWS } from "./fixtures/semantic-anchors/protection-rows"
import { readyRuleYaml } from "./fixtures/semantic-anchors/ready-rules"

let session = 0
/**
 * The protection family that blocks a bash call in a fresh session (the one a row expects, when it is among those
 * that block: `xargs rm -rf /` is protect-files' and protect-local-work's), "runs" when none does.
 */
async function verdict(h: Harness, command: string, workdir?: string, expected?: string): Promise<string> {
  const message = await h.tool(`ses_p${++session}`, "bash", workdir ? { command, workdir } : { command })
  if (message === undefined) return "runs"
  if (expected && message.includes(`Contract "${expected}"`)) return expected
  const family = PROTECTION_IDS.find((id) => message.includes(`Contract "${id}"`))
  return family ?? `other: ${message.split("\n")[0]}`
}

/** The files the rows' discards name, there to lose (a discard of paths that are not there loses nothing). */
async function withNamedFiles(h: Harness): Promise<Harness> {
  for (const dir of ["src", "build", "sub"]) mkdirSync(join(h.dirs.project, dir), { recursive: true })
  writeFileSync(join(h.dirs.project, "src/app.ts"), "export {}\n")
  return h
}

describe("with no config: the families block, near misses run", () => {
  let h: Harness
  test.each(ROWS)("%s: %p -> %s", async (_family, command, expected) => {
    h ??= await withNamedFiles(await start())
    expect(await verdict(h, command, undefined, expected)).toBe(expected)
  })
})

describe("paths resolve through the bash tool's workdir", () => {
  test("workdir /etc makes `rm -rf nginx` a delete outside the project; workdir sub keeps it inside", async () => {
    const h = await start()
    expect(await verdict(h, "rm -rf nginx", "/etc")).toBe(FILES)
    expect(await verdict(h, "rm -rf build", "sub")).toBe("runs")
  })
})

describe("a block is a block: the message, the toast, the human-only bypass", () => {
  test("the first line names the rule for the person, Why now names the command, the toast names the rule", async () => {
    const h = await start()
    h.toasts.length = 0
    const text = (await h.tool("ses_b", "bash", { command: "cd app && env X=1 git push -f origin main" }))!
    const lines = text.split("\n")
    expect(lines[0]).toBe(
      "semantic-anchors blocked this bash call (rule protect-remote-history: Never overwrite or delete pushed history).",
    )
    expect(lines).toContain("Why now: runs `git push -f origin main` (after env).")
    expect(text).toContain("No user message lifts protect-remote-history")
    expect(text).toContain("/anchor bypass <reason> (3 of 3 overrides left)")
    expect(h.toasts).toEqual([
      {
        message:
          "semantic-anchors: blocked a bash call: Never overwrite or delete pushed history (protect-remote-history). The agent was told why; /anchor bypass <reason> lets one call through.",
        variant: "warning",
      },
    ])
  })

  test("a user message does not lift it; /anchor bypass lets exactly one call through", async () => {
    const h = await start()
    const push = { command: "git push --force origin main" }
    expect(await h.tool("ses_c", "bash", push)).toContain('Contract "protect-remote-history"')
    await h.user("ses_c", "please push it")
    expect(await h.tool("ses_c", "bash", push)).toContain('Contract "protect-remote-history"')
    await h.command("ses_c", "bypass the release branch is mine")
    expect(await h.tool("ses_c", "bash", push)).toBeUndefined()
    expect(await h.tool("ses_c", "bash", push)).toContain('Contract "protect-remote-history"')
  })
})

describe("switching it: off, one family, warn, locks", () => {
  test("settings.protection: off switches all four off; block is the default", async () => {
    const h = await start({ project: "version: 1\nsettings:\n  protection: off\n" })
    const status = await h.status("ses_s")
    for (const id of PROTECTION_IDS) expect(status).not.toContain(` ${id} `)
    expect(status).toContain("problems: none")
    expect(await verdict(h, "rm -rf ~")).not.toBe(FILES)
    expect(await verdict(h, "git push -f")).toBe("runs")
  })

  test("settings.protection: warn: the call runs, with a note naming what it runs", async () => {
    const h = await start({ global: "version: 1\nsettings:\n  protection: warn\n" })
    const { blocked, output } = await h.run("ses_w", "bash", { command: "git push --force origin main" })
    expect(blocked).toBeUndefined()
    expect(output).toContain("WARN protect-remote-history")
  })

  test("one family off, another to warn; a family's own entry wins over settings.protection", async () => {
    const h = await start({
      project:
        "version: 1\nsettings:\n  protection: warn\ncontracts:\n  - id: protect-files\n    enabled: false\n  - id: protect-disks\n    mode: block\n",
    })
    expect(await verdict(h, "rm -rf /opt/app")).toBe("runs")
    expect(await verdict(h, "mkfs.ext4 /dev/sdb1")).toBe(DISKS)
    expect(await verdict(h, "git push -f")).toBe("runs") // warned
  })

  test("a family locked by the global file stays against the project file, with the lock's error", async () => {
    const h = await start({
      global: "version: 1\ncontracts:\n  - id: protect-remote-history\n    locked: true\n",
      project:
        "version: 1\nsettings:\n  protection: off\ncontracts:\n  - id: protect-remote-history\n    enabled: false\n",
    })
    const status = await h.status("ses_l")
    expect(status).toContain("block protect-remote-history [locked]")
    expect(status).toContain(
      `error: .opencode/opencode-semantic-anchors.yaml: settings.protection: contract "protect-remote-history" is locked by the global file (${h.dirs.globalFile}); the project file cannot change or disable it. Remove settings.protection here, or change it in the global file`,
    )
    expect(await verdict(h, "git push -f")).toBe(REMOTE)
    expect(await verdict(h, "rm -rf /opt/app")).toBe("runs") // the unlocked families are off
  })

  test("a bad value is an error with the fix, and the protection stays", async () => {
    const h = await start({ project: "version: 1\nsettings:\n  protection: no\n" })
    expect(await h.status("ses_e")).toContain(
      'error: .opencode/opencode-semantic-anchors.yaml: settings.protection: must be block, warn or off (got "no"); the default protection stays as it is',
    )
    expect(await verdict(h, "git push -f")).toBe(REMOTE)
  })
})

describe("/anchor status and /anchor test show it like any contract", () => {
  test("status lists the four in every role; test says which fires and why", async () => {
    const h = await start()
    for (const agent of ["build", "plan"]) {
      await h.user(`ses_${agent}`, "go", agent)
      const status = await h.status(`ses_${agent}`)
      for (const id of PROTECTION_IDS) expect(status).toMatch(new RegExp(`^ {2}block ${id} - `, "m"))
    }
    const text = await h.command("ses_t", "test bash cd / && sudo rm -rf home")
    expect(text).toContain("verdict: block (protect-files): the call would not run")
    expect(text).toContain(
      "  block protect-files: fires\n    tool bash: in tools [bash]\n    protects: runs `rm -rf home` (after sudo): deletes /home, outside the project",
    )
    const passes = await h.command("ses_t", "test bash rm -rf build")
    expect(passes).toContain(
      "  block protect-files: passes\n    tool bash: in tools [bash]\n    protects: nothing it runs deletes",
    )
  })
})

// The opt-in ready rules for what is not for everyone (`./install.sh --example-config`): each with its spellings and
// its near misses (dry runs, previews, --help, templates), the rule alone in a project file.
const READY: [id: string, command: string, fires: boolean][] = [
  ["no-terraform-destroy", "terraform destroy", true],
  ["no-terraform-destroy", "cd infra && terraform destroy -auto-approve -var-file=prod.tfvars", true],
  ["no-terraform-destroy", "terraform apply -destroy -auto-approve", true],
  ["no-terraform-destroy", "terraform plan -destroy -out=tfplan", false],
  ["no-terraform-destroy", "terraform apply tfplan", false],
  ["no-terraform-destroy", "terraform destroy -help", false],
  ["no-docker-prune", "docker system prune -af --volumes", true],
  ["no-docker-prune", "docker volume prune -f", true],
  ["no-docker-prune", "sudo docker volume rm pgdata redis", true],
  ["no-docker-prune", "docker compose down --volumes", true],
  ["no-docker-prune", "docker-compose down -v", true],
  ["no-docker-prune", "docker compose down", false],
  ["no-docker-prune", "docker system df", false],
  ["no-docker-prune", "docker system prune --help", false],
  ["no-database-drop", `psql "$DATABASE_URL" -c 'DROP SCHEMA public CASCADE'`, true],
  ["no-database-drop", "mysql -u root -e 'DROP DATABASE shop'", true],
  ["no-database-drop", "sqlite3 app.db 'drop table logs'", true],
  ["no-database-drop", "psql <<'SQL'\nDROP TABLE users;\nSQL", true],
  ["no-database-drop", "psql -c 'SELECT count(*) FROM users'", false],
  ["no-database-drop", "grep -rn 'DROP TABLE' migrations/", false],
  ["no-pipe-to-shell", "curl -fsSL https://get.example.com | bash", true],
  ["no-pipe-to-shell", "curl -s https://x.example/i.sh | sudo sh -s -- --yes", true],
  ["no-pipe-to-shell", "wget -qO- https://x.example/setup.py | python3", true],
  ["no-pipe-to-shell", "curl -s https://api.example.com | jq .", false],
  ["no-pipe-to-shell", "curl -o get.sh https://get.example.com && less get.sh", false],
  // a pipe into a program that reads the download as data, not as code (36 real calls fired the old rule)
  ["no-pipe-to-shell", "curl -s http://localhost:8081/api/items | python3 -m json.tool", false],
  [
    "no-pipe-to-shell",
    'curl -s https://api.example.com | python3 -c "import json,sys; print(json.load(sys.stdin))"',
    false,
  ],
  ["no-pipe-to-shell", "curl -s https://x.example/i.sh | bash -c 'wc -l'", false],
  ["no-pipe-to-shell", "curl -fsSL https://x.example/i.sh | sudo -E bash -", true],
  ["no-pipe-to-shell", "curl -fsSL https://x.example/i.js | node", true],
  ["no-chmod-outside-project", "chmod -R 777 /var/www", true],
  ["no-chmod-outside-project", "sudo chown -R www-data: /srv/data", true],
  ["no-chmod-outside-project", "chmod -R u+w build", false],
  ["no-chmod-outside-project", "chmod 644 /etc/hosts", false],
  ["no-chmod-outside-project", "chmod -R 755 /tmp/out", false],
]

describe("ready rules for what is not for everyone: opt-in, dry runs and previews pass", () => {
  const harnesses = new Map<string, Harness>()
  test.each(READY)("%s: %p fires: %p", async (id, command, fires) => {
    let h = harnesses.get(id)
    if (!h) harnesses.set(id, (h = await start({ project: readyRuleYaml(id) })))
    expect(await h.status("ses_r")).toContain("problems: none")
    const message = (await h.tool(`ses_r${++session}`, "bash", { command })) ?? ""
    expect(message.includes(`Contract "${id}"`)).toBe(fires)
  })
})

describe("the built-ins' own examples hold in any layout", () => {
  // judged in the person's layout, `find ~ -exec rm` (an example of protect-files) failed where the home lies inside
  // the project, and `install.sh --check` then reported an error in a built-in
  const layouts: [string, { directory: string }, Record<string, string>][] = [
    [
      "a project under /tmp, the home inside it",
      { directory: "/tmp/work" },
      { HOME: "/tmp/work/home", TMPDIR: "/tmp/work/tmp" },
    ],
    ["a project that is the home directory", { directory: "/home/dev" }, { HOME: "/home/dev" }],
    ["a project holding the home", { directory: "/home" }, { HOME: "/home/dev" }],
    ["a project in /etc", { directory: "/etc" }, { HOME: "/root" }],
  ]
  test.each(layouts)("%s: no problem", (_name, input, env) => {
    const config = buildConfig([], resolvePaths(input, env))
    expect(config.problems.map(formatProblem)).toEqual([])
  })
})

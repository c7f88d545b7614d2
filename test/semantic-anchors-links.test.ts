// guard-integrity through symbolic links, with the realpath of each directory kept between calls (ResolvedDirs):
// what is kept is forgotten whenever a call may have made or removed a link, so a directory turned into a link is
// resolved again before the next write into it; a file turned into a link is seen at once (its own lstat is never
// kept). The links are made on the file system directly, where the bash call of the test says it runs.
import { describe, expect, test } from "bun:test"
import { mkdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { start, type Harness } from "./fixtures/semantic-anchors/harness"

let session = 0
const fresh = () => `ses_links_${++session}` // a session per call: the step counters never block
const GUARD = 'Contract "guard-integrity"'

/** A project with a plain directory src/conf and a file src/settings.yaml, nothing linked yet. */
async function project(): Promise<{ h: Harness; p: string }> {
  const h = await start({ project: "version: 1\n" })
  const p = h.dirs.project
  mkdirSync(join(p, "src", "conf"), { recursive: true })
  writeFileSync(join(p, "src", "settings.yaml"), "a: 1\n")
  return { h, p }
}

/** src/conf, a plain directory, becomes a link to the project root: src/conf/opencode.json is then the guard's. */
function linkConfToRoot(p: string) {
  rmSync(join(p, "src", "conf"), { recursive: true })
  symlinkSync("..", join(p, "src", "conf"))
}

/** A bash call that runs: before, then what it does on the file system, then after. */
async function bash(h: Harness, command: string, effect: () => void) {
  const sessionID = fresh()
  const callID = `links_${session}`
  expect(await h.tool(sessionID, "bash", { command }, callID)).toBeUndefined()
  effect()
  const output = { title: "bash", output: "", metadata: {} }
  await h.hooks["tool.execute.after"]({ tool: "bash", sessionID, callID, args: { command } }, output)
}

const writeConfJson = (h: Harness) => h.tool(fresh(), "write", { filePath: "src/conf/opencode.json", content: "{}" })

describe("guard-integrity: kept directories are resolved again after a call that may change links", () => {
  test("a directory turned into a link by a bash call: the next write into it is resolved through the link", async () => {
    const { h, p } = await project()
    expect(await writeConfJson(h)).toBeUndefined() // a plain directory: src/conf is kept as itself
    await bash(h, "rm -r src/conf && ln -s .. src/conf", () => linkConfToRoot(p))
    expect(await writeConfJson(h)).toContain(GUARD) // src/conf/opencode.json is now the project's opencode.json
  })

  test("a write checked while the bash call runs does not keep the directory past the call's end", async () => {
    const { h, p } = await project()
    const sessionID = fresh()
    const command = "rm -r src/conf && ln -s .. src/conf"
    expect(await h.tool(sessionID, "bash", { command }, "links_running")).toBeUndefined()
    expect(await writeConfJson(h)).toBeUndefined() // a parallel call, checked before the command changed anything
    linkConfToRoot(p)
    const output = { title: "bash", output: "", metadata: {} }
    await h.hooks["tool.execute.after"]({ tool: "bash", sessionID, callID: "links_running", args: { command } }, output)
    expect(await writeConfJson(h)).toContain(GUARD)
  })

  test("a bash call that ended in error may have run in part: what was kept is forgotten", async () => {
    const { h, p } = await project()
    expect(await writeConfJson(h)).toBeUndefined()
    const sessionID = fresh()
    expect(await h.tool(sessionID, "bash", { command: "./relink.sh" }, "links_failed")).toBeUndefined()
    expect(await writeConfJson(h)).toBeUndefined() // checked while it ran
    linkConfToRoot(p)
    await h.partError(sessionID, "links_failed", "bash", { command: "./relink.sh" })
    expect(await writeConfJson(h)).toContain(GUARD)
  })

  test("a change between turns (the human's) is seen after the next user message", async () => {
    const { h, p } = await project()
    expect(await writeConfJson(h)).toBeUndefined()
    linkConfToRoot(p)
    await h.user(fresh(), "Go on with the config. Source: ticket 7.")
    expect(await writeConfJson(h)).toContain(GUARD)
  })

  test("a file turned into a link is seen at once, with no call in between (the file's own lstat is never kept)", async () => {
    const { h, p } = await project()
    expect(await h.tool(fresh(), "write", { filePath: "src/settings.yaml", content: "a: 2\n" })).toBeUndefined()
    rmSync(join(p, "src", "settings.yaml"))
    symlinkSync(join(p, ".opencode", "opencode-semantic-anchors.yaml"), join(p, "src", "settings.yaml"))
    expect(await h.tool(fresh(), "write", { filePath: "src/settings.yaml", content: "a: 3\n" })).toContain(GUARD)
    expect(
      await h.tool(fresh(), "edit", { filePath: `${p}/src/settings.yaml`, oldString: "a", newString: "b" }),
    ).toContain(GUARD)
  })

  test("a kept linked directory keeps blocking: every write into it, new files included", async () => {
    const { h, p } = await project()
    linkConfToRoot(p)
    for (let i = 0; i < 3; i++) expect(await writeConfJson(h)).toContain(GUARD)
    expect(await h.tool(fresh(), "write", { filePath: "src/conf/notes.md", content: "x" })).toBeUndefined()
    expect(await writeConfJson(h)).toContain(GUARD)
  })

  test("a directory that did not exist is never kept: once an edit made it, a write into it is resolved", async () => {
    const { h, p } = await project()
    symlinkSync(join(p, ".opencode"), join(p, "src", "dotdir"))
    // src/dotdir/plugins does not exist yet: nothing to resolve, and the name alone is innocent
    expect(await h.tool(fresh(), "write", { filePath: "src/dotdir/plugins/a.ts", content: "x" })).toBeUndefined()
    mkdirSync(join(p, ".opencode", "plugins")) // the write ran: opencode made the directory (through the link)
    writeFileSync(join(p, ".opencode", "plugins", "a.ts"), "x")
    expect(await h.tool(fresh(), "write", { filePath: "src/dotdir/plugins/b.ts", content: "x" })).toContain(GUARD)
    expect(await h.tool(fresh(), "write", { filePath: "src/dotdir/plugins/a.ts", content: "y" })).toContain(GUARD)
  })
})

// Whose work a discard would throw away (docs/contracts.md, "Whose work it is"): in a real git repository, through
// server() and the hooks. The agent's own edits of this session may be undone; the person's changes (made before the
// session, or during it) are protected; and wherever git cannot say, or says it too slowly, the discard is protected
// and the log says why, once. A call's files are really changed between its before and after hooks, as the tool does.
import { afterAll, describe, expect, test } from "bun:test"
import {
  appendFileSync,
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { WORK_CALL_MS } from "../semantic-anchors"
import { agent, edit, judged, repo, S, say, settle } from "./fixtures/semantic-anchors/work-repo"

const fakes = mkdtempSync(join(tmpdir(), "fake-git-"))
afterAll(() => rmSync(fakes, { recursive: true, force: true }))

describe("the agent's own edits may be undone", () => {
  test.each([
    "git checkout a.txt",
    "git checkout -- a.txt",
    "git restore a.txt",
    "git checkout HEAD -- a.txt",
    "git checkout .",
    "git reset --hard",
    "git checkout -f main",
    "cd . && git restore --worktree --staged a.txt",
    // a path the line itself gives (a variable it sets, a loop's words, braces) is read as that path
    "F=a.txt; git checkout $F",
    'for f in a.txt; do git checkout -- "$f"; done',
    "git checkout {a,c}.txt",
    // a first operand the plugin cannot know, before any `--`, is a branch or commit: a switch keeps the changes
    "git checkout $BRANCH",
    "git checkout $(git rev-parse HEAD~1)",
    'git checkout "$REV" a.txt',
    "D=.; git -C $D checkout -- a.txt", // a folder the line sets
  ])("edit a.txt, then %p runs", async (command) => {
    const h = await repo()
    await say(h)
    await settle()
    expect(await edit(h, "a.txt")).toBeUndefined()
    expect(await judged(h, command)).toBe("runs")
  })

  test("a file written by a bash command the reader follows is the agent's too", async () => {
    const h = await repo()
    await say(h)
    await settle()
    expect(await judged(h, "echo more >> b.txt", () => appendFileSync(h.file("b.txt"), "more\n"))).toBe("runs")
    expect(await judged(h, "sed -i s/a/b/ c.txt", () => appendFileSync(h.file("c.txt"), "sed\n"))).toBe("runs")
    expect(await judged(h, "git checkout b.txt c.txt")).toBe("runs")
  })

  test("a file a command the reader cannot follow changed is the agent's; the person's edit between calls is not", async () => {
    const h = await repo()
    await say(h)
    await settle()
    writeFileSync(h.file("c.txt"), "the person, between two calls\n")
    await settle() // the model thinks: the person's edit is older than the next call (CHANGE_SLACK_MS)
    const script = `python3 -c "open('b.txt','a').write('x')"`
    expect(await judged(h, script, async () => (await settle(), appendFileSync(h.file("b.txt"), "x")))).toBe("runs")
    expect(await judged(h, "git checkout b.txt")).toBe("runs")
    expect(await judged(h, "git checkout c.txt")).toContain(
      "changed during the session by someone other than the agent",
    )
  })

  test("edit, revert, change again by a script, revert: each revert of the agent's own change runs", async () => {
    const h = await repo()
    await say(h)
    await settle()
    await edit(h, "b.txt")
    expect(await judged(h, "git checkout b.txt", () => writeFileSync(h.file("b.txt"), "b.txt\n"))).toBe("runs")
    const script = `python3 -c "open('b.txt','a').write('again')"`
    expect(await judged(h, script, async () => (await settle(), appendFileSync(h.file("b.txt"), "again\n")))).toBe(
      "runs",
    )
    await settle() // what the script changed is attributed in the background
    expect(await judged(h, "git checkout b.txt", () => writeFileSync(h.file("b.txt"), "b.txt\n"))).toBe("runs")
  })

  // each means of changing b.txt, with its effect on the file; the change is made, reverted, made again, reverted
  const MEANS: [string, (h: Awaited<ReturnType<typeof repo>>) => Promise<unknown>][] = [
    ["the edit tool", (h) => edit(h, "b.txt")],
    [
      "the write tool",
      (h) => agent(h, "write", { filePath: "b.txt", content: "w\n" }, () => writeFileSync(h.file("b.txt"), "w\n")),
    ],
    [
      "a script",
      (h) =>
        judged(h, `python3 -c "open('b.txt','a').write('s')"`, async () => {
          await settle()
          appendFileSync(h.file("b.txt"), "s\n")
        }),
    ],
    ["a redirect", (h) => judged(h, "echo r >> b.txt", () => appendFileSync(h.file("b.txt"), "r\n"))],
  ]
  test.each(MEANS)("change by %s, revert, change again, revert: each revert runs", async (_means, change) => {
    const h = await repo()
    await say(h)
    await settle()
    for (const round of [1, 2]) {
      await change(h)
      await settle()
      const revert = () => writeFileSync(h.file("b.txt"), "b.txt\n")
      expect(`${round}: ${await judged(h, "git checkout b.txt", revert)}`).toBe(`${round}: runs`)
    }
  })

  test.each(MEANS)(
    "change by %s, revert, the person edits, change again: the revert is blocked",
    async (_means, change) => {
      const h = await repo()
      await say(h)
      await settle()
      await change(h)
      await settle()
      expect(await judged(h, "git checkout b.txt", () => writeFileSync(h.file("b.txt"), "b.txt\n"))).toBe("runs")
      appendFileSync(h.file("b.txt"), "the person's work\n") // while the agent thinks
      await settle()
      await change(h)
      await settle()
      expect(await judged(h, "git checkout b.txt")).toContain("someone other than the agent")
    },
  )

  test("edit, revert, then the person edits, then a script changes it: the revert is blocked", async () => {
    const h = await repo()
    await say(h)
    await settle()
    await edit(h, "b.txt")
    expect(await judged(h, "git checkout b.txt", () => writeFileSync(h.file("b.txt"), "b.txt\n"))).toBe("runs")
    writeFileSync(h.file("b.txt"), "the person's work\n") // between the agent's calls
    await settle()
    const script = `python3 -c "open('b.txt','a').write('again')"`
    expect(await judged(h, script, async () => (await settle(), appendFileSync(h.file("b.txt"), "again\n")))).toBe(
      "runs",
    )
    await settle()
    expect(await judged(h, "git checkout b.txt")).toContain(
      "changed during the session by someone other than the agent",
    )
  })

  test("edit, a script changes it, edit again: the agent's still, and the revert runs", async () => {
    const h = await repo()
    await say(h)
    await settle()
    await edit(h, "b.txt")
    const script = `python3 -c "open('b.txt','a').write('s')"`
    expect(await judged(h, script, () => appendFileSync(h.file("b.txt"), "s\n"))).toBe("runs")
    await edit(h, "b.txt") // at once: no background check between
    expect(await judged(h, "git checkout b.txt")).toBe("runs")
  })

  // The window (CHECK_FRESH_MS): a run reads no stamp a background check saw within it, so the person's edit made
  // after the latest check, to a file of the agent's that the run then changes too, is read as the agent's.
  test("the person's edit in the moment before a script that changes the same file is read as the agent's", async () => {
    const h = await repo()
    await say(h)
    await settle()
    await edit(h, "b.txt")
    await new Promise((resolve) => setTimeout(resolve, 50)) // the first background check sees b.txt as the agent left it
    writeFileSync(h.file("b.txt"), "the person's work\n")
    await new Promise((resolve) => setTimeout(resolve, 50)) // older than CHANGE_SLACK_MS, and no check since
    const script = `python3 -c "open('b.txt','a').write('s')"`
    expect(await judged(h, script, () => appendFileSync(h.file("b.txt"), "s\n"))).toBe("runs")
    await settle()
    expect(await judged(h, "git checkout b.txt")).toBe("runs")
  })

  test("after an edit that failed (no after hook), the file is checked again, and a script's change stays the agent's", async () => {
    const h = await repo()
    await say(h)
    await settle()
    await edit(h, "b.txt")
    await settle()
    const args = { filePath: "b.txt", oldString: "nope", newString: "y" }
    await h.hooks["tool.execute.before"]({ tool: "edit", sessionID: S, callID: "call_failed" }, { args })
    const part = { type: "tool", sessionID: S, callID: "call_failed", state: { status: "error" } }
    await h.hooks.event({ event: { type: "message.part.updated", properties: { part } } } as never)
    await new Promise((resolve) => setTimeout(resolve, 600)) // longer than CHECK_FRESH_MS: b.txt must be checked again
    const script = `python3 -c "open('b.txt','a').write('s')"`
    expect(await judged(h, script, () => appendFileSync(h.file("b.txt"), "s\n"))).toBe("runs")
    await settle()
    expect(await judged(h, "git checkout b.txt")).toBe("runs")
  })

  test("the clock stepped back: checks are timed by a clock that does not, and the person's edit stays theirs", async () => {
    const h = await repo()
    await say(h)
    await settle()
    await edit(h, "b.txt")
    const real = Date.now
    Date.now = () => real() + 3_600_000 // the clock runs an hour ahead while checks see b.txt ...
    try {
      await new Promise((resolve) => setTimeout(resolve, 450))
    } finally {
      Date.now = real // ... and is stepped back
    }
    await settle()
    writeFileSync(h.file("b.txt"), "the person's work\n")
    await settle()
    const script = `python3 -c "open('b.txt','a').write('s')"`
    expect(await judged(h, script, () => appendFileSync(h.file("b.txt"), "s\n"))).toBe("runs")
    await settle()
    expect(await judged(h, "git checkout b.txt")).toContain("someone other than the agent")
  })

  test("a branch switch or a checkout of a clean file loses nothing, and runs", async () => {
    const h = await repo()
    h.git("branch", "feature")
    await say(h)
    await settle()
    expect(await judged(h, "git checkout feature")).toBe("runs")
    expect(await judged(h, "git checkout c.txt")).toBe("runs")
  })

  test("unstaging the person's file loses nothing, by any prefix of --staged, and runs", async () => {
    const h = await repo()
    writeFileSync(h.file("b.txt"), "the person's work\n")
    h.git("add", "b.txt")
    await say(h)
    await settle()
    expect(await judged(h, "git restore --stag b.txt")).toBe("runs")
    expect(await judged(h, "git restore -S b.txt")).toBe("runs")
    expect(readFileSync(h.file("b.txt"), "utf8")).toBe("the person's work\n")
  })

  test("the agent's own stash may be dropped, in one line or later", async () => {
    const h = await repo()
    await say(h)
    await settle()
    await edit(h, "a.txt")
    expect(await judged(h, "git stash && git stash drop")).toBe("runs")
    await edit(h, "b.txt")
    expect(await judged(h, "git stash", () => void h.git("stash", "-q"))).toBe("runs")
    expect(await judged(h, "git stash drop")).toBe("runs")
  })

  test("untracked files the agent wrote may be cleaned", async () => {
    const h = await repo()
    await say(h)
    await settle()
    await agent(h, "write", { filePath: "new.txt", content: "x" }, () => writeFileSync(h.file("new.txt"), "x"))
    expect(await judged(h, "git clean -f new.txt")).toBe("runs")
  })
})

describe("the person's uncommitted work is protected", () => {
  const BEFORE = "1 file with changes that were there before this session"
  test.each([
    ["git checkout g.txt", BEFORE],
    ["git restore g.txt", BEFORE],
    ["git checkout -- .", BEFORE],
    ["git reset --hard", BEFORE],
    [
      "git stash && git stash drop",
      "a stash entry the agent did not make in this session, or one that holds changes not its own",
    ],
    ["git switch -f main", BEFORE],
    // git's long options by any unique prefix
    ["git checkout --forc main", BEFORE],
    ["git switch --discard-ch main", BEFORE],
    ["git restore --work --stag g.txt", BEFORE],
    ["git reset --har", BEFORE],
    // a path held in a variable: the line's own value, or any changed file when the plugin cannot know it
    ["F=g.txt; git checkout $F", BEFORE],
    ["git checkout {g,c}.txt", BEFORE],
    ["git checkout -- $F", "`git checkout` of $F ($F is a value the plugin cannot know: it may be any changed file)"],
    [
      'git restore "$F"',
      `($F is a value the plugin cannot know: it may be any changed file) would throw away uncommitted work: ${BEFORE}`,
    ],
    ["git checkout -- $(cat list.txt)", "$(cat list.txt) is a value the plugin cannot know"],
    ["git rm -f ${F:-x}", "is a value the plugin cannot know"],
    ['git checkout "$REV" g.txt', BEFORE],
    ['F="g.txt c.txt"; git checkout -- $F', "is a value the plugin cannot know"], // split at its blank
    ["F=a.txt; F=$(echo g.txt); git checkout -- $F", "is a value the plugin cannot know"], // assigned twice
    ["for f in {g,c}.txt; do git checkout -- $f; done", BEFORE],
    ["git checkout {a..g}.txt", BEFORE],
    // paths given at run time, and a folder the plugin cannot know
    ["git diff --name-only | xargs git checkout --", "`git checkout` of the paths xargs gives it"],
    ["find . -name g.txt -exec git checkout -- {} +", "`git checkout` of the paths find gives it"],
    ["git -C $D checkout g.txt", "`git checkout` run in $D, a folder the plugin cannot know"],
    // a list the shell splits, or a loop's or read's variable: files, not a branch
    ["git checkout $(git diff --name-only)", "is a value the plugin cannot know"],
    ['git diff --name-only | while read f; do git checkout "$f"; done', "$f is a value the plugin cannot know"],
    ["for f in $(git diff --name-only); do git checkout $f; done", "$f is a value the plugin cannot know"],
    // assigned again, however: which value the command sees is not read
    ["F=a.txt; export F=g.txt; git checkout -- $F", "$F is a value the plugin cannot know"],
    ["F=a.txt; if true; then F=g.txt; fi; git checkout -- $F", "$F is a value the plugin cannot know"],
    ['F=a.txt; F+=" g.txt"; git checkout -- $F', "$F is a value the plugin cannot know"],
    ["for f in a.txt; do echo; done; f=g.txt; git checkout -- $f", "$f is a value the plugin cannot know"],
  ])("g.txt changed before the session: %p is blocked, saying %p", async (command, says) => {
    const h = await repo()
    writeFileSync(h.file("b.txt"), "the person's work\n") // b.txt stands for g
    await say(h)
    await settle()
    await edit(h, "a.txt")
    const verdict = await judged(h, command.replace("g.txt", "b.txt").replace("{g,", "{b,"))
    expect(verdict).toContain(says)
    expect(verdict).not.toContain("the person's work") // never the contents
    expect(readFileSync(h.file("b.txt"), "utf8")).toBe("the person's work\n")
  })

  test("a file the person changed before the session and the agent then edited is still the person's", async () => {
    const h = await repo()
    writeFileSync(h.file("a.txt"), "the person's work\n")
    await say(h)
    await settle()
    await edit(h, "a.txt")
    expect(await judged(h, "git checkout a.txt")).toContain(BEFORE)
  })

  test("a change the person makes during the session, in a file the agent never touched or after its edit", async () => {
    const h = await repo()
    await say(h)
    await settle()
    await edit(h, "a.txt")
    writeFileSync(h.file("c.txt"), "typed in the editor\n")
    expect(await judged(h, "git checkout c.txt")).toContain(
      "1 file changed during the session by someone other than the agent",
    )
    appendFileSync(h.file("a.txt"), "the person again\n")
    expect(await judged(h, "git checkout a.txt")).toContain("someone other than the agent")
    expect(await judged(h, "git reset --hard")).toContain(
      "2 files changed during the session by someone other than the agent",
    )
  })

  test("untracked files that were there before are not cleaned", async () => {
    const h = await repo()
    writeFileSync(h.file("notes.txt"), "mine")
    await say(h)
    await settle()
    expect(await judged(h, "git clean -fd notes.txt new.txt")).toContain(BEFORE)
  })

  test("commits are lost whoever made them: a reset to another commit stays blocked", async () => {
    const h = await repo()
    await say(h)
    await settle()
    expect(await judged(h, "git reset --hard HEAD~1")).toBe("Why now: runs `git reset --hard HEAD~1`.")
  })
})

/** A fake git first on PATH: `script` is its body (sh). */
function fakeGit(name: string, script: string): string {
  const dir = join(fakes, name)
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, "git"), `#!/bin/sh\n${script}\n`)
  chmodSync(join(dir, "git"), 0o755)
  return dir
}

async function withPath<T>(path: string, run: () => Promise<T>): Promise<T> {
  const saved = process.env.PATH
  process.env.PATH = path
  try {
    return await run()
  } finally {
    process.env.PATH = saved
  }
}

describe("when git cannot say: protected, within the bound, said once in the log", () => {
  const SH = "/usr/bin:/bin"
  const cases: [string, () => string, string][] = [
    ["git missing", () => fakes + "/none", "git is not installed"],
    ["git hangs", () => `${fakeGit("hang", "exec sleep 30")}:${SH}`, "git did not answer in time"],
    [
      "git fails",
      () => `${fakeGit("fail", "echo 'fatal: index file corrupt' >&2; exit 128")}:${SH}`,
      "git failed (fatal: index file corrupt)",
    ],
    [
      "a huge tree",
      () => `${fakeGit("huge", "i=0; while [ $i -lt 20002 ]; do printf '? f%s\\0' $i; i=$((i+1)); done")}:${SH}`,
      "the tree has more than 20000 changed files",
    ],
  ]
  test.each(cases)("%s", async (_name, path, says) => {
    const h = await repo()
    await withPath(path(), async () => {
      await say(h)
      await settle()
      const began = Date.now()
      const verdict = await judged(h, "git checkout a.txt")
      expect(Date.now() - began).toBeLessThan(WORK_CALL_MS + 500)
      expect(verdict).toContain("the plugin cannot tell whose")
      await judged(h, "git restore a.txt")
    })
    const said = h.logs.filter((line) => line.message.includes("cannot tell whose uncommitted work"))
    expect(said.length).toBe(1)
    expect(said[0].message).toContain(says)
  })

  test("not a repository", async () => {
    const h = await repo(false)
    await say(h)
    await settle()
    expect(await judged(h, "git checkout a.txt")).toContain("the project is not a git repository")
    expect(h.logs.filter((line) => line.message.includes("cannot tell whose")).length).toBe(1)
  })

  test("a detached HEAD", async () => {
    const h = await repo()
    h.git("checkout", "-q", "--detach")
    await say(h)
    await settle()
    await edit(h, "a.txt")
    expect(await judged(h, "git checkout a.txt")).toContain("HEAD is detached")
  })

  test("a read-only call, a changing one the reader follows, or a discard of paths absent or clean, starts no git", async () => {
    const h = await repo()
    await settle() // the earlier tests' background snapshots are done (PATH is the process's)
    const log = join(fakes, "calls.log")
    const dir = fakeGit("count", `echo "$@" >> ${log}; exec /usr/bin/git "$@"`)
    await withPath(`${dir}:/usr/bin:/bin`, async () => {
      await say(h)
      await settle()
      rmSync(log, { force: true })
      for (const command of [
        "git status",
        "ls -la",
        "cat a.txt",
        "git log --oneline",
        "git diff",
        "git checkout -b x",
        "mkdir -p out",
        "git checkout main", // a branch: no file of that name, nothing to lose
        "git checkout HEAD~1 -- gone.txt",
        "git restore missing/",
        "git clean -f nothing-here",
        "git checkout -- c.txt", // committed, clean in the snapshot and unchanged since: nothing to lose
        "git restore c.txt",
      ])
        expect(await judged(h, command)).toBe("runs")
      await edit(h, "a.txt")
    })
    expect(existsSync(log)).toBe(false)
  })

  test("a command the reader cannot follow starts no git: what it changed is dated by the files' mtimes", async () => {
    const h = await repo()
    await settle()
    const log = join(fakes, "opaque.log")
    const dir = fakeGit("count-opaque", `echo "$@" >> ${log}; exec /usr/bin/git "$@"`)
    await withPath(`${dir}:/usr/bin:/bin`, async () => {
      await say(h)
      await settle()
      rmSync(log, { force: true })
      const script = `python3 -c "open('b.txt','a').write('x')"`
      expect(await judged(h, script, () => appendFileSync(h.file("b.txt"), "x"))).toBe("runs")
      await settle()
      expect(existsSync(log)).toBe(false) // no process, in its hooks or after them
      expect(await judged(h, "git checkout b.txt")).toBe("runs") // and b.txt is the agent's
      expect(existsSync(log)).toBe(false) // the agent's own file: the disk answers, git is not asked
      writeFileSync(h.file("c.txt"), "the person's edit\n")
      expect(await judged(h, "git checkout c.txt")).toContain("someone other than the agent")
      expect(readFileSync(log, "utf8")).toContain("status") // changed since the snapshot: the discard's own question
    })
  })

  test("a file the person staged since the snapshot and then deleted is asked about: only the index holds it", async () => {
    const h = await repo()
    await settle()
    await say(h)
    await settle()
    writeFileSync(h.file("c.txt"), "the person's staged edit\n")
    h.git("add", "c.txt")
    rmSync(h.file("c.txt"))
    expect(await judged(h, "git checkout HEAD -- c.txt")).toContain("someone other than the agent")
  })
})

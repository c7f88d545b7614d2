// Files deleted or overwritten (docs/contracts.md, "Files deleted or overwritten"): in a real git repository, through
// server() and the hooks. A file command (rm, unlink, find -delete, git rm -f, mv, cp, install, rsync, truncate,
// shred) that would lose the person's untracked files or uncommitted changes is blocked, as `git clean -f` and
// `git checkout` are; over the agent's own files, committed files and ignored build output it runs.
import { beforeAll, describe, expect, test } from "bun:test"
import { execFileSync } from "node:child_process"
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { agent, edit, judged, type Repo, repo, say, settle, write } from "./fixtures/semantic-anchors/work-repo"

/**
 * The project of every row: the person's b.txt changed and notes.md untracked before the session, and their folder
 * keep/ with one untracked file; the agent's new.txt (write tool), its edit of a.txt, its repro.py and gen/ made by a
 * script the reader cannot follow, out.md by a redirect; dist/ and .env ignored (.env and conf/.env the person's), c.txt
 * committed.
 */
async function project(): Promise<Repo> {
  const h = await repo(true, ["dist/", "__pycache__/", ".env"])
  writeFileSync(h.file("b.txt"), "the person's work\n")
  writeFileSync(h.file("notes.md"), "the person's notes\n")
  mkdirSync(h.file("keep"))
  writeFileSync(h.file("keep/plan.md"), "the person's plan\n")
  mkdirSync(h.file("deep/inner"), { recursive: true })
  writeFileSync(h.file("deep/inner/p.md"), "the person's plan\n")
  mkdirSync(h.file("dist"))
  writeFileSync(h.file("dist/app.js"), "built\n")
  writeFileSync(h.file(".env"), "API_TOKEN=sk-live-0123456789abcdef\n")
  mkdirSync(h.file("conf"))
  writeFileSync(h.file("conf/.env"), "DB_PASSWORD=sk-live-fedcba9876543210\n")
  mkdirSync(h.file("tpl/conf"), { recursive: true })
  writeFileSync(h.file("tpl/conf/app.yml"), "port: 1\n")
  mkdirSync(h.file("sub"))
  await say(h)
  await settle()
  await write(h, "new.txt")
  await write(h, "new2.txt")
  await edit(h, "a.txt")
  const script = `python3 -c "import os; os.makedirs('gen'); open('repro.py','w').write('x'); open('gen/x.py','w')"`
  await judged(h, script, async () => {
    await settle()
    writeFileSync(h.file("repro.py"), "x")
    mkdirSync(h.file("gen"))
    writeFileSync(h.file("gen/x.py"), "")
  })
  await settle() // what the script changed is attributed in the background
  await judged(h, "cat > out.md <<'EOF'\nthe agent's\nEOF", () => writeFileSync(h.file("out.md"), "the agent's\n"))
  await settle() // what the script changed is attributed in the background
  return h
}

const UNTRACKED = "1 file with changes that were there before this session (1 untracked)"
const CHANGED = "1 file with changes that were there before this session (1 with uncommitted changes)"
const REPOSITORY = "would delete the project's git repository (.git: its commits, branches and stashes"
const SECRET = "1 of the person's secret files (git ignores them, and cannot bring them back)"

describe("over the person's files: blocked, saying how many and which kind", () => {
  let h: Repo
  beforeAll(async () => void (h = await project()))
  test.each([
    ["rm notes.md", UNTRACKED],
    ["rm -f b.txt", CHANGED],
    ["rm -rf keep", UNTRACKED],
    ["rm -r keep/", UNTRACKED],
    ["cd keep && rm plan.md", UNTRACKED],
    ["rm *.md", UNTRACKED],
    ["rm {notes,out}.md", UNTRACKED],
    ["unlink notes.md", UNTRACKED],
    ["find . -name '*.md' -delete", "3 files with changes that were there before this session (3 untracked)"],
    ["find . -iname '*.MD' -delete", "3 files with changes that were there before this session (3 untracked)"],
    ["find keep -type f -exec rm {} +", UNTRACKED],
    ["git rm -f b.txt", "1 file with changes that were there before this session"],
    ["mv c.txt notes.md", UNTRACKED],
    ["mv new.txt b.txt", CHANGED],
    ["cp c.txt b.txt", CHANGED],
    ["cp -f c.txt keep/plan.md", UNTRACKED],
    ["install -m 644 c.txt notes.md", UNTRACKED],
    ["rsync c.txt notes.md", UNTRACKED],
    ["truncate -s 0 b.txt", CHANGED],
    ["shred -u notes.md", UNTRACKED],
    ["rm .env", SECRET],
    ['for f in *.md; do mv "$f" out; done', UNTRACKED],
    ['ls | while read f; do mv "$f" merged; done', "a loop moves files the plugin cannot tell onto the one name"],
    ["rm $FILE", "$FILE is a value the plugin cannot know"],
    ["git clean -f notes.md", "1 file with changes that were there before this session"],
    // the repository itself: its commits, branches and stashes
    ["rm -rf .git", REPOSITORY],
    ["rm -rf ./.git/", REPOSITORY],
    ["rm -rf .g[i]t", REPOSITORY],
    ["rm -rf .g[[:alpha:]]t", REPOSITORY], // a class in a bracket expression
    ["rm -rf .g[]i]t", REPOSITORY], // a `]` first is one of its characters
    ["rm -rf .git/*", REPOSITORY],
    ["rm -rf .git/objects .git/refs", REPOSITORY],
    ["rm -rf .git/refs/*", REPOSITORY],
    ["find . -name .git -prune -exec rm -rf {} +", REPOSITORY],
    ["git clean -f $D", "`git clean` ($D is a value the plugin cannot know: it may be any path)"],
    ["cd keep && git clean -f $D", "`git clean` ($D is a value the plugin cannot know: it may be any path)"], // `..` too
    // a second look's findings (each ran before)
    ["rm -rf deep/*", UNTRACKED], // a glob's folder, and all under it
    ["git ls-files -o | xargs rm -f", "is given files it reads from its input, which the plugin cannot know"],
    ["find keep -type f -exec truncate -s 0 {} +", UNTRACKED],
    ["find keep ! -empty -delete", UNTRACKED],
    ["cp --backup=none c.txt notes.md", UNTRACKED],
    ["mv -n -f c.txt notes.md", UNTRACKED],
    ["truncate -r c.txt -s +0 notes.md", UNTRACKED],
    ['for f in notes.md b.txt; do cp /dev/null "$f"; done', "2 files with changes that were there before this session"],
    ["F=new.txt; F=notes.md; rm $F", "$F is a value the plugin cannot know"],
    // secret files reached through a glob or a folder, ignored by git as they are
    ["rm -f .env*", SECRET],
    ["rm -rf conf", SECRET],
    ["find conf -delete", SECRET],
    ["find . -name '*env' -delete", "2 of the person's secret files"],
    ["rm -f .e[n]v", SECRET], // a bracket expression
    ["rm -f d*/inner/[]p].md", UNTRACKED],
    ["rm -f deep/*/[[:lower:]].md", UNTRACKED],
    ["rm -rf c[o]nf", SECRET],
  ])("%p: %p", async (command, says) => {
    const verdict = await judged(h, command)
    expect(verdict).toContain(says)
    for (const contents of ["the person's notes", "the person's work", "the person's plan", "sk-live"])
      expect(verdict).not.toContain(contents)
    expect(readFileSync(h.file("notes.md"), "utf8")).toBe("the person's notes\n")
  })
})

describe("over the agent's own files, committed files and ignored output: runs", () => {
  let h: Repo
  beforeAll(async () => void (h = await project()))
  test.each([
    "rm new.txt",
    "rm -f new.txt new2.txt repro.py out.md",
    "rm a.txt", // the agent's edit of a committed file: git brings the commit back
    "rm c.txt",
    "rm -rf dist __pycache__ node_modules",
    "rm -rf conf/*", // the shell's `*` does not match conf/.env
    "cp -r tpl/conf .", // a copy merges into conf/: its .env stays
    "rm conf", // rm without -r deletes no folder
    "rm -f deep/*", // nor the files in one a glob matches (deep/inner/p.md, the person's, stays)
    "rm -f .git/index.lock", // inside the repository: git's own file, not the repository
    "rm -rf .git/index.lock",
    "rm .git", // without -r rm deletes no folder
    "rm -fr .git/rebase-merge", // what git's own message says to run: no commit or branch is in it
    "find .git -name index.lock -delete",
    "find . -maxdepth 1 -name '.g*' -delete", // -delete removes a folder only once it is empty: .git stays
    "find . -name .git -delete",
    "rm -rf gen", // a folder a script of the agent's made
    "unlink new.txt",
    "find . -name '*.pyc' -delete",
    "find . -iname '*.PYC' -delete", // -iname: a name test in any case, not the whole tree
    "find . -name __pycache__ -type d -exec rm -rf {} +",
    "find sub -type d -empty -delete",
    "cp keep/plan.md sub/", // sub/plan.md is not there: nothing lost
    "git rm -f c.txt",
    "mv new2.txt new.txt",
    "mv c.txt sub/",
    "mv -n c.txt notes.md",
    "cp c.txt new.txt",
    "cp --backup c.txt notes.md",
    "truncate -s 0 new.txt",
    "truncate -s +1M notes.md",
    "shred -u repro.py",
    'for f in new.txt new2.txt; do mv "$f" merged; done',
    "cat > notes.md <<'EOF'\nrewritten\nEOF", // a redirect is the shell's write tool: an edit, not a loss
    "rm /tmp/scratch.txt",
    "find . -name '*.pyc' -exec rm {} +",
    "find keep -name '*.md' -exec cp {} /tmp/ ';'", // the found files are read, not lost
    "git clean -f new.txt",
  ])("%p runs", async (command) => {
    expect(await judged(h, command)).toBe("runs")
  })
})

describe("find goes into .git as into any folder", () => {
  test("a name test that selects its packs, their indexes or its loose objects is blocked", async () => {
    const h = await project()
    h.git("commit", "-qm", "more", "--allow-empty")
    const loose = readdirSync(h.file(".git/objects")).find((name) => /^[0-9a-f]{2}$/.test(name))!
    const object = readdirSync(h.file(`.git/objects/${loose}`))[0]
    expect(await judged(h, `find . -name ${object} -delete`)).toContain(REPOSITORY)
    expect(await judged(h, "find . -name '*.pack' -delete")).toBe("runs") // no pack yet: nothing of the kind lost
    h.git("gc", "-q")
    for (const command of [
      "find . -name '*.pack' -delete",
      "find .git -name '*.idx' -delete",
      "find . -name '*.idx' -exec rm {} +",
      "find . -iname '*.PACK' -delete",
      "find . -iname .GIT -exec rm -rf {} +",
    ])
      expect(await judged(h, command)).toContain(REPOSITORY)
    expect(await judged(h, "find . -name '*.lock' -delete")).toBe("runs")
  })

  test("under .git/refs anything, and from the root a branch's name or a loose object's", async () => {
    const h = await project()
    const loose = readdirSync(h.file(".git/objects")).find((name) => /^[0-9a-f]{2}$/.test(name))!
    const object = readdirSync(h.file(`.git/objects/${loose}`))[0]
    for (const command of [
      "find .git/refs -name main -delete",
      "find .git/refs -name 'm*' -delete",
      "find . -name main -delete", // .git/refs/heads/main: the branch
      `find .git/objects -name '${object[0]}*' -delete`, // some of the loose objects, whichever the one read
      `find . -name '${object.slice(0, 3)}*' -delete`, // from the root: hex digits and a wildcard
      "find . -name pack -exec rm -rf {} +",
      "find . -name heads -exec rm -rf {} +",
    ])
      expect(await judged(h, command)).toContain(REPOSITORY)
    for (const command of [
      "find . -name '*.pyc' -delete",
      "find . -name 'main.o' -delete",
      `find . -name ${loose} -delete`,
    ])
      expect(await judged(h, command)).toBe("runs") // the last: -delete removes the objects' folder only once empty
  })
})

describe("the same answer as git, whoever deletes", () => {
  test("git clean -f and rm of the person's untracked file are both blocked; of the agent's both run", async () => {
    const h = await project()
    expect(await judged(h, "git clean -f notes.md")).not.toBe("runs")
    expect(await judged(h, "rm notes.md")).not.toBe("runs")
    expect(await judged(h, "git clean -f new.txt")).toBe("runs")
    expect(await judged(h, "rm new.txt")).toBe("runs")
  })

  test("a file the agent wrote and the person then changed is the person's", async () => {
    const h = await project()
    writeFileSync(h.file("new.txt"), "the person took it over\n")
    expect(await judged(h, "rm new.txt")).toContain("someone other than the agent")
  })
})

describe("a command whose after hook never came", () => {
  test("its run ends at the person's next message: an edit after it is the person's", async () => {
    const h = await project()
    const args = { command: `python3 -c "open('x','w')"` }
    await h.hooks["tool.execute.before"]({ tool: "bash", sessionID: "ses_work", callID: "call_refused" }, { args })
    await say(h) // refused at the permission prompt, or aborted: no after hook
    await settle()
    writeFileSync(h.file("c.txt"), "the person's edit\n")
    expect(await judged(h, "rm c.txt")).toContain("someone other than the agent")
  })
})

describe("a project that is not a git repository", () => {
  test("file commands run, and the log says once why they are not judged", async () => {
    const h = await repo(false)
    writeFileSync(h.file("notes.md"), "the person's notes\n")
    await say(h)
    await settle()
    expect(await judged(h, "rm notes.md")).toBe("runs")
    expect(await judged(h, "mv c.txt b.txt")).toBe("runs")
    expect(await judged(h, 'rm -rf "$OUT_DIR"')).toBe("runs") // a value it cannot know: no record to protect either
    expect(await judged(h, 'ls | while read f; do mv "$f" merged; done')).toBe("runs")
    const said = h.logs.filter((entry) => entry.message.includes("there is no record of whose files are whose"))
    expect(said.length).toBe(1)
  })
})

describe("what the disk cannot answer for, git is asked", () => {
  test("a folder renamed after the snapshot keeps its files' change times: their losses are still judged", async () => {
    const h = await project()
    await settle()
    await say(h)
    await settle()
    renameSync(h.file("keep"), h.file("kept")) // the person's untracked folder, renamed
    expect(await judged(h, "rm kept/plan.md")).not.toBe("runs")
    expect(await judged(h, "cp /dev/null kept/plan.md")).not.toBe("runs")
    expect(await judged(h, "rm -rf kept")).not.toBe("runs")
  })

  test("a committed folder is read on the disk, and what the person changed in it since the snapshot is judged", async () => {
    const h = await committedFolder()
    writeFileSync(h.file("src/app.ts"), "the person's edit\n")
    expect(await judged(h, "rm -rf src")).toContain("1 with uncommitted changes")
    h.git("checkout", "src/app.ts")
    writeFileSync(h.file("src/lib/new.ts"), "the person's new file\n")
    expect(await judged(h, "rm -rf src")).toContain("1 untracked")
    rmSync(h.file("src/lib/new.ts"))
    renameSync(h.file("keep"), h.file("src/lib/keep")) // the person's folder moved in: its file keeps its times
    expect(await judged(h, "rm -rf src")).toContain("1 untracked")
  })
})

/** A repository outside the project with one committed file, lib.c: to add as a submodule, or clone. */
function upstream(): string {
  const sub = mkdtempSync(join(tmpdir(), "anchors-sub-"))
  const git = (...args: string[]) => execFileSync("git", args, { cwd: sub, encoding: "utf8" })
  git("init", "-q", "-b", "main")
  writeFileSync(join(sub, "lib.c"), "int x;\n")
  git("add", ".")
  git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "s")
  return sub
}

/** The project with upstream() as its submodule vendor/lib, committed and clean, a session begun over it. */
async function withSubmodule(): Promise<{ h: Repo; sub: string }> {
  const h = await project()
  const sub = upstream()
  h.git("-c", "protocol.file.allow=always", "submodule", "add", "-q", sub, "vendor/lib")
  h.git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "sub")
  await settle()
  await say(h)
  await settle()
  return { h, sub }
}

describe("what the disk cannot answer for, in a folder: git is asked", () => {
  test("a submodule: the person's uncommitted change in it is judged, in a folder or named", async () => {
    const { h, sub } = await withSubmodule()
    expect(await judged(h, "rm vendor/lib/lib.c")).toBe("runs") // clean, and unchanged since the snapshot
    writeFileSync(h.file("vendor/lib/lib.c"), "int x; // the person's uncommitted work\n")
    writeFileSync(h.file("vendor/lib/new.c"), "int y; // the person's new file\n")
    await settle()
    expect(await judged(h, "rm -rf vendor")).not.toBe("runs")
    // named inside it: the project's git lists the submodule, never its files (each of these ran)
    const inside =
      "the plugin cannot tell whose (a path inside a submodule or another repository, whose changes the project's git does not list)"
    for (const command of [
      "rm vendor/lib/lib.c",
      "rm vendor/lib/new.c",
      "truncate -s 0 vendor/lib/lib.c",
      "rm -rf vendor/lib/*",
      "rm vendor/*/lib.c", // a glob passing the submodule's folder: git lists the submodule, not the file
      "rm v*/*/lib.c",
      "find vendor -name lib.c -delete",
      "git -C vendor/lib checkout lib.c",
      "cd vendor/lib && git reset --hard",
    ])
      expect(await judged(h, command)).toContain(inside)
    expect(await judged(h, "git -C vendor/lib checkout dev")).toBe("runs") // no such path: a branch, switched to
    await say(h) // the snapshot now lists the submodule as changed: the disk does not answer for its files
    await settle()
    expect(await judged(h, "rm vendor/lib/lib.c")).toContain(inside)
    rmSync(sub, { recursive: true, force: true })
  })

  test("a submodule git is told to ignore, and a clone that is no submodule: the person's changes in them are judged", async () => {
    const h = await project()
    const sub = upstream()
    h.git("-c", "protocol.file.allow=always", "submodule", "add", "-q", sub, "vendor/lib")
    h.git("config", "-f", ".gitmodules", "submodule.vendor/lib.ignore", "dirty") // git status then hides its changes
    h.git("add", ".gitmodules")
    h.git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "sub")
    h.git("clone", "-q", sub, "tools/copy") // a repository of its own, unknown to the project's git
    h.git("clone", "-q", sub, "dist/copy") // one in a folder git ignores
    for (const name of ["vendor/lib/lib.c", "tools/copy/lib.c", "dist/copy/lib.c"])
      writeFileSync(h.file(name), "int x; // the person's uncommitted work\n")
    await settle()
    await say(h) // the snapshot sees them as they are: changed before the session
    await settle()
    const inside = "(a path inside a submodule or another repository, whose changes the project's git does not list)"
    for (const command of [
      "rm vendor/lib/lib.c",
      "rm tools/copy/lib.c",
      "git -C tools/copy checkout lib.c",
      "git -C dist/copy checkout lib.c",
      "cd dist/copy && git reset --hard",
    ])
      expect(await judged(h, command)).toContain(inside)
    rmSync(sub, { recursive: true, force: true })
  })

  test("a clone in the project: deleting it, or files in it through a glob or find, is protected", async () => {
    const h = await project()
    const sub = upstream()
    h.git("clone", "-q", sub, "tools/copy") // git lists it as one untracked folder, never its files
    writeFileSync(h.file("tools/copy/lib.c"), "int x; // the person's uncommitted work\n")
    await settle()
    await say(h)
    await settle()
    const holds =
      "the plugin cannot tell whose (a folder it reaches holds another repository, whose files and commits the project's git does not hold)"
    // each of these ran: the project's git answered "one untracked folder", which was not counted
    for (const command of [
      "rm -rf tools",
      "rm -rf tools/*",
      "rm -rf t*/copy",
      "rm tools/*/lib.c",
      "find tools -name lib.c -delete",
      "find . -name '*.c' -delete",
    ])
      expect(await judged(h, command)).toContain(holds)
    expect(await judged(h, "rm -f tools/*")).toBe("runs") // without -r, rm deletes no folder
    rmSync(sub, { recursive: true, force: true })
  })

  test("a glob's folders: only a repository there with changes counts, not the other files git lists in them", async () => {
    const { h, sub } = await withSubmodule()
    const everyday = [
      "rm deep/*/x.tmp", // deep/inner/p.md, the person's, is listed for deep/*, and not matched
      "rm -rf vendor/*/tmp",
      "find . -name '*.pyc' -delete",
      "find . -name __pycache__ -exec rm -rf {} +",
      "find vendor -name '*.o' -delete",
    ]
    for (const command of [...everyday, "rm vendor/*/lib.c"]) expect(await judged(h, command)).toBe("runs") // clean
    // the submodule at another commit, nothing uncommitted in it (`S.C..`): a moved commit loses nothing
    execFileSync("git", ["-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "m", "--allow-empty"], {
      cwd: h.file("vendor/lib"),
    })
    await settle()
    for (const command of everyday) expect(await judged(h, command)).toBe("runs")
    rmSync(sub, { recursive: true, force: true })
  })

  test("the person's folder a script of the agent's moved in: its files are judged", async () => {
    const h = await committedFolder()
    const script = `python3 -c "import shutil; shutil.move('keep', 'src/lib/keep')"`
    expect(await judged(h, script, () => renameSync(h.file("keep"), h.file("src/lib/keep")))).toBe("runs")
    await settle()
    expect(await judged(h, "rm -rf src/lib")).toContain("1 untracked")
  })
})

describe("a project whose own path holds `[`: it is no glob", () => {
  test("its secrets and a folder's files: judged as anywhere else", async () => {
    const saved = process.env.TMPDIR
    const base = mkdtempSync(join(tmpdir(), "anchors-[1]-"))
    process.env.TMPDIR = base
    try {
      const h = await project()
      expect(await judged(h, "rm -f .env*")).toContain(SECRET)
      expect(await judged(h, "rm -rf conf")).toContain(SECRET)
      expect(await judged(h, "rm -rf keep/*")).toContain(UNTRACKED)
      expect(await judged(h, "rm -f new.txt")).toBe("runs")
    } finally {
      if (saved === undefined) delete process.env.TMPDIR
      else process.env.TMPDIR = saved
      rmSync(base, { recursive: true, force: true })
    }
  })
})

describe("through a link: what the command reaches is judged", () => {
  test("a link to a folder of the project: its files, as the link reaches them", async () => {
    const h = await committedFolder()
    symlinkSync("src", h.file("alias"))
    writeFileSync(h.file("src/lib/util.ts"), "the person's edit\n")
    expect(await judged(h, "rm -rf alias/lib")).toContain("1 with uncommitted changes")
    expect(await judged(h, "rm -rf alias/")).toContain("1 with uncommitted changes")
    expect(await judged(h, "rm -f alias/lib/util.ts")).toContain("1 with uncommitted changes")
    expect(await judged(h, "rm alias")).toContain("(1 untracked)") // the link alone: the person's, made since
  })

  test("a link to a folder outside the project: protected", async () => {
    const h = await project()
    const outside = mkdtempSync(join(tmpdir(), "anchors-outside-"))
    mkdirSync(join(outside, "sub"))
    writeFileSync(join(outside, "sub/diary.md"), "the person's, in no repository\n")
    symlinkSync(outside, h.file("notes"))
    expect(await judged(h, "rm -rf notes/sub")).toContain("leads through a link out of the project")
    rmSync(outside, { recursive: true, force: true })
  })
})

/** A project with a committed folder (src/app.ts, src/lib/util.ts), clean when the latest snapshot was taken. */
async function committedFolder(files = ["src/app.ts", "src/lib/util.ts"]): Promise<Repo> {
  const h = await project()
  for (const name of files) {
    mkdirSync(h.file(name.slice(0, name.lastIndexOf("/"))), { recursive: true })
    writeFileSync(h.file(name), `${name}\n`)
  }
  h.git("add", "src")
  h.git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "src")
  await settle()
  await say(h) // a snapshot taken well after the folder was committed
  await settle()
  return h
}

/** Runs `body` with no git on the PATH: a git question fails and protects, and says so in the log. */
async function withoutGit(h: Repo, body: () => Promise<void>) {
  const before = h.logs.length
  await gitless(body)
  expect(h.logs.length).toBe(before)
}

/** Runs `body` with no git on the PATH (a git question then fails, and protects). */
async function gitless<T>(body: () => Promise<T>): Promise<T> {
  const path = process.env.PATH
  process.env.PATH = "/nonexistent"
  try {
    return await body()
  } finally {
    process.env.PATH = path
  }
}

describe("costs", () => {
  test("deleting the agent's own file, one that is not there, or a committed one clean since the snapshot, asks no git", async () => {
    const h = await project()
    await settle()
    await say(h) // a snapshot taken well after the committed files were made
    await settle()
    await withoutGit(h, async () => {
      expect(await judged(h, "rm new.txt")).toBe("runs")
      expect(await judged(h, "rm -f missing.txt")).toBe("runs")
      expect(await judged(h, "rm c.txt")).toBe("runs")
      expect(await judged(h, "mv new.txt c.txt")).toBe("runs")
    })
  })
  test("deleting a folder of committed files clean since the snapshot, or one the agent made, asks no git", async () => {
    const h = await committedFolder()
    await withoutGit(h, async () => {
      expect(await judged(h, "rm -rf gen")).toBe("runs") // made by a script of the agent's
      expect(await judged(h, "rm -rf sub")).toBe("runs") // empty
      expect(await judged(h, "rm -rf src/lib")).toBe("runs")
      expect(await judged(h, "rm -r src")).toBe("runs")
    })
  })
  test.each([
    ["a name beyond ASCII (macOS and git may spell it apart)", ["src/app.ts", "src/caf\u00e9.ts"]],
    ["more entries than the disk is read for", Array.from({ length: 300 }, (_, k) => `src/f${k}.ts`)],
  ])("a folder holding %s asks git", async (_what, files) => {
    const h = await committedFolder(files)
    expect(await judged(h, "rm -rf src")).toBe("runs")
    expect(await gitless(() => judged(h, "rm -rf src"))).toContain("git is not installed")
  })
  test("an unrelated call of a read-only kind asks nothing", async () => {
    const h = await project()
    expect(await agent(h, "read", { filePath: "notes.md" })).toBeUndefined()
  })
})

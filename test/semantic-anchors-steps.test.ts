// Changing steps (issue 9): step-confirmation counts only calls that change something and that really ran. Driven
// through server() and the hooks, as opencode calls them.
import { describe, expect, test } from "bun:test"
import { start } from "./fixtures/semantic-anchors/harness"

const S = "ses_steps"
const write = (n: number) => ({ filePath: `src/f${n}.ts`, content: `${n}` })
const STEP_BLOCK = 'Contract "step-confirmation"'

/** A session of the default developer preset, with a cited source (so source-anchor stays quiet) and `n` writes. */
async function afterWrites(n: number) {
  const h = await start()
  await h.user(S, "go on. Source: https://example.com/spec")
  for (let i = 1; i <= n; i++) expect((await h.run(S, "write", write(i))).blocked).toBeUndefined()
  return h
}

const READ_ONLY: string[] = [
  "ls",
  "ls -la src/",
  "pwd",
  "cat README.md",
  "head -n 40 src/index.ts",
  "tail -f /tmp/build.log",
  "wc -l src/*.ts",
  "grep -rn 'TODO' src",
  'grep -E "a|b" file.txt',
  "rg --files",
  "rg -n 'foo > bar' src",
  "find . -name '*.ts'",
  "find . -type f -newer x | head",
  "git status",
  "git status --short",
  "git log --oneline -20",
  "git diff HEAD~1 -- src/",
  "git show HEAD:README.md",
  "git blame -L 10,20 a.ts",
  "git branch",
  "git branch -a",
  "git branch --show-current",
  "git branch -vv",
  "git branch --contains HEAD",
  "git branch --list 'feat/*'",
  "git rev-parse HEAD",
  "git rev-parse --show-toplevel",
  "git -C sub status",
  "git --no-pager log -1",
  "git remote -v",
  "git stash list",
  "git tag",
  "git config --get user.name",
  "which node",
  "tree -L 2",
  "stat package.json",
  "ls | wc -l",
  "cat a.txt | grep x | sort | uniq -c | head",
  "cd src && ls",
  "(cd src; ls -la)",
  "ls 2>/dev/null",
  "ls nope 2>&1 | head",
  "npm_config_x=1 ls",
  "find . -name x 2> /dev/null",
  "cat file >/dev/null",
  "ls &>/dev/null",
  "sed -n '1,20p' a.ts",
  "find . -name '*.py' | xargs grep -n def",
  "echo hello",
  "echo 'a > b'",
  "ls # > not a redirect, a comment",
  "git diff --stat && git status",
  "head -c 100 < input.txt",
  "sort -u names.txt",
  "timeout 5 tail -n 20 log.txt",
  "bash -c 'ls'",
  "awk '{print $1}' f",
]
const CHANGING: string[] = [
  "git branch -D x",
  "git branch -d old",
  "git branch new-feature",
  "git branch -m a b",
  "git branch --set-upstream-to=origin/main",
  "find . -exec rm {} \\;",
  "find . -name '*.o' -delete",
  "find . -execdir touch x \\;",
  "cat a > b",
  "cat a >> b",
  "ls >out.txt",
  "ls 1> out.txt",
  "ls &> all.log",
  "echo x | tee f",
  "echo x > f",
  "cat <<EOF > f\nhello\nEOF",
  "rm -rf build",
  "mkdir -p x",
  "touch a",
  "mv a b",
  "cp a b",
  "sed -i 's/a/b/' f",
  "sed -i.bak s/a/b/ f",
  "sort -o out.txt in.txt",
  "uniq in.txt out.txt",
  "git commit -m x",
  "git add -A",
  "git checkout -b x",
  "git push --force",
  "git stash",
  "git reset --hard",
  "git diff --output=patch.diff",
  "git tag v1",
  "git config user.name x",
  "npm test",
  "npm install",
  "pytest -q",
  "make",
  "python3 -c 'print(1)'",
  "node script.js",
  "ls $(cat list)",
  "cat `which x`",
  'echo "$(rm -rf x)"',
  "ls && rm x",
  "ls; touch y",
  "cat a | xargs rm",
  "chmod +x run.sh",
  "ln -s a b",
  "curl -o x http://example.invalid/x",
  "echo 'unterminated",
  "",
  "   ",
  "tree -o out.txt",
  "sudo rm x",
  "env X=1 rm -rf y",
]

describe("bash commands: read-only ones are never a changing step, the rest are", () => {
  // At the limit (3 changes), a read-only command runs and a changing one is the block; blocked calls do not count,
  // so one session judges the whole table.
  test("read-only commands run at the limit and are not counted", async () => {
    const h = await afterWrites(3)
    const blocked = []
    for (const command of READ_ONLY)
      if (await h.tool(S, "bash", { command, description: "look" })) blocked.push(command)
    expect(blocked).toEqual([])
    expect(await h.status(S)).toContain("step-confirmation (3/3 since the last confirmation)")
  })

  test("changing and unknown commands count: at the limit each is blocked", async () => {
    const h = await afterWrites(3)
    const ran = []
    for (const command of CHANGING)
      if (!(await h.tool(S, "bash", { command, description: "change" }))) ran.push(command)
    expect(ran).toEqual([])
  })

  test("a changing command counts like an edit: 3 of them, then the 4th change is blocked", async () => {
    const h = await afterWrites(0)
    for (const command of ["npm test", "git commit -am x", "cat a > b"]) {
      expect((await h.run(S, "bash", { command })).blocked).toBeUndefined()
    }
    expect(await h.tool(S, "write", write(9))).toContain(STEP_BLOCK)
  })

  test("a bash call without a command string counts (the classifier cannot tell)", async () => {
    const h = await afterWrites(3)
    expect(await h.tool(S, "bash", {})).toContain(STEP_BLOCK)
    expect(await h.tool(S, "bash", { command: 42 })).toContain(STEP_BLOCK)
  })
})

describe("tools that look, plan or delegate never count", () => {
  const looking = ["read", "grep", "glob", "list", "webfetch", "todowrite", "task", "anchor_status"]
  test.each(looking.map((tool) => [tool]))("%s: 10 calls, then 3 writes still run", async (tool) => {
    const h = await afterWrites(0)
    for (let i = 0; i < 10; i++) expect((await h.run(S, tool, { filePath: `f${i}` })).blocked).toBeUndefined()
    for (let i = 1; i <= 3; i++) expect((await h.run(S, "write", write(i))).blocked).toBeUndefined()
    expect(await h.tool(S, "write", write(4))).toContain(STEP_BLOCK)
  })

  test("a state trigger on every tool: looking tools still never count, an unknown (MCP) tool does", async () => {
    const h = await start({
      project:
        "version: 1\ncontracts:\n  - { id: ask, description: Ask every 2 changes., mode: block, trigger: { type: state, every: 2, tools: ['*'] } }\n",
    })
    await h.user(S, "go on. Source: https://example.com/spec")
    for (const tool of looking) expect((await h.run(S, tool, { filePath: "a" })).blocked).toBeUndefined()
    expect((await h.run(S, "github_create_issue", { title: "x" })).blocked).toBeUndefined()
    expect((await h.run(S, "bash", { command: "git status" })).blocked).toBeUndefined()
    expect((await h.run(S, "github_create_issue", { title: "y" })).blocked).toBeUndefined()
    expect(await h.tool(S, "github_create_issue", { title: "z" })).toContain('Contract "ask"')
  })
})

describe("only calls that ran count", () => {
  test("a failed edit is given back: after it, 3 writes run and the 4th change is blocked", async () => {
    const h = await afterWrites(0)
    await h.fail(S, "edit", { filePath: "src/a.ts", oldString: "nope", newString: "x" }, "oldString not found")
    for (let i = 1; i <= 3; i++) expect((await h.run(S, "write", write(i))).blocked).toBeUndefined()
    expect(await h.tool(S, "write", write(4))).toContain(STEP_BLOCK)
  })

  test("calls refused after our hook (opencode's permissions, another plugin) are given back", async () => {
    const h = await afterWrites(2)
    for (let i = 0; i < 5; i++)
      await h.fail(S, "write", write(10 + i), "The user has specified a rule which prevents you")
    expect((await h.run(S, "write", write(3))).blocked).toBeUndefined()
    expect(await h.tool(S, "write", write(4))).toContain(STEP_BLOCK)
  })

  test("a call blocked by a contract is not counted", async () => {
    const h = await afterWrites(3)
    for (let i = 0; i < 3; i++) expect(await h.tool(S, "write", write(9))).toContain(STEP_BLOCK)
    await h.user(S, "yes")
    for (let i = 1; i <= 3; i++) expect((await h.run(S, "write", write(i))).blocked).toBeUndefined()
  })

  test("parallel calls in one step never pass the limit; a failed one makes room for the next", async () => {
    const h = await afterWrites(0)
    const calls = ["p1", "p2", "p3", "p4"].map((callID, i) => h.tool(S, "write", write(i), callID))
    const verdicts = await Promise.all(calls)
    expect(verdicts.map((v) => (v ? "blocked" : "ran"))).toEqual(["ran", "ran", "ran", "blocked"])
    await h.partError(S, "p2", "write", write(1))
    expect(await h.tool(S, "write", write(5), "p5")).toBeUndefined()
    expect(await h.tool(S, "write", write(6), "p6")).toContain(STEP_BLOCK)
  })

  test("an error part for a call we never counted, or for another session, changes nothing", async () => {
    const h = await afterWrites(3)
    await h.partError(S, "call_unknown", "write", write(1))
    await h.partError("ses_other", "call_1", "write", write(1))
    expect(await h.tool(S, "write", write(9))).toContain(STEP_BLOCK)
  })

  test("a call still running at a confirmation gives nothing back when it fails later", async () => {
    const h = await afterWrites(2)
    expect(await h.tool(S, "write", write(3), "late")).toBeUndefined()
    await h.user(S, "ok, continue")
    await h.partError(S, "late", "write", write(3))
    for (let i = 1; i <= 3; i++) expect((await h.run(S, "write", write(i))).blocked).toBeUndefined()
    expect(await h.tool(S, "write", write(4))).toContain(STEP_BLOCK)
  })

  test("a subagent's changes count for its root session; its failures are given back to the root", async () => {
    const h = await afterWrites(1)
    await h.child(S, "ses_child")
    expect((await h.run("ses_child", "write", write(2))).blocked).toBeUndefined()
    await h.fail("ses_child", "edit", { filePath: "src/a.ts", oldString: "x", newString: "y" })
    expect((await h.run("ses_child", "write", write(3))).blocked).toBeUndefined()
    expect(await h.tool(S, "write", write(4))).toContain(STEP_BLOCK)
  })
})

describe("/anchor status names the agent's role from the session's first command on", () => {
  test.each([
    ["plan", "role: software-architect (agent plan)"],
    ["build", "role: software-developer (agent build)"],
  ])("a new session's first command under the %s agent", async (agent, line) => {
    const h = await start()
    const text = await h.command("ses_new", "status", agent)
    expect(text).toContain(line)
    expect(text).toContain("step-confirmation")
  })

  test("a switch of agent shows the new role in the same command", async () => {
    const h = await start()
    await h.user(S, "hello", "build")
    expect(await h.command(S, "status", "plan")).toContain("role: software-architect (agent plan)")
    expect(await h.command(S, "", "build")).toContain("role: software-developer (agent build)")
  })

  test("other subcommands are left as they ran", async () => {
    const h = await start()
    const text = await h.command(S, "bypass because", "plan")
    expect(text).toContain("Override 1/3 granted")
    expect(text).not.toContain("role:")
  })
})

describe("block texts tell the truth about what lifts them", () => {
  const forcePush =
    "version: 1\ncontracts:\n  - { id: no-force-push, description: Never rewrite shared history., mode: block, trigger: { type: tool, tools: [bash], args: { command: { contains: 'push --force' } } } }\n  - { id: source-anchor, mode: block }\n"
  const cases: [string, (h: Awaited<ReturnType<typeof start>>) => Promise<string | undefined>, string[], string[]][] = [
    [
      "a step count: a user message lifts it",
      async (h) => {
        for (let i = 1; i <= 3; i++) await h.run(S, "write", write(i))
        return h.tool(S, "write", write(4))
      },
      ["any user message confirms and resets the step counters (step-confirmation)"],
      ["No user message lifts"],
    ],
    [
      "a tool contract: only the human's bypass lifts it",
      // --force-with-lease: the rule's words, and no command the default protection stops
      (h) => h.tool(S, "bash", { command: "git push --force-with-lease" }),
      ["No user message lifts no-force-push", "/anchor bypass <reason> (3 of 3 overrides left)"],
      ["any user message", "confirms and resets"],
    ],
    [
      "an unlessSeen contract: the evidence lifts it",
      (h) => h.tool("ses_fresh", "write", write(1)),
      ['"source-anchor" is lifted once a user message or a tool result matches /'],
      ["any user message", "No user message lifts"],
    ],
  ]
  test.each(cases)("%s", async (_name, call, has, hasNot) => {
    const h = await start({ project: forcePush })
    await h.user(S, "go on. Source: https://example.com/spec")
    await h.user("ses_fresh", "go on", "build")
    const text = (await call(h))!
    expect(text).toBeDefined()
    const [first] = text.split("\n")
    expect(first).toMatch(/^semantic-anchors blocked this (write|bash) call \(rule [a-z-]+: [^\n]+\)\.$/)
    expect(text).not.toContain("`")
    for (const phrase of has) expect(text).toContain(phrase)
    for (const phrase of hasNot) expect(text).not.toContain(phrase)
  })

  test("a change that reaches the step limit and spreads to a 4th directory carries the spread warning", async () => {
    const h = await start()
    await h.user(S, "sketch the design so that we can review it. Source: https://example.com", "plan")
    for (const dir of ["a", "b", "c"])
      expect((await h.run(S, "write", { filePath: `${dir}/x.md`, content: "#" })).blocked).toBeUndefined()
    const text = (await h.tool(S, "write", { filePath: "d/x.md", content: "#" }))!
    expect(text).toContain('Contract "step-confirmation"')
    expect(text).toContain(
      'The call would also have triggered "emergence-anchor" (changes now span 4 top-level directories (a, b, c, d); limit 3)',
    )
    expect(text).toContain("check with the user whether this scope is intended")
  })
})

describe("a warn contract's note reaches the model once per user turn", () => {
  const notes = (outputs: (string | undefined)[]) => outputs.map((o) => (o ?? "").includes("WARN source-anchor"))

  test("5 edits in a turn: the note is on the first only; the next turn has it once again; the log has each", async () => {
    const h = await start({ project: "version: 1\ncontracts:\n  - { id: step-confirmation, enabled: false }\n" })
    await h.user(S, "write the notes")
    const turn1 = []
    for (let i = 1; i <= 5; i++) turn1.push((await h.run(S, "write", write(i))).output)
    expect(notes(turn1)).toEqual([true, false, false, false, false])
    await h.user(S, "and two more")
    const turn2 = [(await h.run(S, "write", write(6))).output, (await h.run(S, "write", write(7))).output]
    expect(notes(turn2)).toEqual([true, false])
    const noted = "semantic-anchors: noted to the agent on a write call: Write only on a cited source (source-anchor)"
    expect(h.logs.filter((l) => l.level === "warn" && l.message === noted)).toHaveLength(7)
  })

  test("a call that failed never showed its note: the next matching call carries it", async () => {
    const h = await start({ project: "version: 1\ncontracts:\n  - { id: step-confirmation, enabled: false }\n" })
    await h.user(S, "write the notes")
    await h.fail(S, "edit", { filePath: "src/a.ts", oldString: "nope", newString: "x" })
    expect(notes([(await h.run(S, "write", write(1))).output, (await h.run(S, "write", write(2))).output])).toEqual([
      true,
      false,
    ])
  })

  test("parallel calls of one step: one of them carries the note", async () => {
    const h = await start({ project: "version: 1\ncontracts:\n  - { id: step-confirmation, enabled: false }\n" })
    await h.user(S, "write the notes")
    const ids = ["q1", "q2", "q3"]
    await Promise.all(ids.map((callID, i) => h.tool(S, "write", write(i), callID)))
    const outputs = []
    for (const [i, callID] of ids.entries()) {
      const output = { title: "write", output: "ok", metadata: {} }
      await h.hooks["tool.execute.after"]({ tool: "write", sessionID: S, callID, args: write(i) }, output)
      outputs.push(output.output)
    }
    expect(notes(outputs)).toEqual([true, false, false])
  })
})

// Fuzz and property tests for semantic-anchors, through `server(input)` and its hooks (harness in
// test/fixtures/semantic-anchors). Properties:
//   1. random configs built from the schema (every key given a valid or a wrong value of a random type, unknown keys,
//      prototype-named keys) never crash it: the plugin starts, every problem names the file and a message, and
//      random tool calls, user messages and /anchor commands never throw anything but a block from
//      tool.execute.before (chat.message and command.execute.before never throw at all);
//   2. random event streams over many sessions with subagents (session.created with parentID, session.deleted,
//      user messages in roots and children) keep one step counter per root session: every decision of
//      step-confirmation equals a small model (a root's 4th changing call since its last user message is blocked;
//      a subagent counts on its root and cannot confirm; deleting a session drops its state);
//   3. hostile shapes of hook input (missing fields, wrong types, odd parts) never throw out of a hook.
// Size: BENCH_FUZZ calls in all (default 1e5); seed BENCH_FUZZ_SEED. Catastrophic regexes are left to the corpus
// (test/corpus-semantic-anchors.test.ts): a fuzzer that found one would hang, not fail.
import { prng, type Rng } from "./lib/prng"
import { describe, expect, test } from "bun:test"
import { MAX_ROOT_SESSIONS, SCHEMA_KEYS } from "../semantic-anchors"
import { start } from "./fixtures/semantic-anchors/harness"

const TOTAL = Math.max(2000, Math.round(Number(process.env.BENCH_FUZZ ?? 1e5)))
const SEED = Number(process.env.BENCH_FUZZ_SEED ?? 20261130) >>> 0
const TIMEOUT = 1_800_000

const BLOCK = /^semantic-anchors blocked this \S+ call \(rule /

// ---------------------------------------------------------------------------------------------------------------
// 1. Random configs from the schema

const SAFE_REGEXES = [
  "\\bgit\\s+push\\b",
  "^rm\\s",
  "secret",
  "(",
  "[a-",
  "a{2,1}",
  "",
  "\\",
  "(?<n>x)\\k<n>",
  "[\\s\\S]{0,20}end$",
  "caf\u00e9",
  "^$",
]
const GLOBS = ["src/**", "**/*.md", "*.ts", "?", "**", "", "../**", "/etc/*", "docs/**/a?.md", "[x]"]
const TOOLS = ["bash", "edit", "write", "read", "*", "mcp_*", "?", "", "todo*"]
const ROLES = ["software-developer", "software-architect", "qa-engineer", "sofware-developer", "custom-role", "", "*"]
const CONTRACT_IDS = [
  "step-confirmation",
  "source-anchor",
  "intent-anchor",
  "boundary-anchor",
  "emergence-anchor",
  "guard-integrity",
  "my-rule",
  "x",
  "Bad Id",
  "",
]

/** A value of a random type: what a user might write by mistake at any key. */
function wrongValue(rng: Rng, depth = 0): unknown {
  return rng.pick<() => unknown>([
    () => null,
    () => rng.chance(0.5),
    () => rng.pick([0, -1, 1, 2.5, 1e9, 3]),
    () => rng.pick(["", "yes", "block", "1", "*", "x".repeat(300)]),
    () => (depth > 2 ? [] : [wrongValue(rng, depth + 1)]),
    () =>
      depth > 2 ? {} : { [rng.pick(["a", "__proto__", "constructor", "type", "regex"])]: wrongValue(rng, depth + 1) },
  ])()
}

/** Valid most of the time, otherwise a wrong value; `valid` makes the valid one. */
const maybe = (rng: Rng, valid: () => unknown, pWrong = 0.15) => (rng.chance(pWrong) ? wrongValue(rng) : valid())

function randomMatcher(rng: Rng): Record<string, unknown> {
  const matcher: Record<string, unknown> = {}
  const kind = rng.pick(SCHEMA_KEYS.matcherKinds)
  matcher[kind] = maybe(rng, () => {
    switch (kind) {
      case "regex":
        return rng.pick(SAFE_REGEXES)
      case "glob":
        return rng.chance(0.5) ? rng.pick(GLOBS) : [rng.pick(GLOBS), rng.pick(GLOBS)]
      case "exists":
        return rng.chance(0.5)
      case "equals":
        return rng.pick(["x", 1, true])
      default:
        return rng.pick(["rm", "--force", "", "secret"])
    }
  })
  if (rng.chance(0.2)) matcher.not = maybe(rng, () => true)
  if (rng.chance(0.1)) matcher.flags = maybe(rng, () => rng.pick(["i", "s", "g", "iu", "x"]))
  if (rng.chance(0.1)) matcher[rng.pick(SCHEMA_KEYS.matcherKinds)] = wrongValue(rng) // two kinds
  if (rng.chance(0.05)) matcher.regx = "typo"
  return matcher
}

function randomTrigger(rng: Rng): unknown {
  const type = rng.chance(0.9) ? rng.pick(SCHEMA_KEYS.triggerTypes) : rng.pick(["tools", "State", "", 1])
  const trigger: Record<string, unknown> = { type }
  if (rng.chance(0.7))
    trigger.tools = maybe(rng, () => (rng.chance(0.3) ? rng.pick(TOOLS) : [rng.pick(TOOLS), rng.pick(TOOLS)]))
  if (type === "tool" || rng.chance(0.1)) {
    if (rng.chance(0.8)) {
      const args: Record<string, unknown> = {}
      for (let i = rng.int(3); i >= 0; i--)
        args[rng.pick(["command", "filePath", "edits.0.filePath", "content", "a.b.c", "__proto__"])] = rng.chance(0.9)
          ? randomMatcher(rng)
          : wrongValue(rng)
      trigger.args = args
    }
    if (rng.chance(0.3)) trigger.unlessSeen = maybe(rng, () => rng.pick(SAFE_REGEXES))
  }
  if (type === "message" || rng.chance(0.1)) {
    if (rng.chance(0.7)) trigger.pattern = maybe(rng, () => rng.pick(SAFE_REGEXES))
    if (rng.chance(0.5)) trigger.unless = maybe(rng, () => rng.pick(SAFE_REGEXES))
    if (rng.chance(0.3)) trigger.minLength = maybe(rng, () => rng.int(100))
  }
  if (type === "state" || rng.chance(0.1)) trigger.every = maybe(rng, () => 1 + rng.int(5))
  if (rng.chance(0.05)) trigger.flags = maybe(rng, () => "i")
  return rng.chance(0.95) ? trigger : wrongValue(rng)
}

function randomContract(rng: Rng, i: number): unknown {
  const contract: Record<string, unknown> = {}
  if (rng.chance(0.95)) contract.id = maybe(rng, () => (rng.chance(0.2) ? rng.pick(CONTRACT_IDS) : `rule-${i}`), 0.05)
  if (rng.chance(0.9)) contract.description = maybe(rng, () => `Rule ${i}.`, 0.05)
  if (rng.chance(0.9)) contract.mode = maybe(rng, () => rng.pick(SCHEMA_KEYS.modes), 0.1)
  if (rng.chance(0.3)) contract.message = maybe(rng, () => "Ask first.")
  if (rng.chance(0.2))
    contract.anchorRefs = maybe(rng, () => [
      rng.pick(["tdd-london-school", "meaningful-human-control", "tdd-londn-school", "nope"]),
    ])
  if (rng.chance(0.3)) contract.roles = maybe(rng, () => [rng.pick(ROLES)])
  if (rng.chance(0.2)) contract.enabled = maybe(rng, () => rng.chance(0.5))
  if (rng.chance(0.1)) contract.locked = maybe(rng, () => true)
  if (rng.chance(0.9)) contract.trigger = randomTrigger(rng)
  if (rng.chance(0.05)) contract[rng.pick(["severity", "__proto__", "Mode"])] = wrongValue(rng)
  return rng.chance(0.97) ? contract : wrongValue(rng)
}

function randomConfig(rng: Rng): Record<string, unknown> {
  const config: Record<string, unknown> = {}
  if (rng.chance(0.9)) config.version = rng.chance(0.9) ? 1 : wrongValue(rng)
  if (rng.chance(0.4))
    config.settings = maybe(rng, () => ({
      maxOverrides: maybe(rng, () => rng.int(5)),
      ...(rng.chance(0.3) ? { confirmPattern: maybe(rng, () => rng.pick([...SAFE_REGEXES, null])) } : {}),
      ...(rng.chance(0.2) ? { secretFiles: maybe(rng, () => [rng.pick(GLOBS), "~/.config/x/*.json"]) } : {}),
      ...(rng.chance(0.2)
        ? { notSecrets: maybe(rng, () => [rng.pick(["sk-test-123456789", "", "x".repeat(300)])]) }
        : {}),
    }))
  if (rng.chance(0.4))
    config.roles = maybe(rng, () => ({
      default: maybe(rng, () => rng.pick(ROLES)),
      agents: maybe(rng, () => ({ build: rng.pick(ROLES), plan: rng.pick(ROLES) })),
    }))
  if (rng.chance(0.3))
    config.presets = maybe(rng, () => ({
      [rng.pick(ROLES)]: maybe(rng, () => [rng.pick(CONTRACT_IDS), rng.pick(CONTRACT_IDS)]),
    }))
  if (rng.chance(0.9))
    config.contracts = maybe(rng, () => Array.from({ length: rng.int(8) }, (_, i) => randomContract(rng, i)), 0.05)
  if (rng.chance(0.05)) config.contract = []
  return config
}

/** What a session does: tool calls with plausible and odd arguments, user messages, /anchor commands. */
const CALLS: [string, unknown][] = [
  ["bash", { command: "git push --force origin main" }],
  ["bash", { command: "rm -rf build && npm test" }],
  ["bash", { command: "cat .opencode/opencode-semantic-anchors.yaml" }],
  // the forms an agent tries after a block (issue: the reader holds), and their data look-alikes
  ["bash", { command: "git --git-dir repo/.git reset --hard" }],
  ["bash", { command: "git -c alias.nuke=reset nuke --hard && git -calias.f=push f origin +main" }],
  ["bash", { command: "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.n GIT_CONFIG_VALUE_0=reset git n --hard" }],
  ["bash", { command: "bash -c 'eval \"$1\"' _ 'git reset --hard'; zsh -c '$1' _ 'rm -rf ~'" }],
  ["bash", { command: "echo $(( $(git reset --hard) + 1 )) >'a`rm -rf /`b'" }],
  ["bash", { command: "cat > f <<'EOF'\ngit reset --hard\nEOF\nBASH_ENV=f bash x.sh" }],
  ["bash", { command: "watch sh -c 'git reset --hard'; rm -rf ~someone/x; GIT.EXE reset --hard" }],
  ["bash", { command: "gh pr create --body-file - <<'EOF'\ngit push --force\nEOF" }],
  ["bash", { command: "bash -n x.sh; busybox rm -rf /tmp/x; git clean -nf; command -V git" }],
  ["bash", { command: "cd .. && rm -rf project; cp notes.txt ../project/; git stash -u", workdir: "src" }],
  // text fed to a shell, programs that run commands, git's prefixes, interpreters (and their near misses)
  ["bash", { command: "printf 'rm -rf /\\n' | bash --norc -s; bash <<< 'rm -rf /'; builtin eval 'rm -rf ~'" }],
  ["bash", { command: "$SHELL -c \"rm -rf /\"; ${BASH} -c 'git push -f'; echo 'ls' | /bin/sh" }],
  ["bash", { command: 'awk \'BEGIN { system("rm\\040-rf\\x20/") ; "rm -rf /" | getline }\'' }],
  ["bash", { command: "parallel rm -rf {1} ::: / ; parallel ::: 'rm -rf /'; xargs --process-slot-var S rm -rf /" }],
  ["bash", { command: "git push --forc origin main; git branch --del --forc x; git worktree remove --forc /tmp/w" }],
  ["bash", { command: "git rm -nrf .; git clean --dry-r --forc; git checkout --forc; git restore --stag a" }],
  ["bash", { command: "xargs sh -c 'wc -l \"$1\"' _; bash -c '\"$1\"' _ 'git reset --hard'; rm -rf /var/tmp/x" }],
  ["bash", { command: `python3 -c "import os; os.system('rm -rf /')"; perl -e 'system("rm", "-rf", "/")'` }],
  ["bash", { command: `node -e "require('child_process').execSync('git push -f')"; ruby -e '\`rm -rf ~\`'` }],
  ["edit", { filePath: "src/a.ts", oldString: "a", newString: "b" }],
  ["write", { filePath: "docs/adr/0001.md", content: "Source: https://example.org" }],
  ["read", { filePath: "secret/key.pem" }],
  ["apply_patch", { patchText: "*** Begin Patch\n*** Update File: src/x.ts\n*** End Patch" }],
  ["edit", { filePath: 42, edits: [{ filePath: null }] }],
  ["mcp_jobs_poll", { a: { b: { c: "secret" } }, __proto__: null }],
  ["todowrite", undefined],
  ["bash", "not an object"],
  ["read", null],
]

describe(`semantic-anchors fuzz (${TOTAL.toLocaleString("en")} calls, seed ${SEED})`, () => {
  test(
    "1: random configs from the schema never crash it; hooks throw only blocks",
    async () => {
      const rng = prng(SEED ^ 11)
      const configs = Math.max(40, Math.round(TOTAL / 400))
      const callsPer = Math.max(10, Math.round((TOTAL * 0.5) / configs))
      let blocks = 0
      let problemsSeen = 0
      for (let c = 0; c < configs; c++) {
        const config = randomConfig(rng)
        const text = rng.chance(0.9) ? JSON.stringify(config) : JSON.stringify(config).slice(0, rng.int(200)) // some cut short
        const where = rng.chance(0.5) ? { project: text } : { global: text }
        const h = await start(where)
        const replay = () => `seed ${SEED}, config ${c}: ${text.slice(0, 400)}`
        const status = await h.status("s0")
        for (const line of status.split("\n").filter((l) => /^ {2}(error|warning): /.test(l))) {
          problemsSeen++
          if (!/^ {2}(error|warning): \S.*\.ya?ml: /.test(line))
            throw new Error(`problem without its file: ${line} (${replay()})`)
        }
        for (let i = 0; i < callsPer; i++) {
          const sessionID = rng.pick(["s1", "s2", "s3"])
          const r = rng.next()
          if (r < 0.8) {
            const [tool, args] = rng.pick(CALLS)
            const message = await h.tool(sessionID, tool, args)
            if (message !== undefined) {
              if (!BLOCK.test(message))
                throw new Error(`tool.execute.before threw a non-block: ${message} (${replay()})`)
              blocks++
            }
          } else if (r < 0.95) {
            await h.user(
              sessionID,
              rng.pick([
                "ok",
                "Fix the bug so that the tests pass.",
                "git push --force please",
                "",
                "x".repeat(50_000),
              ]),
              rng.pick(["build", "plan", "custom", "qa-engineer"]),
            )
          } else {
            const text = await h.command(
              sessionID,
              rng.pick(["status", "bypass", "bypass because", "reload", "nonsense", '"bypass quoted reason"', ""]),
            )
            expect(text).toContain("[semantic-anchors] /anchor")
          }
        }
      }
      expect(blocks).toBeGreaterThan(0)
      expect(problemsSeen).toBeGreaterThan(0)
    },
    TIMEOUT,
  )

  test(
    "2: random session trees: step-confirmation counts per root session, exactly as the model says",
    async () => {
      const rng = prng(SEED ^ 12)
      let budget = Math.round(TOTAL * 0.4)
      let blocks = 0
      while (budget > 0) {
        const h = await start()
        // The model: parent links, per-root count of allowed changing calls since the root's last user message.
        const parent = new Map<string, string>()
        const count = new Map<string, number>()
        const rootOf = (id: string) => {
          while (parent.has(id)) id = parent.get(id)!
          return id
        }
        const ids: string[] = []
        const sessionCount = 2 + rng.int(Math.min(40, MAX_ROOT_SESSIONS - 10))
        for (let step = 0; step < 300 && budget > 0; step++, budget--) {
          const r = rng.next()
          if (r < 0.08 || ids.length === 0) {
            // a new session: a root, or a subagent of an existing one (links only point to older sessions: no cycles)
            const id = `ses_${ids.length}`
            if (ids.length >= sessionCount) continue
            if (ids.length > 0 && rng.chance(0.5)) {
              const p = rng.pick(ids)
              parent.set(id, p)
              await h.child(p, id)
            }
            ids.push(id)
          } else if (r < 0.1) {
            const id = rng.pick(ids)
            await h.deleted(id)
            count.delete(id) // its state (if a root) is dropped; a deleted child is no longer linked
            parent.delete(id)
          } else if (r < 0.25) {
            const id = rng.pick(ids)
            await h.user(id, "ok, continue")
            if (!parent.has(id)) count.set(id, 0) // only a root's own user message confirms
          } else {
            const id = rng.pick(ids)
            const tool = rng.pick(["edit", "write", "bash", "read"])
            const args =
              tool === "bash"
                ? { command: `npm test -- ${step}` }
                : { filePath: `src/f${step}.ts`, content: "x", oldString: "a", newString: "b" }
            const root = rootOf(id)
            const changing = tool !== "read"
            const expected = changing && (count.get(root) ?? 0) >= 3 ? "block" : "allow"
            const message = await h.tool(id, tool, args)
            const got = message === undefined ? "allow" : "block"
            if (got !== expected || (message !== undefined && !message.includes('Contract "step-confirmation"'))) {
              throw new Error(
                `seed ${SEED}: step ${step}: ${tool} in ${id} (root ${root}, count ${count.get(root) ?? 0}) expected ${expected}, got ${message ?? "allow"}`,
              )
            }
            if (got === "allow" && changing) count.set(root, (count.get(root) ?? 0) + 1)
            if (got === "block") blocks++
          }
        }
      }
      expect(blocks).toBeGreaterThan(10)
    },
    TIMEOUT,
  )

  test(
    "3: hostile hook input never throws out of a hook (but a block)",
    async () => {
      const rng = prng(SEED ^ 13)
      const h = await start({
        project:
          "version: 1\ncontracts:\n  - { id: r, description: d, mode: warn, trigger: { type: tool, args: { command: { regex: x } } } }\n",
      })
      const hooks = h.hooks as any
      const odd = () =>
        rng.pick<unknown>([
          undefined,
          null,
          0,
          "",
          "s1",
          {},
          [],
          { sessionID: "s1" },
          { tool: "bash", sessionID: "s1", callID: 5 },
        ])
      const rounds = Math.max(200, Math.round(TOTAL * 0.1))
      for (let i = 0; i < rounds; i++) {
        const which = rng.pick([
          "tool.execute.before",
          "tool.execute.after",
          "chat.message",
          "command.execute.before",
          "event",
          "config",
        ])
        const input = rng.chance(0.5)
          ? odd()
          : {
              tool: rng.pick(["bash", "edit", "anchor_bypass"]),
              sessionID: rng.pick(["s1", "", undefined]),
              callID: "c",
              command: "anchor",
              arguments: rng.pick([undefined, 1, "status", "bypass x"]),
            }
        const output = rng.pick<unknown>([
          undefined,
          null,
          {},
          { args: odd() },
          { parts: odd() },
          { parts: [null, { type: "text" }, { type: "text", text: 5 }] },
          { output: 5, title: null },
          { message: null, parts: [] },
        ])
        try {
          if (which === "event")
            await hooks.event({
              event: rng.chance(0.5)
                ? odd()
                : { type: rng.pick(["session.created", "session.deleted"]), properties: odd() },
            })
          else if (which === "config") await hooks.config(rng.chance(0.5) ? {} : { command: odd(), permission: odd() })
          else await hooks[which](input, output)
        } catch (error) {
          if (which === "tool.execute.before" && error instanceof Error && BLOCK.test(error.message)) continue
          throw new Error(
            `seed ${SEED}: ${which} threw ${String(error)} for input ${JSON.stringify(input)} output ${JSON.stringify(output)}`,
          )
        }
      }
    },
    TIMEOUT,
  )
})

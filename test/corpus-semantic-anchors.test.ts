// The adversarial corpus for semantic-anchors (issue 6), through `server(input)` and the hooks as opencode calls
// them (the harness in test/fixtures/semantic-anchors). Files under test/corpus/semantic-anchors/:
//   *.yaml                  hostile config files, each with its expected outcome in CONFIG_CASES below;
//   hostile-commands.txt    bash commands aimed at the guard's own files (guard-integrity), one expectation each;
//   hostile-edit-paths.txt  edit/write/patch targets aimed at the same files.
// Huge files are generated here rather than committed. An expectation the plugin does not meet yet is a
// test.todo whose name says what should change (`bun test --todo` runs them and expects them to fail).
import { describe, expect, test } from "bun:test"
import { mkdirSync, readFileSync, readdirSync, symlinkSync } from "node:fs"
import { join } from "node:path"
import { PROTECTION_IDS, REGEX_INPUT_CAP } from "../semantic-anchors"
import { edit, start, type Harness } from "./fixtures/semantic-anchors/harness"

const CORPUS = join(import.meta.dir, "corpus", "semantic-anchors")
const corpus = (name: string) => readFileSync(join(CORPUS, name), "utf8")
let session = 0
const fresh = () => `ses_corpus_${++session}`

/** Problems as `/anchor status` lists them: "error: <file>: <path>: <text>" / "warning: ...". */
async function problems(h: Harness): Promise<string[]> {
  const status = await h.status(fresh())
  return status
    .split("\n")
    .filter((line) => /^ {2}(error|warning): /.test(line))
    .map((line) => line.trim())
}
async function activeIds(h: Harness): Promise<string[]> {
  const status = await h.status(fresh())
  return [...status.matchAll(/^ {2}(?:block|warn|info)\s+([a-z0-9-]+)/gm)].map((m) => m[1])
}
async function fileStatus(h: Harness): Promise<string> {
  const status = await h.status(fresh())
  return /\.opencode\/opencode-semantic-anchors\.yaml \(([^)]*)\)/.exec(status)?.[1] ?? "?"
}
/** The built-ins still work: step-confirmation blocks the 4th edit of a session. */
async function builtinsWork(h: Harness) {
  const s = fresh()
  for (let i = 0; i < 3; i++) expect(await h.tool(s, "edit", edit(i))).toBeUndefined()
  expect(await h.tool(s, "edit", edit(3))).toContain('Contract "step-confirmation"')
}

const BUILTINS = ["guard-integrity", ...PROTECTION_IDS, "step-confirmation", "source-anchor", "intent-anchor"]

type ConfigCase = {
  file: string
  status: string // the project file's status in /anchor status
  active: string[] // ids active for software-developer (in status order)
  problems: RegExp[] // each must match one problem line, and there are exactly this many
  also?: (h: Harness) => Promise<void>
}

const CONFIG_CASES: ConfigCase[] = [
  {
    file: "alias-bomb.yaml",
    status: "ignored",
    active: BUILTINS,
    problems: [
      /^error: .*: cannot parse YAML \(Excessive aliasing\); the file is ignored and the other files stay in force$/,
    ],
  },
  {
    file: "alias-fanout.yaml",
    status: "loaded",
    active: BUILTINS,
    problems: [
      ...["a", "b", "c", "d", "e"].map((key) => new RegExp(`^warning: .*: ${key}: unknown key "${key}"`)),
      /^error: .*: contracts\[0\]\.trigger\.tools: must be a non-empty list of tool-name globs/,
      /^error: .*: presets\.software-developer: must be a list of contract ids \(got a list\); the role keeps its previous preset$/,
    ],
  },
  {
    file: "alias-cycle.yaml",
    status: "loaded, 1 new contract",
    active: [...BUILTINS, "still-fine"],
    problems: [
      /^error: .*: contracts\[0\]: must be a mapping/,
      /^warning: .*: contracts\[1\]\.trigger\.args\.self\.type: unknown key "type"/,
      /^warning: .*: contracts\[1\]\.trigger\.args\.self\.tools: unknown key "tools"/,
      /^warning: .*: contracts\[1\]\.trigger\.args\.self\.args: unknown key "args"/,
      /^error: .*: contracts\[1\]\.trigger\.args\.self: needs one of equals, regex/,
    ],
    also: async (h) => {
      // the contract after the cyclic ones works: reading secrets/ warns
      const { output } = await h.run(fresh(), "read", { filePath: "secrets/key.pem" })
      expect(output).toContain("WARN still-fine")
    },
  },
  {
    file: "deep-nesting.yaml",
    status: "ignored",
    active: BUILTINS,
    problems: [/^error: .*: cannot parse YAML \(Maximum call stack size exceeded\.\); the file is ignored/],
  },
  {
    file: "proto-keys.yaml",
    status: "loaded, 1 new contract",
    active: [...BUILTINS, "proto-contract"],
    problems: [
      "__proto__",
      "constructor",
      "contracts\\[0\\]\\.__proto__",
      "contracts\\[0\\]\\.trigger\\.__proto__",
      "contracts\\[0\\]\\.trigger\\.args\\.filePath\\.__proto__",
      "settings\\.__proto__",
    ].map((path) => new RegExp(`^warning: .*: ${path}: unknown key "(__proto__|constructor)"`)),
    also: async (h) => {
      expect(({} as Record<string, unknown>).polluted).toBeUndefined() // nothing reached Object.prototype
      // __proto__ values are not inherited: mode stays warn (not block), the matcher is not negated, not locked
      const s = fresh()
      const { blocked, output } = await h.run(s, "read", { filePath: "secret/a" })
      expect(blocked).toBeUndefined()
      expect(output).toContain("WARN proto-contract")
      expect((await h.run(s, "read", { filePath: "public/a" })).output).not.toContain("proto-contract")
      expect(await h.status(s)).toContain("max 3") // settings.__proto__.maxOverrides: 999 had no effect
    },
  },
  {
    file: "unknown-keys.yaml",
    status: "loaded, 1 new contract",
    active: [...BUILTINS, "typo-everywhere"],
    problems: [
      /^warning: .*: colour: unknown key "colour"/,
      /^warning: .*: contracts\[0\]\.severity: unknown key "severity"/,
      /^warning: .*: contracts\[0\]\.trigger\.tool: unknown key "tool" \(did you mean "tools"\?\)/,
      /^warning: .*: contracts\[0\]\.trigger\.args\.command\.ignoreCase: unknown key "ignoreCase"/,
      /^warning: .*: roles\.agent: unknown key "agent" \(did you mean "agents"\?\)/,
      /^warning: .*: settings\.maxOverride: unknown key "maxOverride" \(did you mean "maxOverrides"\?\)/,
    ],
    also: async (h) => {
      expect(await h.tool(fresh(), "bash", { command: "sudo shutdown -h now" })).toContain('Contract "typo-everywhere"')
      expect(await h.status(fresh())).toContain("max 2") // the valid sibling settings.maxOverrides applies
    },
  },
  {
    file: "duplicate-ids.yaml",
    status: "loaded, 1 new contract",
    active: [...BUILTINS, "dup"],
    problems: [
      /^error: .*: contracts\[1\]\.id: duplicate id "dup" \(also contracts\[0\]\); give each contract its own id$/,
      /^error: .*: contracts\[3\]\.id: duplicate id "source-anchor" \(also contracts\[2\]\)/,
    ],
    also: async (h) => {
      const status = await h.status(fresh())
      expect(status).toMatch(/info\s+source-anchor/) // the first entry for the built-in id applied (mode: info)
      expect((await h.run(fresh(), "read", { filePath: "first/x" })).output).toContain("WARN dup") // the first "dup" is the one
      expect((await h.run(fresh(), "read", { filePath: "second/x" })).blocked).toBeUndefined()
    },
  },
  {
    // Every pattern that can backtrack exponentially is an error that disables its contract (capping the input does
    // not bound exponential time); only safe-regex stays active, and safe inputs still run through it.
    file: "catastrophic-regexes.yaml",
    status: "loaded, 1 new contract",
    active: [...BUILTINS, "safe-regex"],
    problems: [
      /^error: .*: contracts\[0\]\.trigger\.args\.command\.regex: nested quantifier in \/\(a\+\)\+\/ \(a quantified group that itself contains a quantifier\) can take exponential time; rewrite it without a quantified group that itself contains a quantifier/,
      /^error: .*: contracts\[1\]\.trigger\.args\.command\.regex: nested quantifier/,
      /^error: .*: contracts\[2\]\.trigger\.args\.command\.regex: nested quantifier/,
      /^error: .*: contracts\[3\]\.trigger\.pattern: nested quantifier/,
      /^error: .*: contracts\[4\]\.trigger\.unlessSeen: nested quantifier/,
      /^error: .*: contracts\[5\]\.trigger\.args\.command\.regex: overlapping alternation in \/\(a\|a\)\*\/ \(the branches "a" and "a" can match the same text/,
      /^error: .*: contracts\[6\]\.trigger\.args\.command\.regex: overlapping alternation in \/\(a\|aa\)\+\/ \(the branches "a" and "aa"/,
      /^error: .*: contracts\[7\]\.trigger\.args\.command\.regex: large bounded repeat of an optional item in \/\(a\?\)\{25\}\/ \(each of its 25 repeats may match or not\)/,
    ],
    also: async (h) => {
      // Safe inputs run through every one of them without trouble, and the safe regex still matches.
      const s = fresh()
      expect((await h.run(s, "bash", { command: "git push origin main" })).output).toContain("WARN safe-regex")
      expect((await h.run(s, "bash", { command: "b".repeat(REGEX_INPUT_CAP * 3) })).blocked).toBeUndefined()
    },
  },
  {
    file: "duplicate-keys.yaml",
    status: "loaded, 1 new contract",
    active: [...BUILTINS, "twice"],
    problems: [
      /^warning: .*: contracts\[0\]\.mode: key "mode" is written twice in one mapping \(lines 6 and 7\); YAML keeps only the last one, so line 6 has no effect\. Delete one of them$/,
    ],
    also: async (h) => expect(await h.status(fresh())).toMatch(/info\s+twice/), // Bun.YAML: the last key wins, now reported
  },
  { file: "bom-crlf.yaml", status: "loaded, 1 new contract", active: [...BUILTINS, "crlf-contract"], problems: [] },
  {
    // The byte-order mark is dropped when the file is read: the key of line 1 is a key like any other.
    file: "bom-duplicate-first-key.yaml",
    status: "loaded, 1 new contract",
    active: [...BUILTINS, "bom-first-key"],
    problems: [
      /^warning: .*: version: key "version" is written twice in one mapping \(lines 1 and 2\); YAML keeps only the last one, so line 1 has no effect\. Delete one of them$/,
    ],
  },
  { file: "json-form.yaml", status: "loaded, 1 new contract", active: [...BUILTINS, "json-contract"], problems: [] },
  {
    file: "yaml-tags.yaml",
    status: "loaded, 1 new contract",
    active: [...BUILTINS, "tagged"],
    problems: [],
    also: async (h) => {
      // tags are not executed: the description is the plain string, the glob the undecoded text
      expect(await h.status(fresh())).toContain("tagged - function () { return 1 }")
      expect((await h.run(fresh(), "read", { filePath: "secrets/a" })).output).not.toContain("tagged")
    },
  },
  { file: "only-comments.yaml", status: "empty", active: BUILTINS, problems: [] },
  {
    file: "tab-indent.yaml",
    status: "ignored",
    active: BUILTINS,
    problems: [/^error: .*: cannot parse YAML \(Tab characters cannot be used as indentation\)/],
  },
  {
    file: "nul-byte.yaml",
    status: "ignored",
    active: BUILTINS,
    problems: [/^error: .*: cannot parse YAML \(Unexpected character\)/],
  },
  { file: "binary.yaml", status: "ignored", active: BUILTINS, problems: [/^error: .*: cannot parse YAML/] },
  {
    // Examples that do not do what they say, and malformed ones: each an error at its key path; only the contract
    // whose examples hold is added, and step-confirmation keeps its built-in definition (its change is left out).
    file: "broken-examples.yaml",
    status: "loaded, 1 new contract",
    active: [...BUILTINS, "good-examples"],
    problems: [
      /^error: .*: contracts\[0\]\.examples\.fires\[0\]: listed under fires, but the contract lets it pass: tool bash: in tools \[bash\]; args\.cmd: the bash tool has no argument "cmd" \(its arguments: command, timeout, description, workdir\); regex \/\\bgit\\s\+push\\b\.\*--force\/ fails on a missing argument; the contract is left out$/,
      /^error: .*: contracts\[1\]\.examples\.passes\[0\]: listed under passes, but the contract fires: tool bash: in tools \[bash\]; args\.command: contains "push" matched "git push origin main"; the contract is left out$/,
      /^error: .*: contracts\[2\]\.examples: must be a mapping with fires and\/or passes, each a list of examples \(got a list\)$/,
      /^error: .*: contracts\[3\]\.examples\.fires\[0\]: must be a mapping: \{ tool: <name>, args: \{\.\.\.\} \} or \{ message: "\.\.\." \} \(got "bash"\)$/,
      /^error: .*: contracts\[3\]\.examples\.fires\[1\]\.tool: is required: the name of the tool called/,
      /^error: .*: contracts\[3\]\.examples\.fires\[2\]\.args: must be a mapping of argument name to value \(got "ls"\)$/,
      /^error: .*: contracts\[3\]\.examples\.fires\[3\]\.steps: must be a whole number >= 0/,
      /^error: .*: contracts\[3\]\.examples\.fires\[4\]: has both tool and message/,
      /^error: .*: contracts\[3\]\.examples\.passes: must be a list of examples \(got a mapping\)/,
      /^error: .*: contracts\[4\]\.examples\.fires\[0\]: is a user message, but a tool trigger is judged on tool calls/,
      /^error: .*: contracts\[5\]\.examples\.fires\[0\]: is a tool call, but a message trigger is judged on user messages/,
      /^error: .*: contracts\[6\]\.examples\.fires\[0\]: listed under fires, but the contract lets it pass: tool edit: in tools \[edit, write, patch, multiedit, apply_patch, bash\], a changing step; 1 counted since the user's last confirmation, limit 3: this call would be step 2 of 3; this change is left out, the earlier definition stays$/,
    ],
    also: async (h) => {
      expect(await h.status(fresh())).toMatch(/block\s+step-confirmation/) // the change to warn was left out
      const s = fresh()
      expect((await h.run(s, "bash", { command: "git commit -m wip" })).output).toContain("WARN good-examples")
      // the broken rule on push is left out: only the default protection speaks
      const blocked = (await h.run(s, "bash", { command: "git push --force origin main" })).blocked ?? ""
      expect(blocked.split("\n")[0]).toBe(
        "semantic-anchors blocked this bash call (rule protect-remote-history: Never overwrite or delete pushed history).",
      )
    },
  },
  {
    file: "version-string.yaml",
    status: "ignored",
    active: BUILTINS,
    problems: [
      /^error: .*: version: must be the number 1, not the string "1"; write version: 1 without quotes\. The file is ignored$/,
    ],
  },
]

describe("corpus: hostile config files (project file)", () => {
  test("every corpus file has a case", () => {
    const files = readdirSync(CORPUS)
      .filter((f) => f.endsWith(".yaml"))
      .sort()
    expect(files).toEqual(CONFIG_CASES.map((c) => c.file).sort())
  })

  test.each(CONFIG_CASES.map((c) => [c.file, c] as const))("%s", async (_file, c) => {
    const h = await start({ project: corpus(c.file) })
    expect(await fileStatus(h)).toBe(c.status)
    expect(await activeIds(h)).toEqual(c.active)
    const found = await problems(h)
    for (const pattern of c.problems) expect(found.some((line) => pattern.test(line))).toBe(true)
    expect(found.length).toBe(c.problems.length)
    if (c.problems.length) expect(h.toasts.length).toBe(1) // one toast for all problems
    await builtinsWork(h) // the session goes on whatever the file held
    await c.also?.(h)
  })

  test("a nested-quantifier regex is refused (error, contract disabled), not only warned: capping input at 10,000 characters does not bound exponential backtracking (/(a+)+$/ takes ~1 s on 26 characters, hours on 40)", async () => {
    const h = await start({ project: corpus("catastrophic-regexes.yaml") })
    expect(await activeIds(h)).not.toContain("nested-plus")
    expect(
      (await problems(h)).some((line) =>
        /^error: .*contracts\[0\]\.trigger\.args\.command\.regex: nested quantifier/.test(line),
      ),
    ).toBe(true)
  })

  test("alternation and bounded-repeat patterns that backtrack exponentially ((a|a)*, (a|aa)+, (a?){25}a{25}) are reported like nested quantifiers", async () => {
    const h = await start({ project: corpus("catastrophic-regexes.yaml") })
    const found = await problems(h)
    for (const i of [5, 6, 7])
      expect(found.some((line) => line.startsWith("error: ") && line.includes(`contracts[${i}]`))).toBe(true)
    for (const id of ["alternation-overlap", "alternation-prefix", "bounded-repeat"])
      expect(await activeIds(h)).not.toContain(id)
  })

  test("a key written twice in one mapping is reported (Bun.YAML keeps the last silently, so `mode: block` then `mode: info` passes unseen)", async () => {
    expect((await problems(await start({ project: corpus("duplicate-keys.yaml") }))).length).toBeGreaterThan(0)
  })
})

/** `contracts` YAML for n contracts; `extra(i)` adds lines to contract i. */
function manyContracts(n: number, extra: (i: number) => string = () => ""): string {
  let text = "version: 1\ncontracts:\n"
  for (let i = 0; i < n; i++) {
    text += `  - id: c-${i}\n    description: Contract ${i}.\n    mode: warn\n${extra(i)}    trigger: { type: tool, tools: [read], args: { filePath: { glob: "x${i}/**" } } }\n`
  }
  return text
}

describe("corpus: huge files (generated)", () => {
  test("10,000 contracts (1.4 MB) load and all apply", async () => {
    const h = await start({ project: manyContracts(10_000) })
    expect(await fileStatus(h)).toBe("loaded, 10000 new contracts")
    expect(await problems(h)).toEqual([])
    expect((await h.run(fresh(), "read", { filePath: "x9999/a" })).output).toContain("WARN c-9999")
    await builtinsWork(h)
  })

  test("a 10 MB description loads; the block message carries it but the file stays usable", async () => {
    const h = await start({
      project: `version: 1\ncontracts:\n  - id: big\n    description: "${"x".repeat(10_000_000)}"\n    mode: warn\n    trigger: { type: tool, tools: [read] }\n`,
    })
    expect(await fileStatus(h)).toBe("loaded, 1 new contract")
    await builtinsWork(h)
  })

  test("20,000 unknown top-level keys: each is a warning with its path, one toast, the plugin works", async () => {
    const h = await start({
      project: `version: 1\n${Array.from({ length: 20_000 }, (_, i) => `key${i}: ${i}`).join("\n")}\n`,
    })
    const found = await problems(h)
    expect(found.length).toBe(20_000)
    expect(found[19_999]).toMatch(/key19999: unknown key "key19999"/)
    expect(h.toasts.length).toBe(1)
    await builtinsWork(h)
  })

  test("problems are capped in the log per file (the first 50, then one line with the count); the status lists all", async () => {
    const h = await start({
      project: `version: 1\n${Array.from({ length: 20_000 }, (_, i) => `key${i}: ${i}`).join("\n")}\n`,
    })
    expect(h.logs.length).toBeLessThan(200)
    const logged = h.logs.filter((l) => /unknown key "key\d+"/.test(l.message))
    expect(logged.length).toBe(50)
    expect(logged[49].message).toContain('unknown key "key49"')
    expect(
      h.logs.some((l) =>
        /opencode-semantic-anchors\.yaml: 19950 more problems not logged \(20000 in all\); run \/anchor status/.test(
          l.message,
        ),
      ),
    ).toBe(true)
    expect((await problems(h)).length).toBe(20_000)
  })
})

type Expectation = "block" | "allow" | "todo-block" | "todo-allow"

function table(name: string): { expected: Expectation; fields: string[]; line: string }[] {
  return corpus(name)
    .split("\n")
    .filter((line) => line.trim() && !line.startsWith("#"))
    .map((line) => {
      const [expected, ...fields] = line.split("\t")
      return { expected: expected as Expectation, fields, line }
    })
}

describe("corpus: hostile bash commands against the guard's files (guard-integrity)", () => {
  const cases = table("hostile-commands.txt")
  let h: Harness
  const blockedBy = async (command: string) => {
    // guard-integrity alone: the default protection has its own tables (semantic-anchors-protection.test.ts)
    h ??= await start({ project: "version: 1\nsettings:\n  protection: off\n" })
    return h.tool(fresh(), "bash", { command, description: "corpus" })
  }
  const run = (kind: "block" | "allow") => async (command: string) => {
    const message = await blockedBy(command)
    if (kind === "block") expect(message).toContain('Contract "guard-integrity"')
    else expect(message).toBeUndefined()
  }
  for (const c of cases) {
    const command = c.fields[0]
    if (c.expected === "block" || c.expected === "allow")
      test(`${c.expected}: ${command}`, () => run(c.expected as "block" | "allow")(command))
    else
      test.todo(
        `${c.expected === "todo-block" ? "should block" : "should allow"} (heuristic misses it today): ${command}`,
        () => run(c.expected === "todo-block" ? "block" : "allow")(command),
      )
  }
  test("the table covers both outcomes", () => {
    expect(cases.filter((c) => c.expected === "block").length).toBeGreaterThan(30)
    expect(cases.filter((c) => c.expected === "allow").length).toBeGreaterThan(8)
  })
})

describe("corpus: hostile edit targets (guard-integrity)", () => {
  const cases = table("hostile-edit-paths.txt")
  for (const c of cases) {
    const [tool, target] = c.fields
    const name = `${c.expected}: ${tool} ${target.length > 70 ? `${target.slice(0, 70)}...` : target}`
    const check = async () => {
      const h = await start({ project: "version: 1\n" })
      const text = target.replaceAll("{project}", h.dirs.project).replaceAll("\\n", "\n")
      const args = /^(apply_patch|patch)$/.test(tool)
        ? { patchText: text }
        : { filePath: text, content: "x", oldString: "a", newString: "b" }
      const message = await h.tool(fresh(), tool, args)
      if (c.expected.endsWith("block")) expect(message).toContain('Contract "guard-integrity"')
      else expect(message).toBeUndefined()
    }
    if (c.expected.startsWith("todo")) test.todo(name, check)
    else test(name, check)
  }
})

describe("corpus: symlinks onto the guard's files", () => {
  async function withLinks() {
    const h = await start({ project: "version: 1\n" })
    const p = h.dirs.project
    mkdirSync(join(p, "src"), { recursive: true })
    symlinkSync(join(p, ".opencode"), join(p, "src", "dotdir")) // a link to the config directory
    symlinkSync(join(p, ".opencode", "opencode-semantic-anchors.yaml"), join(p, "src", "settings.yaml")) // to the file
    return h
  }

  test("through a linked directory, the config file's own name still gives it away (edit and bash)", async () => {
    const h = await withLinks()
    expect(
      await h.tool(fresh(), "write", { filePath: "src/dotdir/opencode-semantic-anchors.yaml", content: "x" }),
    ).toContain('Contract "guard-integrity"')
    expect(await h.tool(fresh(), "bash", { command: "rm src/dotdir/opencode-semantic-anchors.yaml" })).toContain(
      'Contract "guard-integrity"',
    )
  })

  test("removing the link itself is allowed (the config file is untouched)", async () => {
    const h = await withLinks()
    expect(await h.tool(fresh(), "bash", { command: "rm src/settings.yaml" })).toBeUndefined()
  })

  test("writing through a link whose own name is innocent is blocked (edit/write: the target is resolved with realpath before the check)", async () => {
    const h = await withLinks()
    expect(await h.tool(fresh(), "write", { filePath: "src/settings.yaml", content: "version: 1\n" })).toContain(
      'Contract "guard-integrity"',
    )
    expect(
      await h.tool(fresh(), "edit", {
        filePath: `${h.dirs.project}/src/settings.yaml`,
        oldString: "a",
        newString: "b",
      }),
    ).toContain('Contract "guard-integrity"')
    // a new file in a linked directory: its parent is resolved
    expect(await h.tool(fresh(), "write", { filePath: "src/dotdir/opencode.json", content: "{}" })).toContain(
      'Contract "guard-integrity"',
    )
    expect(await h.tool(fresh(), "write", { filePath: "src/dotdir/notes.md", content: "x" })).toBeUndefined()
  })

  test("a redirect through a link whose own name is innocent is blocked (bash: redirect targets that exist are resolved)", async () => {
    const h = await withLinks()
    expect(await h.tool(fresh(), "bash", { command: "echo 'version: 1' > src/settings.yaml" })).toContain(
      'Contract "guard-integrity"',
    )
    expect(await h.tool(fresh(), "bash", { command: "printf x | tee -a src/settings.yaml" })).toContain(
      'Contract "guard-integrity"',
    )
    expect(await h.tool(fresh(), "bash", { command: "echo x > src/other.txt" })).toBeUndefined()
  })
})

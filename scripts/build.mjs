#!/usr/bin/env node
// Builds the two shipped plugin files from their modules in src/: each module, in the order listed below, is
// concatenated under a banner naming it; imports between modules are dropped, imports of packages are merged at the
// top, and only the plugin's public names stay exported. The result is the file a user installs: one TypeScript
// file with no runtime import (SQLite's amalgamation, marked and acorn are built the same way).
//
//   node scripts/build.mjs           writes loop-guard.ts and semantic-anchors.ts
//   node scripts/build.mjs --check   writes nothing; exits 1 when a committed file differs from a fresh build
//
// The order is the layering: a module imports only from modules before it, types too (shared types: types.ts);
// test/build.test.ts checks that, and that the committed files are fresh. Node alone, no dependency.
import { readFileSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..")

const SHARED_READER = [
  "src/shared/bash-scan.ts",
  "src/shared/bash-words.ts",
  "src/shared/bash-scripts.ts",
  "src/shared/git-words.ts",
  "src/shared/bash-programs.ts",
]

/** Each shipped file and its modules, in order: the last, the entry (hooks.ts), opens with the file's overview. */
export const BUNDLES = [
  {
    out: "semantic-anchors.ts",
    modules: [
      "src/semantic-anchors/constants.ts",
      "src/shared/tools.ts",
      "src/shared/recent-map.ts",
      "src/shared/text.ts",
      ...SHARED_READER,
      "src/semantic-anchors/names.ts",
      "src/semantic-anchors/types.ts",
      "src/semantic-anchors/model.ts",
      "src/semantic-anchors/problems.ts",
      "src/semantic-anchors/values.ts",
      "src/semantic-anchors/command-patterns.ts",
      "src/semantic-anchors/integrity.ts",
      "src/semantic-anchors/sessions.ts",
      "src/semantic-anchors/work-ledger.ts",
      "src/semantic-anchors/secrets.ts",
      "src/semantic-anchors/protection.ts",
      "src/semantic-anchors/verdicts.ts",
      "src/semantic-anchors/examples.ts",
      "src/semantic-anchors/validator.ts",
      "src/semantic-anchors/yaml-keys.ts",
      "src/semantic-anchors/config.ts",
      "src/semantic-anchors/texts.ts",
      "src/semantic-anchors/secret-files.ts",
      "src/semantic-anchors/runtime.ts",
      "src/semantic-anchors/anchor-command.ts",
      "src/semantic-anchors/work-git.ts",
      "src/shared/v2-host.ts",
      "src/semantic-anchors/hooks.ts",
    ],
  },
  {
    out: "loop-guard.ts",
    modules: [
      "src/loop-guard/signatures.ts",
      "src/shared/tools.ts",
      "src/shared/recent-map.ts",
      "src/shared/text.ts",
      ...SHARED_READER,
      "src/loop-guard/results.ts",
      "src/loop-guard/cycle.ts",
      "src/loop-guard/waits.ts",
      "src/loop-guard/steps.ts",
      "src/loop-guard/call-streak.ts",
      "src/loop-guard/wait-rule.ts",
      "src/loop-guard/failure-streak.ts",
      "src/loop-guard/types.ts",
      "src/loop-guard/rules.ts",
      "src/loop-guard/texts.ts",
      "src/loop-guard/asked.ts",
      "src/loop-guard/stream-watcher.ts",
      "src/loop-guard/settings.ts",
      "src/loop-guard/sessions.ts",
      "src/loop-guard/host.ts",
      "src/loop-guard/stream-guard.ts",
      "src/shared/v2-host.ts",
      "src/loop-guard/hooks.ts",
    ],
  },
]

const BANNER_WIDTH = 118
const IMPORT = /^(\/\/ @ts-ignore[^\n]*\n)?import (type )?\{([^}]*)\} from "([^"]+)"\n/gm
const RE_EXPORT = /^export (type )?\{([^}]*)\} from "(\.[^"]+)"\n/gm
const DECLARATION =
  /^export (?=(?:declare )?(?:async )?(?:function\*?|const|let|class|type|interface|enum) +([A-Za-z_$][\w$]*))/gm
const HEADER_COMMENT = /^\/\*\*[\s\S]*?\*\/\n/

const namesIn = (list) =>
  list
    .split(",")
    .map((name) => name.trim())
    .filter(Boolean)

/** One module's parts: its imports of packages, the names it re-exports as public, its code. */
function readModule(path) {
  let code = readFileSync(join(ROOT, path), "utf8")
  const packages = []
  const publicNames = []
  code = code.replace(RE_EXPORT, (_, type, names) => {
    for (const name of namesIn(names)) publicNames.push({ name, type: Boolean(type) })
    return ""
  })
  code = code.replace(IMPORT, (_, ignore, type, names, from) => {
    if (!from.startsWith(".")) packages.push({ from, type: Boolean(type), names: namesIn(names), ignore: ignore ?? "" })
    return ""
  })
  return { path, code, packages, publicNames }
}

/** `import { a, b } from "x"` once per package and kind, in the order first met. */
function mergedImports(modules) {
  const merged = new Map()
  for (const { packages } of modules)
    for (const found of packages) {
      const key = `${found.type}|${found.from}`
      const entry = merged.get(key) ?? { ...found, names: [] }
      for (const name of found.names) if (!entry.names.includes(name)) entry.names.push(name)
      merged.set(key, entry)
    }
  return [...merged.values()]
    .map((it) => `${it.ignore}import ${it.type ? "type " : ""}{ ${it.names.join(", ")} } from "${it.from}"\n`)
    .join("")
}

function banner(path) {
  const text = `// ---- ${path} `
  return text + "-".repeat(Math.max(4, BANNER_WIDTH - text.length))
}

/** The shipped file's text for one bundle. */
export function build(bundle) {
  const modules = bundle.modules.map(readModule)
  const publicNames = new Set(modules.flatMap((it) => it.publicNames.map((entry) => entry.name)))
  const entry = modules[modules.length - 1]
  const header = HEADER_COMMENT.exec(entry.code)
  if (!header)
    throw new Error(`${entry.path}: the entry module (the last) must open with the file's overview (/** ... */)`)
  entry.code = entry.code.slice(header[0].length)
  const parts = [
    `// Generated by scripts/build.mjs from ${bundle.modules.length} modules in src/ (listed in its banners): edit those, then run \`npm run build\`.\n`,
    header[0],
    mergedImports(modules),
  ]
  for (const module of modules) {
    const code = module.code.replace(DECLARATION, (match, name) => (publicNames.has(name) ? match : "")).trim()
    parts.push(`\n${banner(module.path)}\n\n${code}\n`)
  }
  return parts.join("")
}

const MODULE_IMPORT = /^import (?:type )?\{([^}]*)\} from "(\.[^"]+)"/gm

/**
 * What breaks the layering of one bundle: a module that imports from a module later in its order, a type too (or
 * from one the bundle leaves out), or from one neighbour in more than one line. `read(path)` gives a module's text,
 * so a test can try a bundle that breaks it.
 */
export function layeringProblems(bundle, read = (path) => readFileSync(join(ROOT, path), "utf8")) {
  const problems = []
  bundle.modules.forEach((path, index) => {
    const lines = new Map() // neighbour -> its import lines
    for (const [, , from] of read(path).matchAll(MODULE_IMPORT)) lines.set(from, (lines.get(from) ?? 0) + 1)
    for (const [from, count] of lines)
      if (count > 1)
        problems.push(`${path} imports from ${from} in ${count} lines: make them one (\`type\` marks a type)`)
    for (const [, names, from] of read(path).matchAll(MODULE_IMPORT)) {
      const target = join(dirname(path), from) + ".ts"
      const at = bundle.modules.indexOf(target)
      const what = `${path} imports { ${namesIn(names).join(", ")} } from ${target}`
      if (at < 0) problems.push(`${what}, which ${bundle.out} does not list`)
      else if (at > index)
        problems.push(
          `${what}, which comes later in ${bundle.out}: move the code or the module (a type both use: into types.ts)`,
        )
    }
  })
  return problems
}

function main() {
  const check = process.argv.includes("--check")
  let stale = 0
  for (const bundle of BUNDLES) {
    for (const problem of layeringProblems(bundle)) {
      stale++
      console.error(problem)
    }
    const text = build(bundle)
    const path = join(ROOT, bundle.out)
    if (!check) {
      writeFileSync(path, text)
      console.log(`built ${bundle.out} from ${bundle.modules.length} modules`)
    } else if (readFileSync(path, "utf8") !== text) {
      stale++
      console.error(
        `${bundle.out} differs from a fresh build of its modules in src/: run npm run build (never edit it by hand)`,
      )
    }
  }
  if (stale) process.exit(1)
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) main()

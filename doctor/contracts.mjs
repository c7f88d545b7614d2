// @ts-check
// The contract-file check of `./install.sh --check`: reads the person's own semantic-anchors files (the global file,
// or the one OPENCODE_SEMANTIC_ANCHORS_CONFIG names, and the project file of --project) with the validator and the
// YAML reader the plugin itself uses at run time, and prints every problem as opencode's log has it (file, key path,
// fix). No opencode session, no model.
//
// Why: a contract file with an error is skipped (or its broken contract disabled) when opencode starts, and the only
// trace is a toast and a log line. A project can run this in its own CI instead and fail the build.
//
// How: `./install.sh --check` runs it on Bun, the runtime the plugin runs on: the one inside opencode
// (`BUN_BE_BUN=1 opencode doctor/contracts.mjs ...`), else `bun` on PATH:
//   contracts.mjs --plugin /abs/semantic-anchors.ts --project /abs/dir
// The plugin file is imported as it is (its exported resolvePaths, loadConfig and formatProblem), so the check is
// exactly the load of a session started in that directory with this environment (HOME, XDG_CONFIG_HOME,
// OPENCODE_SEMANTIC_ANCHORS_CONFIG). It prints one line per file, then `error: ...` / `warning: ...` per problem,
// then the summary line `contract files: N errors, M warnings` (or `contract files: not checked: <why>`): install.sh
// looks for that last line, which a runner that is not Bun never prints. Exit: 0 no error, 6 at least one error
// (CONTRACT_ERRORS), 1 the check could not run.

import { parseArgs } from "node:util"
import { pathToFileURL } from "node:url"

const CONTRACT_ERRORS = 6

/**
 * The check's lines and exit code, from a loaded config.
 * @param {{ files: { label: string, status: string }[], problems: { severity: string }[] }} config
 * @param {(problem: any) => string} formatProblem
 */
function report(config, formatProblem) {
  const lines = config.files.map((file) => `${file.label}: ${file.status}`)
  for (const problem of config.problems) lines.push(`${problem.severity}: ${formatProblem(problem)}`)
  const errors = config.problems.filter((p) => p.severity === "error").length
  const warnings = config.problems.length - errors
  const plural = (/** @type {number} */ n, /** @type {string} */ word) => `${n} ${word}${n === 1 ? "" : "s"}`
  lines.push(`contract files: ${plural(errors, "error")}, ${plural(warnings, "warning")}`)
  return { lines, code: errors > 0 ? CONTRACT_ERRORS : 0 }
}

/** @param {string} why */
function notChecked(why) {
  console.log(`contract files: not checked: ${why}`)
  return 1
}

async function main() {
  const { values } = parseArgs({ options: { plugin: { type: "string" }, project: { type: "string" } } })
  if (!values.plugin || !values.project)
    return notChecked("usage: contracts.mjs --plugin /abs/semantic-anchors.ts --project /abs/dir")
  let plugin
  try {
    plugin = await import(pathToFileURL(values.plugin).href)
  } catch (error) {
    return notChecked(`${values.plugin} does not load on Bun ${Bun.version}: ${String(error).split("\n")[0]}`)
  }
  if (typeof plugin.loadConfig !== "function" || typeof plugin.resolvePaths !== "function")
    return notChecked(
      `${values.plugin} exports no loadConfig and resolvePaths: not a semantic-anchors.ts this check can read; reinstall it with ./install.sh`,
    )
  const paths = plugin.resolvePaths({ directory: values.project, worktree: values.project }, process.env)
  const { lines, code } = report(await plugin.loadConfig(paths), plugin.formatProblem)
  for (const line of lines) console.log(line)
  return code
}

process.exit(await main())
